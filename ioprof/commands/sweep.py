"""``ioprof sweep`` (and ``ioprof probe``): measure, checkpoint after every cell, render."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ioprof import results
from ioprof.analysis import analyze
from ioprof.commands import prepare_out_dir
from ioprof.compute import check_precision, resolve_device, tune
from ioprof.config import RESUMABLE_DIFFERENCES, SweepConfig
from ioprof.errors import IoprofError
from ioprof.placement import decide
from ioprof.render import write_place_report, write_report
from ioprof.results import PlaceResult, SweepResult, to_jsonable
from ioprof.sweep import load_datasets, run_sweep

EXIT_INTERRUPTED = 130


def config_differences(previous: dict[str, Any], config: SweepConfig) -> list[str]:
    """Settings in which ``config`` differs from an earlier run's, as "name: old → new"."""
    now = to_jsonable(asdict(config))
    return [
        f"{k}: {previous.get(k)!r} → {now.get(k)!r}"
        for k in sorted(set(previous) | set(now))
        # a setting the earlier version did not record cannot be compared
        if k not in RESUMABLE_DIFFERENCES and k in previous and previous.get(k) != now.get(k)
    ]


def load_resumable(resume_dir: str, config: SweepConfig) -> SweepResult:
    """The interrupted run in ``resume_dir``, refused with the reason when its config differs."""
    path = Path(resume_dir) / "results.json"
    if not path.exists():
        raise IoprofError(
            f"--resume {resume_dir}: no results.json there; pass the folder of the interrupted run"
        )
    previous = results.load(path)
    if not isinstance(previous, SweepResult):
        raise IoprofError(f"--resume {resume_dir}: its results.json is from 'ioprof place', not a sweep")
    diffs = config_differences(previous.config, config)
    if diffs:
        raise IoprofError(
            f"--resume {resume_dir}: the configuration differs from the interrupted run ({'; '.join(diffs)}); "
            "repeat that run's options with --resume"
        )
    return previous


def sweep(
    config: SweepConfig,
    command: str,
    name: str,
    progress: Callable[[str], None],
    resume_dir: str | None = None,
) -> int:
    """Run the sweep and write results.json, results.csv, report.md and plots into the out folder."""
    device, _ = resolve_device(config.device)
    config = tune(config, device)
    if config.compute.kind == "real":
        check_precision(config.precision, device)
    previous = None
    if resume_dir:
        config = replace(config, out_dir=resume_dir)
        previous = load_resumable(resume_dir, config)
    # a bad --data fails here, before any folder is made
    images = config.dataset_images(device.type)
    datasets = (
        load_datasets(config.data_path, config.resolutions, images, config.seed, config.cache_dir, progress)
        if config.needs_data
        else []
    )
    out = prepare_out_dir(config.out_dir, name)
    results_path = out / "results.json"
    progress(f"writing results to {out}/")

    def checkpoint(partial: SweepResult) -> None:
        try:
            results.save(analyze(partial), results_path)
        except OSError as e:
            raise IoprofError(
                f"cannot write {results_path} ({e.strerror}); the last complete results.json is kept — "
                "free space there or choose another --out"
            ) from None

    try:
        result = analyze(run_sweep(config, datasets, command, progress, checkpoint, previous))
    except IoprofError as e:
        if results_path.exists():
            raise IoprofError(f"{e} (finished cells are kept in {results_path})") from None
        raise
    checkpoint(result)
    try:
        report = write_report(result, out)
    except OSError as e:
        raise IoprofError(
            f"cannot write the report into {out} ({e.strerror}); results.json is complete — free space and run "
            f"ioprof report {results_path}"
        ) from None
    progress(f"report: {report}")
    a = result.analysis
    if a is not None:
        for line in a.headline:
            print(line)
    print(f"report: {report}")
    return EXIT_INTERRUPTED if result.run.interrupted else 0


def report(results_file: str) -> int:
    """Re-render report.md, results.csv and plots next to a results.json, without measuring."""
    loaded = results.load(results_file)
    out = Path(results_file).parent
    # verdicts are pure: recomputed from the measurements
    if isinstance(loaded, PlaceResult):
        path = write_place_report(decide(loaded), out)
    else:
        path = write_report(analyze(loaded), out)
    print(f"report: {path}")
    return 0
