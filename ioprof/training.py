"""One end-to-end cell: the real loader feeding the training step, timed step by step.

Per measured step: the time blocked in ``next()`` waiting for the batch (data wait) and
the time in the step; on CUDA both from CUDA events on the GPU's clock, with no synchronization
inside the window (see ``steptiming``). Warm-up steps are run, excluded and reported. Bytes read are taken
from the kernel's counters of the loader's own processes while they are alive.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ioprof import iocounters, steptiming
from ioprof.analysis import data_wait_share
from ioprof.compute import TrainStep
from ioprof.config import PREFETCH_FACTOR, RunLength
from ioprof.loader import make_loader
from ioprof.pagecache import FilesystemInfo, prepare
from ioprof.results import CacheInfo, CellResult, GpuTelemetry, IoCounts
from ioprof.steptiming import StepEvents
from ioprof.storage import EmulatedStorage
from ioprof.telemetry import GpuSampler

MAX_FAILURES_KEPT = 20


@dataclass
class Failures:
    """Samples that could not be decoded, across cells (only the first few paths are kept)."""

    count: int = 0
    converted: int = 0
    first: list[tuple[str, str]] = field(default_factory=list)

    def add(self, failures: list[tuple[str, str]], converted: int) -> None:
        self.count += len(failures)
        self.converted += converted
        room = MAX_FAILURES_KEPT - len(self.first)
        self.first.extend(failures[: max(0, room)])


def failed_cell(
    dataset: str, loader: str, workers: int, run: RunLength, cache: CacheInfo, error: str
) -> CellResult:
    """A cell that could not finish: kept in the results with the reason."""
    return CellResult(
        dataset=dataset,
        loader=loader,
        workers=workers,
        batch_size=run.batch_size,
        warmup_steps=run.warmup_steps,
        steps=0,
        images=0,
        elapsed_s=0.0,
        img_per_s=0.0,
        wait_s=(),
        step_s=(),
        data_wait_share=0.0,
        startup_s=0.0,
        io=IoCounts(0, 0, 0, 0.0),
        cache=cache,
        gpu=GpuTelemetry(available=False, reason="cell failed"),
        stopped_by="error",
        status="failed",
        error=error,
    )


def run_cell(
    dataset: str,
    paths: Sequence[str],
    labels: Sequence[int],
    loader: str,
    workers: int,
    run: RunLength,
    step: TrainStep,
    crop_px: int,
    regime: str,
    fs: FilesystemInfo,
    gpu: GpuSampler,
    failures: Failures,
    emulated: EmulatedStorage | None = None,
    pin_memory: bool = False,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> CellResult:
    """Measure one loader setting end to end."""
    n_workers = 0 if loader == "serial" else workers
    cache = prepare(paths, regime, fs)
    total_steps = run.warmup_steps + run.steps
    dl = make_loader(
        paths,
        labels,
        crop_px,
        loader,
        workers,
        run.batch_size,
        (total_steps + PREFETCH_FACTOR * n_workers + 1) * run.batch_size,
        seed,
        pin_memory,
        emulated,
    )
    waits: list[float] = []
    steps: list[float] = []
    images = 0
    stopped_by = "steps"
    children_before = iocounters.child_pids()
    t_created = clock()
    it = iter(dl)
    pids = [os.getpid()] if n_workers == 0 else sorted(iocounters.child_pids() - children_before)
    startup_s = 0.0
    io_before = iocounters.snapshot(pids, clock())
    window_start = clock()
    window_mark = None
    events: list[StepEvents] = []
    event_waits: list[float] = []  # host waits aligned with events (a batch with no images adds on)
    pending_wait = 0.0
    gpu.start()
    telemetry: GpuTelemetry | None = None
    try:
        for i in range(total_steps):
            if i == run.warmup_steps:
                io_before = iocounters.snapshot(pids, clock())
                window_start = io_before.at_s
                window_mark = step.mark()
            t_a = clock()
            batch = next(it)
            t_b = clock()
            if i == 0:
                startup_s = t_b - t_created
            failures.add(batch.failures, batch.converted)
            marks = None
            if batch.images is not None and batch.labels is not None:
                marks = step(batch.images, batch.labels)
            t_c = clock()
            if i >= run.warmup_steps:
                waits.append(t_b - t_a)
                steps.append(t_c - t_b)
                pending_wait += t_b - t_a
                if marks is not None:
                    events.append(marks)
                    event_waits.append(pending_wait)
                    pending_wait = 0.0
                images += 0 if batch.images is None else int(batch.images.shape[0])
                if run.seconds is not None and t_c - window_start >= run.seconds and i + 1 < total_steps:
                    stopped_by = "seconds"
                    break
        step.drain()  # the window ends when the GPU has done its last step, not when it was enqueued
        io_after = iocounters.snapshot(pids, clock())
    finally:
        telemetry = gpu.stop()
        del it  # shuts the workers down
    elapsed = io_after.at_s - window_start
    cuda = None
    if window_mark is not None and events:
        cuda = steptiming.resolve(window_mark, events, event_waits)
        waits = list(cuda.data_stall_s)
        steps = [slot - stall for slot, stall in zip(cuda.slot_s(), waits, strict=True)]
        elapsed = cuda.elapsed_s
    share = data_wait_share(waits, steps)
    return CellResult(
        dataset=dataset,
        loader=loader,
        workers=n_workers,
        batch_size=run.batch_size,
        warmup_steps=run.warmup_steps,
        steps=len(steps),
        images=images,
        elapsed_s=elapsed,
        img_per_s=images / elapsed if elapsed > 0 else 0.0,
        wait_s=tuple(waits),
        step_s=tuple(steps),
        data_wait_share=share,
        startup_s=startup_s,
        io=iocounters.delta(io_before, io_after),
        cache=cache,
        gpu=telemetry,
        stopped_by=stopped_by,
        cuda=cuda,
    )
