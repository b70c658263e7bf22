"""``ioprof report``: re-render report.md, results.csv and plots from a results.json, without
measuring. Verdicts, advice and findings are recomputed from the measurements."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ioprof.core import resultfile

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "report"
HELP = "re-render report.md from a results.json (or its folder) without measuring"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", metavar="RESULTS.json", help="a results.json, or the folder that holds it")


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return report(ns.results)


def report(results_file: str) -> int:
    from ioprof.render import kinds

    loaded = resultfile.load(results_file)
    out = Path(results_file) if Path(results_file).is_dir() else Path(results_file).parent
    path = kinds.write(kinds.conclude(loaded), out)
    print(f"report: {path}")
    return 0
