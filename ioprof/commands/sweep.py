"""``ioprof sweep`` (and ``ioprof probe``): measure, checkpoint after every cell, render."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ioprof import results
from ioprof.analysis import analyze
from ioprof.commands import prepare_out_dir
from ioprof.config import SweepConfig
from ioprof.errors import IoprofError
from ioprof.render import write_report
from ioprof.results import SweepResult
from ioprof.sweep import load_datasets, run_sweep

EXIT_INTERRUPTED = 130


def sweep(config: SweepConfig, command: str, name: str, progress: Callable[[str], None]) -> int:
    """Run the sweep and write results.json, results.csv, report.md and plots into the out folder."""
    datasets = load_datasets(config, progress)  # a bad --data fails here, before any folder is made
    out = prepare_out_dir(config.out_dir, name)
    results_path = out / "results.json"
    progress(f"writing results to {out}/")

    def checkpoint(partial: SweepResult) -> None:
        results.save(analyze(partial), results_path)

    try:
        result = analyze(run_sweep(config, datasets, command, progress, checkpoint))
    except IoprofError as e:
        if results_path.exists():
            raise IoprofError(f"{e} (finished cells are kept in {results_path})") from None
        raise
    results.save(result, results_path)
    report = write_report(result, out)
    progress(f"report: {report}")
    a = result.analysis
    if a is not None:
        for line in a.headline:
            print(line)
    print(f"report: {report}")
    return EXIT_INTERRUPTED if result.run.interrupted else 0


def report(results_file: str) -> int:
    """Re-render report.md, results.csv and plots next to a results.json, without measuring."""
    result = analyze(results.load(results_file))  # verdicts are pure: recomputed from the measurements
    out = Path(results_file).parent
    path = write_report(result, out)
    print(f"report: {path}")
    return 0
