"""The sweep: stage ceilings, then every dataset × loader setting end to end.

Config and session in, result out. A short loop over named steps — the compute and transfer
ceilings, each dataset's storage and decode ceilings, one cell — that keeps what it measured in
a ``Tally`` and hands the caller a checkpoint after every step (to write ``results.json``
atomically), so an interrupted or crashed sweep keeps what it measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from ioprof.core.config import SweepConfig
from ioprof.core.counts import ReadBack
from ioprof.core.errors import IoprofError
from ioprof.core.resultfile import to_jsonable
from ioprof.core.results import (
    SCHEMA_VERSION,
    CellResult,
    ComputeCeiling,
    DatasetCeilings,
    ProbeFailure,
    SweepResult,
    TransferCeiling,
)
from ioprof.datasets.dataset import Dataset
from ioprof.host.pagecache import LEAVE_ALL, held_any, read_back
from ioprof.host.telemetry import open_gpu_sampler
from ioprof.measure.ceilings import compute_ceiling, decode_ceilings, first_line, storage_ceilings
from ioprof.measure.cell import CellPlan, Failures, failed_cell, run_cell
from ioprof.measure.compute import IMAGENET_CLASSES, TrainStep, make_step, probe_transfer
from ioprof.measure.sample import MemorySample, load_sample
from ioprof.measure.session import Progress, Session, put_back
from ioprof.measure.storage import EmulatedStorage


@dataclass
class Tally:
    """What the sweep has measured so far; ``snapshot`` makes it a result."""

    config: SweepConfig
    session: Session
    datasets: list[Dataset]
    compute: ComputeCeiling | None = None
    transfer: tuple[TransferCeiling, ...] = ()
    ceilings: list[DatasetCeilings] = field(default_factory=list)
    cells: list[CellResult] = field(default_factory=list)
    probe_failures: list[ProbeFailure] = field(default_factory=list)
    failures: Failures = field(default_factory=Failures)
    phases_s: dict[str, float] = field(default_factory=dict)
    previous: SweepResult | None = None  # the run resumed, whose finished cells are kept
    read_back: ReadBack | None = None  # the user's cached pages the cold reads evicted, read back

    def timed(self, phase: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, its seconds added to ``phase``."""
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.phases_s[phase] = self.phases_s.get(phase, 0.0) + time.perf_counter() - t0

    def put_back(self, since: float, progress: Progress, *, interrupted: bool = False) -> None:
        """What the cold reads evicted of the user's cached files, read back in no more time than
        the sweep has measured ``since`` — or, interrupted, counted and left (a Ctrl-C asks to stop)."""
        found = next((d.evicted for d in self.datasets if held_any(d.evicted)), None)
        if found is None:
            return
        if interrupted:
            self.read_back = read_back(found, LEAVE_ALL)
            return
        self.read_back = self.timed("cached pages read back", put_back, found, since, progress)

    def snapshot(self, *, interrupted: bool = False, finished: bool = False) -> SweepResult:
        run = self.session.run_info(interrupted=interrupted, finished=finished, read_back=self.read_back)
        if self.previous is not None:
            first = self.previous.run.resumed_from or self.previous.run.started_at
            run = replace(run, resumed_from=first, kept_cells=kept_cells(self.previous))
        return SweepResult(
            schema_version=SCHEMA_VERSION,
            run=run,
            machine=self.session.machine,
            config=to_jsonable(asdict(self.config)),
            datasets=tuple(d.info for d in self.datasets),
            compute=over_the_sweep(self.compute, self.cells),
            transfer=self.transfer,
            ceilings=tuple(self.ceilings),
            cells=tuple(self.cells),
            probe_failures=tuple(self.probe_failures),
            undecodable=self.failures.summary(),
            phases_s=dict(self.phases_s),
        )


def over_the_sweep(compute: ComputeCeiling | None, cells: Sequence[CellResult]) -> ComputeCeiling | None:
    """On the CPU, the ceiling's steps and the serial cells' own, in the order they ran.

    A step on the CPU runs at the host's pace, and a shared host's pace changes from minute to
    minute: a ceiling read once, at the start, can sit wholly below cells measured later. A serial
    cell's step is that same step alone (its loader makes each batch between steps, never during
    one), read at later moments; pooled, the ceiling's rate is the step's over the sweep and its
    interval spans the moods it met. A multiprocess cell's steps share the cores with its workers
    and stay its own (``conclude.sweep``'s own pace). On a GPU, or simulated, as measured."""
    if compute is None or compute.simulated or compute.device != "cpu" or not compute.step_s:
        return compute
    alone = compute.alone()
    pooled = [
        s
        for c in cells
        if c.loader == "serial" and c.status == "ok" and c.batch_size == alone.batch_size
        for s, n in zip(c.step_s, c.images_per_step or [c.batch_size] * len(c.step_s), strict=False)
        if n == alone.batch_size and s > 0
    ]
    if not pooled:
        return alone
    return alone.with_steps((*alone.step_s, *pooled), alone_steps=len(alone.step_s))


