"""One end-to-end cell: the real loader feeding the training step, timed step by step.

Per measured step: the time blocked in ``next()`` waiting for the batch (data wait), the time in
the step, the batch's images and the bytes its samples read; on CUDA the step times come from
CUDA events on the GPU's clock, with no synchronization inside the window (see ``steptiming``).
Warm-up runs past the start-up burst (one ready batch per worker) and is excluded. The window
then runs until the throughput's 95 % interval is within ±5 % — looked at only at fixed step
counts, its intervals widened for those looks (``stats.LOOKS``) — or the run length's cap.

Whatever the cache regime says is true of the measured window: cold cells evict each file after
reading it, and the files read are checked for residency after the window. GPU telemetry, I/O
counters and the mount's own counters cover the window only. A read that fails because the
storage went away ends the cell with ``StorageLost`` (one line for the user, finished cells kept).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from ioprof.core.config import PREFETCH_FACTOR, LoaderSetting, RunLength
from ioprof.core.counts import UNKNOWN_FETCH, CacheInfo, Fetched, IoCounts
from ioprof.core.gpu import GpuTelemetry
from ioprof.core.rates import CellRates, Produced, cell_rates, class_decided
from ioprof.core.results import CellResult, Undecodable
from ioprof.core.stats import LOOKS, MIN_BATCHES, Looks, data_wait_share
from ioprof.core.vocab import cache_regime
from ioprof.datasets.dataset import Dataset
from ioprof.host import iocounters
from ioprof.host.fetched import FetchReadings, FetchSnapshot, MountCounters, bytes_read, decide
from ioprof.host.pagecache import cut_reads, keep_warm, prepare, verify_after, verify_warm_after
from ioprof.host.processes import end_loader_workers, release_free_heap
from ioprof.host.telemetry import GpuSampler
from ioprof.measure import stage_rows, stages, steptiming
from ioprof.measure.compute import TrainStep
from ioprof.measure.inside import InsideRecorder
from ioprof.measure.loader import Batch, batch_bytes_of, make_loader, shard_batches, start_loader, worker_pids
from ioprof.measure.pins import PinTimes
from ioprof.measure.sample import MemorySample
from ioprof.measure.shm import shm_died, shm_failure
from ioprof.measure.steptiming import StepEvents, TimingEvent
from ioprof.measure.storage import EmulatedStorage, check_storage

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

    def summary(self) -> Undecodable:
        return Undecodable(self.count, self.converted, tuple(self.first))


@dataclass(frozen=True)
class CellPlan:
    """Everything one end-to-end cell needs, decided before it runs.

    ``sample``: read from this in-memory sample through ``emulated`` storage instead of the files
    (so that the real device cannot add its cost to the emulated one).
    """

    dataset: Dataset
    setting: LoaderSetting
    run: RunLength
    crop_px: int
    regime: str
    pin_memory: bool = False
    seed: int = 0
    start_method: str | None = None
    emulated: EmulatedStorage | None = None
    sample: MemorySample | None = None
    prefetch_factor: int | None = None  # DataLoader's default (2) when None
    keep_warm: frozenset[str] = frozenset()  # cold regime: files left resident (the share RAM would hold)
    loader: LoaderFactory | None = None  # another input pipeline than ioprof's DataLoader (``whatif``)
    inside: bool = True  # stages timed in the workers, their memory and threads read (``inside``)
    fetch_threads: int = 0  # a batch's reads made by this many threads in each worker (``ThreadedFetch``)
    in_order: bool = True  # False: batches handed over as they are made (DataLoader's in_order)


# Builds an alternative input pipeline for a cell: (plan, paths, labels, blobs, cache) → batches.
LoaderFactory = Callable[
    ["CellPlan", Sequence[str], Sequence[int], Sequence[bytes] | None, CacheInfo], Iterable[Batch]
]


def failed_cell(plan: CellPlan, error: str) -> CellResult:
    """A cell that could not finish: kept in the results with the reason."""
    return CellResult(
        dataset=plan.dataset.label,
        loader=plan.setting.kind,
        workers=plan.setting.workers,
        batch_size=plan.run.batch_size,
        warmup_steps=plan.run.warmup_for(plan.setting),
        steps=0,
        images=0,
        elapsed_s=0.0,
        img_per_s=0.0,
        wait_s=(),
        step_s=(),
        data_wait_share=0.0,
        startup_s=0.0,
        io=IoCounts(0, 0, 0, 0.0),
        cache=CacheInfo(
            cache_regime(plan.regime), 0.0, False, "", "cell failed before the cache was prepared"
        ),
        gpu=GpuTelemetry(available=False, reason="cell failed"),
        stopped_by="error",
        status="failed",
        error=error,
    )


@dataclass
class _Window:
    """What the measured window records, step by step."""

    waits: list[float] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)
    images: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)  # the files the workers were reading when ended
    events: list[StepEvents] = field(default_factory=list)
    event_waits: list[float] = field(default_factory=list)  # host waits aligned with events
    pending_wait: float = 0.0
    looks: Looks | None = None  # when the stopping rule may look at the interval
    retries: int = 0  # requests the object store's client repeated for the window's samples
    readings: FetchReadings | None = None  # the fetch counters, read at step boundaries
    # every batch's call and return, warm-up included: (pass, k, call, return) — its hand-over
    handed: list[tuple[int, int, float, float]] = field(default_factory=list)

    def add(self, wait: float, step: float, batch: Batch, marks: StepEvents | None) -> None:
        self.waits.append(wait)
        self.steps.append(step)
        self.images.append(0 if batch.images is None else int(batch.images.shape[0]))
        self.nbytes.append(batch.bytes_read)
        self.retries += batch.retries
        if len(self.paths) < 4096:
            self.paths.extend(batch.paths)
        self.pending_wait += wait
        if marks is not None:  # a batch with no images adds its wait to the next step's
            self.events.append(marks)
            self.event_waits.append(self.pending_wait)
            self.pending_wait = 0.0

    def stop_reason(
        self,
        run: RunLength,
        setting: LoaderSetting,
        elapsed_s: float,
        produced: Callable[[], Sequence[Produced]] = tuple,
    ) -> str:
        """Why the window should end now ("" to go on): steps, seconds, or an answer decided — the
        wait share's class on one side of each threshold and the rate within ± the target
        (``interval``), or within ± ``decided_rel_half_width`` (``decided``). Looked at only at
        whole turns of the workers (``stats.Looks``) — but where the workers outpace the step, whose
        batches then wait for no turn, from the first step count on — the workers' batches read then."""
        n = len(self.waits)
        if n >= run.max_steps:
            return "steps"
        if run.max_seconds is not None and elapsed_s >= run.max_seconds:
            return "seconds"
        if run.fixed:
            return ""
        if self.looks is None:
            self.looks = Looks(
                run.min_steps, run.min_seconds, unit=setting.concurrency, cap_s=run.max_seconds
            )
        looks = self.looks
        early = not looks.base and n >= looks.first and elapsed_s >= looks.min_seconds and n % looks.unit
        if early and self._rates(setting, elapsed_s, produced, looks.count).method == "steps":
            looks.unit = 1
        if not looks.due(n, elapsed_s):
            return ""
        rates = self._rates(setting, elapsed_s, produced, looks.count)
        rate = rates.throughput
        if rate.batches < MIN_BATCHES or not class_decided(rates.wait_share):
            return ""
        if rate.rel_half_width <= run.target_rel_half_width:
            return "interval"
        return "decided" if rate.rel_half_width <= run.decided_rel_half_width else ""

    def _rates(
        self, setting: LoaderSetting, elapsed_s: float, produced: Callable[[], Sequence[Produced]], looks: int
    ) -> CellRates:
        images = [float(i) for i in self.images]
        return cell_rates(
            images=images,
            wait_s=self.waits,
            step_s=self.steps,
            img_per_s=sum(images) / elapsed_s if elapsed_s > 0 else 0.0,
            workers=setting.workers,
            produced=produced() if setting.workers else (),
            looks=looks,
        )


