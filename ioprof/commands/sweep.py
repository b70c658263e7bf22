"""``ioprof sweep``: serial vs multiprocess loader across datasets and worker counts, with the
stage ceilings, a verdict and a report. ``measure`` also serves ``ioprof probe``."""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ioprof.commands import args, prepare_out_dir
from ioprof.conclude.sweep import conclude
from ioprof.core import resultfile
from ioprof.core.config import RESUMABLE_DIFFERENCES, STAGES, SweepConfig
from ioprof.core.errors import IoprofError
from ioprof.core.results import SweepResult

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "sweep"
HELP = "serial vs multiprocess loader across resolutions and worker counts: verdict and report"
EXIT_INTERRUPTED = 130


def add_arguments(p: argparse.ArgumentParser) -> None:
    args.add_data(p)
    args.add_loader(p)
    args.add_device(p)
    args.add_batch(p)
    args.add_training(p)
    args.add_run(p)
    args.add_out(p)
    args.add_inside(p)
    p.add_argument(
        "--no-probe",
        dest="probe",
        action="store_false",
        default=argparse.SUPPRESS,
        help="skip the storage and decode ceilings: end-to-end cells only (quicker; the verdict can then "
        "say input-bound but not which input stage)",
    )
    p.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the interrupted sweep in DIR (same options), keeping its finished cells",
    )


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    stages = (
        STAGES if getattr(ns, "probe", True) else tuple(s for s in STAGES if s not in ("storage", "decode"))
    )
    config = args.config_from(SweepConfig, ns, stages=stages)
    return measure(config, command_line, progress, name=NAME, resume_dir=ns.resume)


def config_differences(previous: dict[str, Any], config: SweepConfig) -> list[str]:
    """Settings in which ``config`` differs from an earlier run's, as "name: old → new"."""
    now = resultfile.to_jsonable(asdict(config))
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
    previous = resultfile.load(path)
    if not isinstance(previous, SweepResult):
        raise IoprofError(f"--resume {resume_dir}: its results.json is from 'ioprof place', not a sweep")
    diffs = config_differences(previous.config, config)
    if diffs:
        raise IoprofError(
            f"--resume {resume_dir}: the configuration differs from the interrupted run ({'; '.join(diffs)}); "
            "repeat that run's options with --resume"
        )
    return previous


def measure(
    config: SweepConfig, command_line: str, progress: Progress, *, name: str, resume_dir: str | None = None
) -> int:
    """Measure what ``config`` asks for; write results.json (after every step), report.md, CSV, plots."""
    # torch and the measuring rooms load only when something is measured: usage errors stay instant
    from ioprof.datasets.dataset import load_datasets
    from ioprof.measure.compute import check_precision, resolve_device, tune
    from ioprof.measure.session import open_session
    from ioprof.runners.sweep import run_sweep

    # torch and the measuring rooms load only when something is measured: usage errors stay instant

    device, device_reason = resolve_device(config.device)
    config = tune(config, device)
    if config.compute.kind == "real":
        check_precision(config.precision, device)
    previous = None
    if resume_dir:
        config = replace(config, out_dir=resume_dir)
        previous = load_resumable(resume_dir, config)
    # a bad --data fails here, before any folder is made
    t0 = time.perf_counter()
    datasets = (
        load_datasets(
            config.data_path,
            config.resolutions,
            config.dataset_images(device.type),
            seed=config.seed,
            cache_dir=config.cache_dir,
            progress=progress,
            stores=True,
        )
        if config.needs_data
        else []
    )
    phases = {"datasets made ready": time.perf_counter() - t0} if datasets else {}
    out = prepare_out_dir(config.out_dir, name)
    results_path = out / "results.json"
    session = open_session(
        command_line, device, device_reason, config.run_length(device.type), config.start_method
    )
    progress(f"compute device: {device} ({device_reason}); writing results to {out}/")
    if session.nvml.reason:
        progress(f"GPU telemetry unavailable: {session.nvml.reason}")

    def checkpoint(partial: SweepResult) -> None:
        _save(conclude(partial), results_path)

    try:
        result = conclude(
            run_sweep(
                config,
                session,
                datasets,
                progress=progress,
                checkpoint=checkpoint,
                previous=previous,
                phases_s=phases,
            )
        )
    except IoprofError as e:
        if results_path.exists():
            raise IoprofError(f"{e} (finished cells are kept in {results_path})") from None
        raise
    checkpoint(result)
    return _render(result, out, results_path, progress)


def _save(result: SweepResult, path: Path) -> None:
    try:
        resultfile.save(result, path)
    except OSError as e:
        raise IoprofError(
            f"cannot write {path} ({e.strerror}); the last complete results.json is kept — "
            "free space there or choose another --out"
        ) from None


def _render(result: SweepResult, out: Path, results_path: Path, progress: Progress) -> int:
    from ioprof.render import kinds, words

    try:
        report = kinds.write(result, out)
    except OSError as e:
        raise IoprofError(
            f"cannot write the report into {out} ({e.strerror}); results.json is complete — free space and run "
            f"ioprof report {results_path}"
        ) from None
    progress(f"report: {report}")
    if result.phases_s:
        resumed = " (the run it resumed included)" if result.run.resumed_from else ""
        progress(f"where the time went{resumed}: " + words.phases(result.phases_s))
    a = result.analysis
    if a is not None and "end-to-end" in result.config.get("stages", ()):
        print(kinds.headline(result))
        for line in words.headline(a, True, [d.label for d in result.datasets]):
            print(f"- {line}")
    print(f"report: {report}")
    return EXIT_INTERRUPTED if result.run.interrupted else 0