def pooled_later(config: SweepConfig, step: TrainStep, device_type: str) -> bool:
    """Whether serial cells will add their steps to the compute ceiling (``over_the_sweep``)."""
    serial = any(s.kind == "serial" for s in config.settings())
    return not step.simulated and device_type == "cpu" and "end-to-end" in config.stages and serial


def run_sweep(
    config: SweepConfig,
    session: Session,
    datasets: list[Dataset],
    *,
    progress: Progress,
    checkpoint: Callable[[SweepResult], None],
    previous: SweepResult | None = None,
    phases_s: dict[str, float] | None = None,
) -> SweepResult:
    """Measure everything the (tuned) config asks for; ``checkpoint`` is called after every step.

    ``previous``: an interrupted run of the same config, whose finished cells and ceilings are kept.
    ``phases_s``: the time already spent before (the datasets made ready), to report with the rest.
    """
    kept = previous.compute.alone() if previous and previous.compute else None
    tally = Tally(config, session, datasets, compute=kept, previous=previous)
    # a resumed run's time is the earlier run's and this one's, phase by phase
    for earlier in (previous.phases_s if previous else {}, phases_s or {}):
        for phase, s in earlier.items():
            tally.phases_s[phase] = tally.phases_s.get(phase, 0.0) + s
    step = _training_step(config, session, datasets)
    emulated = EmulatedStorage(config.storage_profile) if config.storage_profile else None
    since = time.perf_counter()
    try:
        _compute_and_transfer(tally, step, progress)
        checkpoint(tally.snapshot())
        total = len(datasets) * len(config.settings()) if "end-to-end" in config.stages else 0
        for ds in datasets:
            sample = _dataset_ceilings(tally, ds, emulated, previous, progress)
            checkpoint(tally.snapshot())
            for plan in _plans(config, session, ds, emulated, sample) if total else []:
                assert step is not None  # built whenever end-to-end cells are asked for
                position = f"[{len(tally.cells) + 1}/{total}]"
                tally.cells.append(
                    tally.timed(
                        "cells", _one_cell, plan, step, session, tally.failures, previous, position, progress
                    )
                )
                checkpoint(tally.snapshot())
                _check_failures(tally, config)
    except KeyboardInterrupt:
        progress("interrupted: keeping the cells that finished")
        tally.put_back(since, progress, interrupted=True)
        return tally.snapshot(interrupted=True, finished=True)
    except IoprofError:
        tally.put_back(since, progress)
        raise
    tally.put_back(since, progress)
    return tally.snapshot(finished=True)


def _training_step(config: SweepConfig, session: Session, datasets: list[Dataset]) -> TrainStep | None:
    if not {"compute", "end-to-end"} & set(config.stages):
        return None
    classes = max((len(d.images.classes) for d in datasets), default=IMAGENET_CLASSES)
    return make_step(
        config.compute,
        session.device,
        model=config.model,
        num_classes=classes,
        non_blocking=bool(config.non_blocking),
        precision=config.precision,
        channels_last=bool(config.channels_last),
    )


def _compute_and_transfer(tally: Tally, step: TrainStep | None, progress: Progress) -> None:
    """The ceilings that need no dataset: compute (unless kept from an earlier run) and transfer."""
    config, session = tally.config, tally.session
    if step is not None and "compute" in config.stages and tally.compute is None:
        tally.compute = tally.timed(
            "compute ceiling",
            compute_ceiling,
            session,
            step,
            config.compute,
            model=config.model,
            crop_px=config.crop_px,
            progress=progress,
            pooled_later=pooled_later(config, step, session.device.type),
        )
    if "transfer" in config.stages:
        tally.transfer = tuple(
            tally.timed(
                "transfer ceiling", probe_transfer, session.device, session.run.batch_size, config.crop_px
            )
        )


def _sample_if_needed(
    config: SweepConfig,
    ds: Dataset,
    emulated: EmulatedStorage | None,
    progress: Progress,
    read: dict[str, bytes] | None = None,
) -> MemorySample | None:
    """The in-memory sample that decode ceilings and emulated storage read, when either runs;
    ``read``: files the storage ceilings read whole, taken first."""
    if "decode" not in config.stages and emulated is None:
        return None
    sample = load_sample(ds.images, ds.fs, seed=config.seed, kept=read)
    ahead = f" ({sample.kept} of them read by the storage ceilings)" if sample.kept else ""
    progress(
        f"{ds.label}: {sample.files} files ({sample.bytes / 1e6:,.1f} MB) in memory{ahead}; "
        f"reading {'the rest' if sample.kept else 'them'} took {sample.read_s:.1f} s"
    )
    return sample