def _cell_loader(plan: CellPlan, stage_folder: str) -> tuple[Iterable[Batch], CacheInfo]:
    """The cell's input pipeline (ioprof's DataLoader or an alternative's), its files in the
    cache regime asked for — or an in-memory sample read through emulated storage."""
    ds, setting, run = plan.dataset, plan.setting, plan.run
    if plan.sample is not None:
        paths, labels, blobs = plan.sample.paths, plan.sample.labels, plan.sample.blobs
        cache = CacheInfo(
            "memory", 1.0, True, "in-process", "an in-memory sample read through emulated storage"
        )
    else:
        paths, labels, blobs = ds.images.paths, ds.images.labels, None
        cache = prepare(paths, plan.regime, ds.fs, ds.evicted)
        if plan.keep_warm:  # the share the page cache would hold: warmed after the rest was evicted
            cache = keep_warm(cache, sorted(plan.keep_warm), len(paths))
    if plan.loader is not None:
        return plan.loader(plan, paths, labels, blobs, cache), cache
    if ds.images.layout == "shards" and plan.sample is None:  # streamed, as a WebDataset loop reads them
        init = stages.WorkerStages(stage_folder, 0, None) if plan.inside else None
        return shard_batches(plan, paths, None, cache, init), cache
    warmup = run.warmup_for(setting)
    dl = make_loader(
        paths,
        labels,
        setting=setting,
        crop_px=plan.crop_px,
        batch_size=run.batch_size,
        num_samples=(warmup + run.max_steps + PREFETCH_FACTOR * setting.workers + 1) * run.batch_size,
        seed=plan.seed,
        pin_memory=plan.pin_memory,
        blobs=blobs,
        emulated=plan.emulated,
        evict_after_read=cache.evict_after_read,
        start_method=plan.start_method,
        prefetch_factor=plan.prefetch_factor,
        keep_warm=plan.keep_warm,
        worker_init_fn=stages.WorkerStages(stage_folder, 0, None) if plan.inside else None,
        fetch_threads=plan.fetch_threads,
        in_order=plan.in_order,
    )
    return dl, cache


