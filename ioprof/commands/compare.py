"""``ioprof compare A B [C…] [--repeat R…]``: runs of the same command side by side — what changed,
beyond noise. Repeats of the reference are declared by the user, never inferred from equal options.

Exit codes (for CI gates): 0 no matched cell slower beyond the noise; 4 at least one is (the lines
printed name the runs and cells); 3 inconclusive — no cell could be compared with intervals on both
sides; 1 an error; 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ioprof.commands import args, prepare_out_dir, writing_into
from ioprof.core import resultfile
from ioprof.core.errors import IoprofError
from ioprof.core.results import SweepResult

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "compare"
HELP = (
    "compare runs of the same command: what differs, each cell's ratio, beyond noise or not "
    "(exit 4: slower beyond the noise, 3: inconclusive)"
)
EXIT = {"same": 0, "inconclusive": 3, "slower": 4}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs", nargs="+", metavar="RUN", help="results.json files or run folders; the first is the reference"
    )
    p.add_argument(
        "--repeat",
        nargs="+",
        default=[],
        metavar="RUN",
        help="runs you made as repeats of the reference (same command, same machine and data): their spread "
        "sets the noise floor; runs are never taken for repeats because their options are equal",
    )
    args.add_out(p)


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return compare(ns.runs, getattr(ns, "out_dir", None), ns.repeat)


def _load(paths: list[str], repeats: list[str] | None = None) -> list[tuple[str, SweepResult]]:
    from ioprof.conclude.sweep import conclude

    if len(paths) < 2:
        raise IoprofError("compare needs at least two runs: ioprof compare RUN_A RUN_B")
    paths = [*paths, *(repeats or [])]
    loaded = []
    for p in paths:
        r = resultfile.load(p)
        if not isinstance(r, SweepResult):
            raise IoprofError(f"{p}: a {r.kind} result; compare works on sweep, probe and run results")
        loaded.append((str(Path(p)), conclude(r)))
    kinds = {(r.kind, tuple(r.config.get("stages", ()))) for _, r in loaded}
    if len(kinds) > 1:
        what = ", ".join(f"{label}: {r.kind} ({'/'.join(r.config.get('stages', ()))})" for label, r in loaded)
        raise IoprofError(f"these runs are of different commands ({what}); compare runs of one command")
    return loaded


def compare(paths: list[str], out_dir: str | None, repeats: list[str] | None = None) -> int:
    from ioprof.conclude.compare import compare as compare_runs
    from ioprof.render.compare import COMPARE_PNG, headline, outcome_lines, render_compare_markdown
    from ioprof.render.plots import plot_comparison

    loaded = _load(paths, repeats)
    result = compare_runs(loaded[: len(paths)], loaded[len(paths) :])
    out = prepare_out_dir(out_dir, NAME)
    with writing_into(out):
        plot_comparison(result, out / COMPARE_PNG)
        resultfile.atomic_write_text(out / "report.md", render_compare_markdown(result))
        resultfile.atomic_write_text(
            out / "comparison.json", json.dumps(resultfile.to_jsonable(result), indent=2)
        )
    for run in result.runs:
        print(headline(run))
    for line in outcome_lines(result):
        print(line)
    print(f"report: {out / 'report.md'}")
    return EXIT[result.outcome]
