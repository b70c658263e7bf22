"""``report.md`` of ``ioprof whatif``: the alternatives ranked, the code each needs, and what was
not measured here, with why. Pure."""

from __future__ import annotations

from pathlib import Path

from ioprof.conclude.whatif import CONTROL
from ioprof.core.findings import RankedAlternative
from ioprof.core.resultfile import atomic_write_text
from ioprof.core.results import AlternativeResult, WhatifResult
from ioprof.core.thresholds import COMPARE_MIN_EFFECT
from ioprof.render import words
from ioprof.render.fmt import duration, mb, pct, rate, share_ci, size
from ioprof.render.mdtable import table

WHERE = {"data": "your data's storage", "scratch": "scratch", "emulated": "emulated"}


def _cache(a: AlternativeResult) -> str:
    c = a.cell.cache if a.cell is not None else None
    if c is None:
        return "—"
    return f"{c.regime}, {'verified' if c.verified else '**NOT verified**'}"


def _vs_control(x: RankedAlternative) -> str:
    if x.name == "baseline":
        return "—"
    if x.name == CONTROL:
        return "(the storage move)"
    if x.control == "baseline":
        return "your pipeline is its control"
    return f"{x.fix_gain or 0:.2f}× vs the loose files there"


def _on_data(x: RankedAlternative) -> str:
    if x.data_gain is None:
        return "—" if x.control != "baseline" else f"{x.gain:.2f}×"
    return f"{x.data_gain:.2f}×" + (" (estimate)" if x.data_gain_estimated else "")


def _row(i: int, x: RankedAlternative, a: AlternativeResult) -> list[str]:
    # a rate is never below 0: an interval from a few steps that reaches past it is shown from 0
    interval = (
        f" [{rate(max(0.0, x.low))}–{rate(x.high)}]" if x.low is not None and x.high is not None else " [± ?]"
    )
    cost = "—"
    if x.dataset_prep_s is not None and x.dataset_prep_bytes is not None:
        cost = f"{duration(x.dataset_prep_s)}, {size(x.dataset_prep_bytes)}"
    beyond = ("better" if (x.fix_gain or 0) > 1 else "worse") if x.beyond_noise else "no"
    return [
        str(i),
        _label(a),
        rate(x.img_per_s) + interval,
        f"{x.gain:.2f}×",
        _vs_control(x),
        beyond,
        _on_data(x),
        pct(x.busy_share, 0),
        share_ci(a.cell.wait_share()) if a.cell else "—",
        f"{WHERE.get(a.where, a.where)} ({a.where_fs}); {_cache(a)}",
        cost,
    ]


def _rows(result: WhatifResult) -> list[list[str]]:
    r = result.ranking
    if r is None:
        return []
    by = {a.name: a for a in result.alternatives}
    return [_row(i, x, by[x.name]) for i, x in enumerate(r.ranked, 1)]


def _label(a: AlternativeResult) -> str:
    text = words.ALTERNATIVES.get(a.name, a.name)
    if a.name == "cache" and "warm_share" in a.figures:
        text += f" ({pct(a.figures['warm_share'], 0)} of it)"
    return text


_HEAD = [
    "rank",
    "alternative",
    "img/s [95 % interval]",
    "vs current",
    "vs its control",
    "beyond its control's noise",
    "vs current, on your data's storage",
    "accelerator busy",
    "data wait",
    "read from; cache",
    "one-off cost for the whole dataset",
]


def render_whatif_markdown(result: WhatifResult) -> str:
    r = result.ranking
    out = [f"# ioprof whatif — {result.run.started_at[:10]}", "", words.whatif_answer(r, result.setting), ""]
    out += ["## Ranked, each run end to end", "", *table(_HEAD, _rows(result)), ""]
    storage = result.data_storage
    estimate = (
        f"estimated from the bytes per image each reads against the {rate(storage.read_mb_per_s)} MB/s your "
        f"storage delivered read alone, cold, at {storage.concurrency} reader(s) (the lower of that and its own rate)"
        if storage is not None and storage.files
        else "not estimated: your storage was not read alone"
    )
    out += [
        f'"Accelerator busy" = img/s ÷ the compute ceiling ({rate(result.compute.img_per_s)} img/s, '
        f"{result.compute.label}). Each alternative is judged against its **control**, the measurement that shares "
        "its storage and cache regime: your current pipeline for those that read your data where it lives, and "
        "the same loose files copied to the scratch storage for copies made there (pre-resized files, shards) — "
        "so the scratch storage's speed is never credited to a fix. An alternative is better only when its "
        f"interval lies above its control's and it is more than {pct(COMPARE_MIN_EFFECT, 0)} faster (a window "
        "cannot see how a shared machine drifts between one run and the next). On your data's own storage: "
        f"measured where the alternative read it; for copies made on other storage, {estimate}. The one-off cost "
        "of a copy (pre-resized files, shards) is what making it took for the sample, scaled to the whole dataset.",
        "",
    ]
    out += _changes(result) + _knobs(result) + _not_measured(result) + _how(result)
    return "\n".join(out)


