"""``ioprof compare A B [C…]``: runs of the same command side by side — what changed, beyond noise."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ioprof import resultfile
from ioprof.commands import args, prepare_out_dir, writing_into
from ioprof.errors import IoprofError
from ioprof.results import SweepResult

if TYPE_CHECKING:
    from ioprof.session import Progress

NAME = "compare"
HELP = "compare runs of the same command: the settings that differ, each cell's ratio, beyond noise or not"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs", nargs="+", metavar="RUN", help="results.json files or run folders; the first is the reference"
    )
    args.add_out(p)


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return compare(ns.runs, getattr(ns, "out_dir", None))


def _load(paths: list[str]) -> list[tuple[str, SweepResult]]:
    from ioprof.analysis import analyze

    if len(paths) < 2:
        raise IoprofError("compare needs at least two runs: ioprof compare RUN_A RUN_B")
    loaded = []
    for p in paths:
        r = resultfile.load(p)
        if not isinstance(r, SweepResult):
            raise IoprofError(f"{p}: a {r.kind} result; compare works on sweep, probe and run results")
        loaded.append((str(Path(p)), analyze(r)))
    kinds = {(r.kind, tuple(r.config.get("stages", ()))) for _, r in loaded}
    if len(kinds) > 1:
        what = ", ".join(f"{label}: {r.kind} ({'/'.join(r.config.get('stages', ()))})" for label, r in loaded)
        raise IoprofError(f"these runs are of different commands ({what}); compare runs of one command")
    return loaded


def compare(paths: list[str], out_dir: str | None) -> int:
    from ioprof.comparison import compare as compare_runs
    from ioprof.render.compare_markdown import COMPARE_PNG, headline, render_compare_markdown
    from ioprof.render.plots import plot_comparison

    result = compare_runs(_load(paths))
    out = prepare_out_dir(out_dir, NAME)
    with writing_into(out):
        plot_comparison(result, out / COMPARE_PNG)
        resultfile.atomic_write_text(out / "report.md", render_compare_markdown(result))
        resultfile.atomic_write_text(
            out / "comparison.json", json.dumps(resultfile.to_jsonable(result), indent=2)
        )
    for run in result.runs:
        print(headline(run))
    print(f"report: {out / 'report.md'}")
    return 0