def run_cell(
    plan: CellPlan,
    step: TrainStep,
    *,
    gpu: GpuSampler,
    failures: Failures,
    clock: Callable[[], float] = time.perf_counter,
) -> CellResult:
    """Measure one loader setting end to end (a setting whose batches in flight cannot fit in
    /dev/shm is refused before it starts, and a worker that dies of it is said to: ``ShmTooSmall``)."""
    folder = tempfile.mkdtemp(prefix="ioprof-stages-")
    pins = PinTimes()
    if plan.pin_memory and plan.inside:
        pins.install()
    try:
        return _run_cell(plan, step, gpu, failures, clock, folder, pins)
    except RuntimeError as e:
        if shm_failure(e):
            shm_died(_batch_bytes(plan), plan.prefetch_factor or PREFETCH_FACTOR, plan.setting.workers, e)
        raise
    finally:
        pins.uninstall()
        shutil.rmtree(folder, ignore_errors=True)


def _batch_bytes(plan: CellPlan) -> int:
    return batch_bytes_of(plan.run.batch_size, plan.crop_px)


def _run_cell(
    plan: CellPlan,
    step: TrainStep,
    gpu: GpuSampler,
    failures: Failures,
    clock: Callable[[], float],
    folder: str,
    pins: PinTimes,
) -> CellResult:
    ds, setting, run = plan.dataset, plan.setting, plan.run
    dl, cache = _cell_loader(plan, folder)
    warmup, drain = run.warmup_for(setting), run.drained_for(setting)
    mount = MountCounters(ds.fs)
    window = _Window()
    inside = _recorder(plan, folder)  # /dev/shm read before any batch is in it
    t_created = clock()
    it, pids, undo = _iterate(dl, plan, folder)
    readings = window.readings = FetchReadings(pids, mount)
    if plan.inside:
        # before the warm-up, not at the window's start: reading a process's memory takes tens of
        # ms, during which workers would read ahead the window's batches before its counters start
        inside.read(pids)
    startup_s, stopped_by = 0.0, ""
    telemetry: GpuTelemetry | None = None
    try:
        for i in range(warmup + run.max_steps):
            if i == warmup:
                inside.read_if_stale(pids)  # a long warm-up: the window starts with a reading
                io_before, mount_before = readings.open(clock())
                window_start, window_mark = io_before.at_s, step.mark()
                made = partial(_produced_now, folder, window_start, clock)  # the workers' batches so far
                gpu.start()
            t_a = clock()
            batch = next(it)
            t_b = clock()
            window.handed.append((0, i, t_a, t_b))
            if i == 0:
                startup_s = t_b - t_created
                inside.first_batch((batch.images, batch.labels))
            if batch.lost is not None:
                path, code = batch.lost
                check_storage(ds.root, ds.fs, OSError(code, os.strerror(code), path))
            failures.add(batch.failures, batch.converted)
            # the workers' start-up burst (their first batches, made together while they started)
            # is drained without a step: training on it would cost a step each and tell nothing
            marks = _train(step, batch) if i >= drain else None
            t_c = clock()
            if i >= warmup:
                window.add(t_b - t_a, t_c - t_b, batch, marks)
                stopped_by = window.stop_reason(run, setting, t_c - window_start, made)
                if stopped_by:
                    break
                readings.step(len(window.waits), clock())
        step.drain()  # the window ends when the GPU has done its last step, not when it was enqueued
        io_after, mount_after = readings.close(len(window.waits), clock())
    finally:
        if plan.inside and window.waits:  # after the window, for the same reason
            inside.read(pids)
        telemetry = gpu.stop()
        if undo is not None:
            undo()
        # the window is over: what the workers make now is not measured
        window.cut = _unfinished_reads(plan, cache, end_loader_workers(it))
        del it
    result = _cell_result(
        plan,
        window,
        cache,
        startup_s,
        stopped_by or "steps",
        telemetry,
        io=(io_before, io_after),
        window_mark=window_mark,
        mount=(mount_before, mount_after),
    )
    if not plan.inside:
        return result
    return _looked_inside(result, plan, inside, window, (window_start, io_after.at_s, t_created), pins)