def _changes(result: WhatifResult) -> list[str]:
    r = result.ranking
    better = [
        x
        for x in (r.ranked if r else ())
        if x.beyond_noise and (x.fix_gain or 0) > 1 and x.name in words.CODE
    ]
    if not better:
        return []
    out = ["## What to change", ""]
    for x in better:
        out += [
            f"**{words.ALTERNATIVES[x.name]}** ({x.fix_gain or 0:.2f}× over its control):",
            "",
            "```python",
            words.CODE[x.name],
            "```",
            "",
        ]
    return out


def _knobs(result: WhatifResult) -> list[str]:
    p = next((a for a in result.alternatives if a.name == "persistent_workers" and a.measured), None)
    if p is None:
        return []
    fresh, kept = p.figures.get("startup_fresh_s", 0.0), p.figures.get("startup_persistent_s", 0.0)
    saved = (
        f"{duration(fresh - kept)} saved per epoch (`{words.CODE['persistent_workers']}`)"
        if fresh > kept
        else "nothing saved here"
    )
    return [
        "## persistent_workers",
        "",
        f"At the start of each epoch the first batch arrives after {duration(fresh)} with fresh workers and "
        f"{duration(kept)} with persistent ones: {saved}.",
        "",
    ]


def _not_measured(result: WhatifResult) -> list[str]:
    missing = [a for a in result.alternatives if not a.measured]
    if not missing:
        return []
    return (
        ["## Not measured here", ""]
        + [f"- {words.ALTERNATIVES.get(a.name, a.name)}: {words.why_not(a.why_not)}." for a in missing]
        + [""]
    )


def _how(result: WhatifResult) -> list[str]:
    d, m = result.dataset, result.machine
    return [
        "## How this was measured",
        "",
        f"- A shuffled sample of {result.sample_files} files ({mb(result.sample_bytes)}) of `{d.path}` ({d.listed_files} files, "
        f"{size(d.listed_bytes)}, on {d.fs_type}), only read. Each alternative ran end to end on it: the same transforms, "
        f"batch {result.run.batch_size} and training step ({result.compute.label}), cache regime "
        f"{result.config.get('cache')}, until its interval was within ± 5 % or {result.config.get('seconds')} s.",
        f"- Copies and shards were made in a scratch folder in `{result.scratch}` ({result.scratch_fs}; "
        f"{size(result.scratch_bytes)} at most) and removed afterwards. Alternatives read there are marked so; when "
        "that is other storage than the data's, the same loose files were measured there too, as the control of "
        "every copy made there.",
        *(
            [
                f"- The shards were also written to `{result.scratch_store}` in your data's store and streamed from "
                "there (your pipeline on the store is their control), then removed; nothing was written to your "
                "data's prefix."
            ]
            if result.scratch_store
            else []
        ),
        *(
            [
                f"- Only the alternatives asked for were tried (`--only {','.join(result.config['only'])}`): the rest were not."
            ]
            if result.config.get("only")
            else []
        ),
        f"- Machine: {m.cpu_model}, {m.cpu_cores_usable} usable cores; device {result.run.device}.",
        "",
        f"Command: `{result.run.command}`; ioprof {result.run.ioprof_version}.",
        "",
    ]


def write(result: WhatifResult, out_dir: Path) -> Path:
    """Write report.md for ``ioprof whatif``; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "report.md"
    atomic_write_text(report, render_whatif_markdown(result))
    return report


def headline(result: WhatifResult) -> str:
    return words.whatif_answer(result.ranking, result.setting).replace("**", "")
