"""``ioprof report``: re-render report.md, results.csv and plots from a results.json, without
measuring. Verdicts, advice and findings are recomputed from the measurements."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ioprof.analysis import analyze
from ioprof.core import resultfile
from ioprof.core.results import DevicesResult, PlaceResult, ProfileResult, ScaleResult, WhatifResult
from ioprof.placement import decide

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "report"
HELP = "re-render report.md from a results.json (or its folder) without measuring"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", metavar="RESULTS.json", help="a results.json, or the folder that holds it")


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return report(ns.results)


def report(results_file: str) -> int:
    from ioprof.render import write_place_report, write_report

    loaded = resultfile.load(results_file)
    out = Path(results_file) if Path(results_file).is_dir() else Path(results_file).parent
    if isinstance(loaded, PlaceResult):
        path = write_place_report(decide(loaded), out)
    elif isinstance(loaded, ProfileResult):
        from ioprof.epochs import conclude
        from ioprof.render import write_profile_report

        path = write_profile_report(conclude(loaded), out)
    elif isinstance(loaded, ScaleResult):
        from ioprof.feeding import conclude as feed
        from ioprof.render import write_scale_report

        path = write_scale_report(feed(loaded), out)
    elif isinstance(loaded, DevicesResult):
        from ioprof.render import write_devices_report

        path = write_devices_report(loaded, out)
    elif isinstance(loaded, WhatifResult):
        from ioprof.ranking import rank
        from ioprof.render import write_whatif_report

        path = write_whatif_report(rank(loaded), out)
    else:
        path = write_report(analyze(loaded), out)
    print(f"report: {path}")
    return 0