def _looked_inside(
    result: CellResult,
    plan: CellPlan,
    inside: InsideRecorder,
    window: _Window,
    span: tuple[float, float, float],
    pins: PinTimes,
) -> CellResult:
    """The cell with what its workers made over the window (``span``: its start and end, and when
    the iterator was made) and the look inside: their stages, memory and cores, and — its one pass,
    batches in order — what its slow samples cost the loop."""
    start, end, pass_start = span
    handed = window.handed
    rows = inside.rows(None)  # read once: what the workers made, their stages and their hand-over
    if plan.setting.workers:
        result = replace(result, produced=stage_rows.produced_in(rows, start, end))
    main = [(stages.PIN, pins.between(None, start, end)), (stages.WAIT, window.waits)]
    seen = inside.result(start, end, main, rows=rows)
    if plan.setting.workers and plan.in_order and handed:
        first = len(handed) - len(window.waits)
        seen = inside.with_handover(
            seen, [pass_start], handed, [(0, i) for i in range(first, len(handed))], rows=rows
        )
    return replace(result, inside=seen)


def _unfinished_reads(plan: CellPlan, cache: CacheInfo, open_paths: list[str]) -> list[str]:
    """The files of the dataset that workers ended mid-read had open (``cut_reads``)."""
    if not _reads_files(plan):
        return []
    return cut_reads(plan.dataset.root, open_paths, cache)


def _train(step: TrainStep, batch: Batch) -> StepEvents | None:
    """One training step on the batch (none for a batch without images)."""
    if batch.images is None or batch.labels is None:
        return None
    return step(batch.images, batch.labels)


def _produced_now(folder: str, start_s: float, clock: Callable[[], float]) -> tuple[Produced, ...]:
    """The batches the workers completed from ``start_s`` until now, each with its cycle."""
    return stage_rows.produced(folder, start_s, clock())


def _iterate(
    dl: Iterable[Batch], plan: CellPlan, folder: str
) -> tuple[Any, list[int], Callable[[], None] | None]:
    """The loader's iterator, the pids that load (its workers, or this process), and — for a
    loader without workers — how to undo the stage timers put on this process's dataset."""
    children_before = iocounters.child_pids()
    if plan.setting.processes:
        release_free_heap()  # a step after the fork copies every page it writes; free ones need not be
    it = start_loader(dl)
    undo = None
    if plan.inside and plan.loader is None and not plan.setting.workers:
        undo = stages.time_in_process(it, folder, 0, getattr(dl, "dataset", None))
    if plan.setting.processes == 0:
        return it, [os.getpid()], undo
    return it, worker_pids(it) or sorted(iocounters.child_pids() - children_before), undo


def _recorder(plan: CellPlan, folder: str) -> InsideRecorder:
    workers = plan.setting.workers
    files = plan.dataset.info.samples or len(plan.dataset.images.paths)  # shards: their samples
    return InsideRecorder(
        folder=folder,
        tag=0,
        workers=workers,
        prefetch_factor=(plan.prefetch_factor or PREFETCH_FACTOR) if workers else 0,
        pin_memory=plan.pin_memory,
        persistent_workers=False,
        dataset_items=files,
        pauses=False,
    )