def _dataset_ceilings(
    tally: Tally,
    ds: Dataset,
    emulated: EmulatedStorage | None,
    previous: SweepResult | None,
    progress: Progress,
) -> MemorySample | None:
    """Storage and decode ceilings of one dataset (kept from an earlier run where it had them),
    and the in-memory sample they read. Emulated storage reads the sample, so it comes first;
    otherwise the storage ceilings do, and the sample keeps the files they read whole instead
    of reading them again (at 1 MB/s a sample of 240 objects took 9.8 s)."""
    config = tally.config
    kept = next((c for c in previous.ceilings if c.dataset == ds.label), None) if previous else None
    storage, real = (kept.storage, kept.real_storage) if kept else ((), None)
    decode = kept.decode if kept else ()
    sample: MemorySample | None = None
    if emulated is not None:
        sample = tally.timed("sample read into memory", _sample_if_needed, config, ds, emulated, progress)
    read: dict[str, bytes] = {}
    if "storage" in config.stages and not storage:
        readers = sorted({s.concurrency for s in config.settings()} | {1})
        storage, real = tally.timed(
            "storage ceilings",
            storage_ceilings,
            ds,
            readers,
            emulated=emulated,
            sample=sample,
            seed=config.seed,
            progress=progress,
            keep=read if emulated is None and "decode" in config.stages and not decode else None,
        )
    if emulated is None:
        sample = tally.timed(
            "sample read into memory", _sample_if_needed, config, ds, emulated, progress, read
        )
        read.clear()
    if "decode" in config.stages and not decode and sample is not None:
        decode, failed = tally.timed(
            "decode ceilings",
            decode_ceilings,
            ds,
            sample,
            config.settings(),
            crop_px=config.crop_px,
            batch_size=tally.session.run.batch_size,
            seed=config.seed,
            start_method=config.start_method,
            progress=progress,
            compute=tally.compute,
            # the storage the cells read through (cold or emulated): decode far above it is not
            # what limits them, and needs no narrower interval (on an 8 Mbit/s link the decode
            # ceilings ran to their 8 s cap, ±7 %, beside a storage ceiling of a tenth of them)
            storage=storage if emulated is not None or config.cache == "cold" else (),
        )
        tally.probe_failures.extend(failed)
    if storage or decode:
        tally.ceilings.append(DatasetCeilings(ds.label, tuple(decode), tuple(storage), real))
    return sample


def _plans(
    config: SweepConfig,
    session: Session,
    ds: Dataset,
    emulated: EmulatedStorage | None,
    sample: MemorySample | None,
) -> list[CellPlan]:
    return [
        CellPlan(
            dataset=ds,
            setting=setting,
            run=session.run,
            crop_px=config.crop_px,
            regime=config.cache,
            pin_memory=bool(config.pin_memory),
            seed=config.seed,
            start_method=config.start_method,
            emulated=emulated,
            sample=sample if emulated is not None else None,
            inside=config.inside,
        )
        for setting in config.settings()
    ]


def _one_cell(
    plan: CellPlan,
    step: TrainStep,
    session: Session,
    failures: Failures,
    previous: SweepResult | None,
    position: str,
    progress: Progress,
) -> CellResult:
    """One cell: kept from an earlier run, measured, or failed with its reason (the sweep goes on)."""
    key = (plan.dataset.label, plan.setting.kind, plan.setting.workers)
    kept = next((c for c in previous.cells if c.key == key and c.status == "ok"), None) if previous else None
    if kept is not None:
        progress.measured(kept, position=f"{position} kept from the earlier run:")
        return kept
    progress(f"{position} {plan.dataset.label} {plan.setting.label}: measuring…")
    t0 = time.perf_counter()
    try:
        cell = run_cell(plan, step, gpu=open_gpu_sampler(session.nvml), failures=failures)
    except torch.cuda.OutOfMemoryError:
        cell = failed_cell(
            plan,
            f"CUDA out of memory at batch size {plan.run.batch_size}; "
            f"try --batch-size {max(1, plan.run.batch_size // 2)}",
        )
    except RuntimeError as e:  # a loader worker died (killed, segfault, out of memory)
        cell = failed_cell(plan, first_line(e))
    progress.measured(cell, position=position, took_s=time.perf_counter() - t0)
    return cell


def _check_failures(tally: Tally, config: SweepConfig) -> None:
    failures = tally.failures
    read = sum(c.images for c in tally.cells) + failures.count
    if read and failures.count / read > config.max_failed_share:
        raise IoprofError(
            f"{failures.count} of {read} samples could not be decoded, more than --max-failed-share "
            f"{config.max_failed_share:g}; fix or remove the files listed in the report of "
            f"{config.data_path or 'the dataset'}, or raise --max-failed-share"
        )


def kept_cells(previous: SweepResult | None) -> int:
    return sum(1 for c in previous.cells if c.status == "ok") if previous else 0
