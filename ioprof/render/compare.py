"""``report.md`` of ``ioprof compare``: did the change help, beyond the noise of both runs? Pure."""

from __future__ import annotations

from ioprof.core.comparison import CellComparison, Comparison, RunComparison
from ioprof.render.fmt import pct, rate
from ioprof.render.mdtable import table

COMPARE_PNG = "compare.png"
CHANGE = {"faster": "**faster**", "slower": "**slower**", "within-noise": "within the noise"}


def headline(run: RunComparison) -> str:
    faster = [c for c in run.cells if c.change == "faster"]
    slower = [c for c in run.cells if c.change == "slower"]
    if not run.cells:
        return f"`{run.label}`: no cell matches the reference's."
    parts = []
    if faster:
        parts.append(
            f"{len(faster)} of {len(run.cells)} cells faster (up to {max(c.ratio for c in faster):.2f}×)"
        )
    if slower:
        parts.append(f"{len(slower)} slower (down to {min(c.ratio for c in slower):.2f}×)")
    if not parts:
        parts.append(f"no cell changed beyond the noise of both runs ({len(run.cells)} compared)")
    verdict = "the verdict changed" if run.verdict_changed else "the verdict is the same"
    return f"`{run.label}`: " + ", ".join(parts) + f"; {verdict}."


def verdict_words(v: tuple[str, str, str]) -> str:
    """A run's verdict as the report says it, from (bottleneck, class, dataset)."""
    bottleneck, klass, dataset = v
    if bottleneck == "unknown":
        return "none (no cell finished)"
    if bottleneck == "compute":
        return "compute-bound"
    where = f" ({dataset})" if dataset else ""
    if klass == "borderline":
        return f"borderline input-bound, by {bottleneck}{where}"
    if bottleneck == "undetermined":
        return f"{klass} input-bound, stage undetermined{where}"
    return f"{klass} input-bound by {bottleneck}{where}"


def outcome_lines(c: Comparison) -> list[str]:
    """What the exit code says, and which runs and cells decided it."""
    if c.outcome == "slower":
        return [
            f"slower beyond the noise: `{r.label}` {x.dataset} {x.setting_b} {x.ratio:.2f}×"
            for r in c.runs
            for x in r.slower
        ]
    if c.outcome == "inconclusive":
        return ["inconclusive: no cell could be compared with an interval on both sides"]
    return ["no cell slower beyond the noise"]


def _ratio(c: CellComparison) -> str:
    if c.ratio_low is None or c.ratio_high is None:
        return f"{c.ratio:.2f}× [± ?]"
    return f"{c.ratio:.2f}× [{c.ratio_low:.2f}–{c.ratio_high:.2f}]"


def _run(run: RunComparison, reference: str) -> list[str]:
    out = [f"## `{run.label}` against `{reference}`", ""]
    if run.other_machine:
        out += [
            f"> **Other machine**: {run.machines[0]} against {run.machines[1]} — the difference is the machines' too.",
            "",
        ]
    if run.other_version:
        out += [f"> **Other ioprof version**: {run.versions[0]} against {run.versions[1]}.", ""]
    if run.settings:
        out += [
            "Options that differ:",
            "",
            *table(["option", "reference", "this run"], [list(s) for s in run.settings]),
            "",
        ]
    else:
        out += ["No option differs.", ""]
    if run.environment:
        out += [
            "What else differs (the environment — options do not show it):",
            "",
            *table(["", "reference", "this run"], [list(e) for e in run.environment]),
            "",
        ]
    elif not run.settings:
        out += ["Nothing ioprof records differs either (machine, libraries, filesystems).", ""]
    rows = [
        [
            c.dataset,
            f"{c.setting_a} → {c.setting_b}" if c.setting_a != c.setting_b else c.setting_a,
            rate(c.img_per_s_a),
            rate(c.img_per_s_b),
            _ratio(c),
            pct(c.wait_share_a, 0),
            pct(c.wait_share_b, 0),
            CHANGE[c.change],
        ]
        for c in run.cells
    ]
    head = [
        "dataset",
        "loader",
        "reference img/s",
        "this run img/s",
        "ratio [95 %]",
        "data wait before",
        "after",
        "change",
    ]
    out += [*table(head, rows), ""]
    if run.unmatched:
        out += [f"Cells in only one of the two runs: {', '.join(run.unmatched)}.", ""]
    out += [f"Verdict: {verdict_words(run.verdicts[0])} before; {verdict_words(run.verdicts[1])} now.", ""]
    return out


def render_compare_markdown(c: Comparison) -> str:
    out = ["# ioprof compare", "", f"Reference: `{c.reference}` ({c.kind}).", ""]
    out += [f"- {headline(r)}" for r in c.runs] + [""]
    code = {"same": 0, "inconclusive": 3, "slower": 4}[c.outcome]
    out += [f"Outcome (exit code {code}): " + "; ".join(outcome_lines(c)) + ".", ""]
    out += [f"![img/s of each matched cell, each run]({COMPARE_PNG})", ""]
    for r in c.runs:
        out += _run(r, c.reference)
    out += [
        "## How this was compared",
        "",
        "Cells are matched on dataset, loader and workers; the rest on dataset and loader kind in worker order. "
        "A cell changed only when the two runs' 95 % intervals do not overlap and its rate moved by more than "
        f"{pct(c.min_effect, 0)}: a run's interval describes its own window, and a shared machine drifts more than that "
        "between runs"
        + (
            f" — here {c.repeats} declared repeat(s) of the reference moved up to {pct(c.repeat_spread, 0)} from it, and "
            "set the floor where that is wider than 10 %"
            if c.repeats and c.repeat_spread is not None
            else "; declare repeats of the reference (`--repeat RUN…`: the same command again, same machine and "
            "data) to measure that drift on your machine — runs are never taken for repeats because their "
            "options are equal"
        )
        + ". The ratio's interval is the conservative one: the lower bound of one over the upper bound of the other.",
        "",
    ]
    return "\n".join(out)