def _cell_result(
    plan: CellPlan,
    window: _Window,
    cache: CacheInfo,
    startup_s: float,
    stopped_by: str,
    telemetry: GpuTelemetry,
    *,
    io: tuple[iocounters.Snapshot, iocounters.Snapshot],
    window_mark: TimingEvent | None,
    mount: tuple[FetchSnapshot, FetchSnapshot],
) -> CellResult:
    """The finished window as a result: CUDA events resolved, cache verified, bytes fetched counted."""
    counts = iocounters.delta(*io)
    waits, steps, elapsed = window.waits, window.steps, counts.window_s
    per_step_bytes = list(window.nbytes)  # every step's, before CUDA's figures drop those without images
    cuda = None
    if window_mark is not None and window.events:
        cuda = steptiming.resolve(window_mark, window.events, window.event_waits)
        waits = list(cuda.data_stall_s)
        steps = [slot - stall for slot, stall in zip(cuda.slot_s(), waits, strict=True)]
        elapsed = cuda.elapsed_s
        # events exist only for steps with images: keep the per-step figures aligned with them
        kept = [i for i, n in enumerate(window.images) if n]
        window.images = [window.images[i] for i in kept]
        window.nbytes = [window.nbytes[i] for i in kept]
    cache = _cold_after(plan, cache, window)
    by_workers = _workers_read_files(plan)
    read_in_window = bytes_read(sum(window.nbytes), counts, by_workers)
    fetched = (
        _fetched(plan, cache, counts.read_bytes, read_in_window, mount) if window.waits else UNKNOWN_FETCH
    )
    cache = verify_warm_after(cache, fetched, read_in_window, plan.dataset.fs)
    segments = (
        window.readings.segments(
            lambda piece, steps, ends: _fetched(
                plan,
                cache,
                piece.read_bytes,
                bytes_read(sum(per_step_bytes[slice(*steps)]), piece, by_workers),
                ends,
            ),
            fetched,
        )
        if window.readings is not None
        else ()
    )
    images = sum(window.images)
    return CellResult(
        dataset=plan.dataset.label,
        loader=plan.setting.kind,
        workers=plan.setting.workers,
        batch_size=plan.run.batch_size,
        warmup_steps=plan.run.warmup_for(plan.setting),
        steps=len(steps),
        images=images,
        elapsed_s=elapsed,
        img_per_s=images / elapsed if elapsed > 0 else 0.0,
        wait_s=tuple(waits),
        step_s=tuple(steps),
        data_wait_share=data_wait_share(waits, steps),
        startup_s=startup_s,
        io=counts,
        cache=cache,
        gpu=telemetry,
        stopped_by=stopped_by,
        cuda=cuda,
        images_per_step=tuple(window.images),
        bytes_per_step=tuple(window.nbytes),
        fetched=fetched,
        start_method=(plan.start_method or _default_start_method()) if plan.setting.workers else "",
        looks=1 if plan.run.fixed else (window.looks.count if window.looks else LOOKS),
        retries=window.retries,
        window_wall_s=(io[0].wall_s, io[1].wall_s),
        fetched_segments=segments,
        reads_counted="workers" if by_workers else "batches",
    )


def _cold_after(plan: CellPlan, cache: CacheInfo, window: _Window) -> CacheInfo:
    """``cache`` checked on the files the window read, as they are after it (``verify_after``):
    not the share kept warm, meant to stay resident; nothing where no page of this host holds them
    (an object store) or none was read from storage (a sample held in memory)."""
    if not _reads_files(plan):
        return cache
    return verify_after(cache, [p for p in window.paths if p not in plan.keep_warm], window.cut)


def _workers_read_files(plan: CellPlan) -> bool:
    """Whether the cell's reads are its worker processes' reads of files (``fetched.bytes_read``):
    not an in-memory sample's, nor an object store's GETs (a socket's bytes, no file's)."""
    return plan.setting.processes > 0 and _reads_files(plan)


def _reads_files(plan: CellPlan) -> bool:
    """Whether the cell's loader reads files of this host (pages in its cache): not an in-memory
    sample, nor an object store's objects."""
    return plan.sample is None and not plan.dataset.fs.object_store


def _fetched(
    plan: CellPlan,
    cache: CacheInfo,
    read_bytes: int,
    requested: int,
    mount: tuple[FetchSnapshot, FetchSnapshot],
) -> Fetched:
    """The bytes fetched between two readings of the counters (the window, or a segment of it)."""
    return decide(
        plan.dataset.fs,
        cache,
        read_bytes=read_bytes,
        requested_bytes=requested,
        before=mount[0],
        after=mount[1],
        emulated=plan.emulated is not None,
    )


def _default_start_method() -> str:
    import multiprocessing

    return multiprocessing.get_start_method()
