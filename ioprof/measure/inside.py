"""A look inside a loader while it runs: its stages per sample (``stages``), the memory of its
processes, the threads that ran against the cores it may use, and the batches in /dev/shm.

``InsideRecorder`` is fed by whoever runs the window (a sweep's cell, the observer of a user's
script): the loader's pids now and then (memory and thread CPU, at most every ``EVERY_S``), the
first batch (its bytes), and at the end the window's span; it gives a ``LoaderInside``.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ioprof.core.inside import CoreUse, LoaderInside, WorkerMemory
from ioprof.core.stats import Interval, pooled_slope
from ioprof.core.thresholds import (
    COPY_ON_READ_MIN_OBJECTS,
    COPY_ON_READ_PAGE_FACTOR,
    GROWTH_MIN_READINGS,
    GROWTH_MIN_SAMPLES,
    GROWTH_MIN_WINDOW_BYTES,
    GROWTH_NOISE_BYTES,
)
from ioprof.host.processes import BUSY_THREAD_SHARE, ProcessReading, read_process, shm_space
from ioprof.measure import stage_rows
from ioprof.measure.batchtree import tensor_bytes
from ioprof.measure.growth import (
    EpochGrowth,
    GrowthFit,
    LifePeak,
    across_epochs,
    after_warmup,
    epoch_fields,
    epoch_starts,
    goes_on,
    one_life_peak,
    samples_vs_uss,
    warm_from,
    warm_points,
)

EVERY_S = 2.0  # memory and thread readings: often enough for a slope…
# …but no more than this share of one core: the kernel walks each process's page tables to sum
# its private pages (about 20 ms for a worker forked from a process that loaded torch)
READING_BUDGET = 0.01
PAIR_MAX_S = 3 * EVERY_S  # two readings further apart have a pause between them


class InsideRecorder:
    """Readings of one loader's processes over its window, and its stage rows' folder."""

    def __init__(
        self,
        *,
        folder: str,
        tag: int,
        workers: int,
        prefetch_factor: int | None,
        pin_memory: bool,
        persistent_workers: bool,
        dataset_items: int | None,
        batches_per_pass: int | None = None,
        ranks_on_host: int = 1,
        pauses: bool = True,
    ) -> None:
        self.folder, self.tag, self.workers = folder, tag, workers
        self.prefetch_factor = prefetch_factor or 0
        self.pin_memory, self.persistent = pin_memory, persistent_workers
        self.dataset_items = dataset_items  # the dataset's length, in its own items
        self.batches_per_pass = batches_per_pass  # ``len(loader)`` (None: not known)
        self.ranks_on_host = ranks_on_host
        self.pauses = pauses  # the loop may pause between readings (a user's evaluation, a probe)
        self.readings: dict[int, list[ProcessReading]] = {}
        self.batch_bytes = 0
        self.shm_at_start = shm_space()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.reading_s = 0.0  # what the last reading took
        self._stop = threading.Event()
        self._wake = threading.Event()  # a reading wanted now (``read_soon``), or the stop
        # the dataset's Python objects, counted only where a growth needs a cause (in the training
        # process, whose dataset the workers copied): a callable giving ``python_objects``
        self.count_objects: Callable[[], tuple[int, int, bool]] | None = None
        self.objects: tuple[int, int, bool] | None = None
        self.pass_starts_s: list[float] = []  # when each pass (epoch) of the loader began

    def pass_started(self, at_s: float) -> None:
        self.pass_starts_s.append(at_s)

    def read_soon(self) -> None:
        """A pass ended: read now, on the readings' thread, while its workers idle with their epoch
        made — the one point of every epoch a persistent worker's memory is compared at in all of
        them (``growth.across_epochs``), which a reading every EVERY_S misses where epochs follow
        each other within it. Not of workers forked again each pass: they are being stopped
        there, and a reading as one exits is no point of its life."""
        if self.persistent:
            self._wake.set()

    def first_batch(self, batch: Any) -> int:
        if not self.batch_bytes:
            self.batch_bytes = tensor_bytes(batch)
        return self.batch_bytes

    def read(self, pids: Sequence[int], *, main: bool = True) -> None:
        """Memory and thread CPU of ``pids`` (and of the training process, with ``main``), now:
        each stamped when its CPU is read, not when the first was (reading one's memory walks its
        page tables: tens of ms each, more on a busy host)."""
        for pid in {*pids, *([os.getpid()] if main else [])}:
            r = read_process(pid, time.perf_counter())
            if r is not None:
                with self._lock:
                    self.readings.setdefault(pid, []).append(r)

    def read_if_stale(self, pids: Sequence[int]) -> None:
        """Read again where the last reading is older than EVERY_S, before a window's counters
        start: a warm-up longer than a reading reaches (a GPU's batches of 256 — on an H100 no sweep
        cell had its cores read) would leave the window without one. Tens of ms against steps that
        each take longer. Nothing where nothing was read (the look inside is off)."""
        with self._lock:
            last = max((rs[-1].at_s for rs in self.readings.values() if rs), default=None)
        if last is not None and time.perf_counter() - last > EVERY_S:
            self.read(pids)

    def start(self, pids: Callable[[], Sequence[int]]) -> None:
        """Read now and every EVERY_S on a thread of its own, never in the timed loop: reading a
        process's memory walks its page tables (milliseconds, the process stalled meanwhile if it
        maps memory), so the readings are held to ``READING_BUDGET`` of the time. A window too
        short for that (a sweep's cell) is read before and after it instead (``read``)."""
        if self._thread is not None:
            return
        stop = self._stop = threading.Event()
        self._wake.clear()
        workers = self.workers > 0

        def loop() -> None:
            first = True
            while True:
                t0 = time.perf_counter()
                with contextlib.suppress(Exception):  # a reading is a nicety: never break what it watches
                    # the training process (a large one: reading it costs most) at the start and the
                    # end; its own samples' growth between, only where it makes them (no workers)
                    self.read(pids(), main=first or not workers)
                took = time.perf_counter() - t0
                if not first or not workers:  # the budget holds the readings taken between
                    self.reading_s = took
                first = False
                self._wake.wait(max(EVERY_S, self.reading_s / READING_BUDGET))
                self._wake.clear()
                if stop.is_set():
                    return

        self._thread = threading.Thread(target=loop, name="ioprof-inside", daemon=True)
        self._thread.start()

    def stop(self, pids: Sequence[int]) -> None:
        """Stop the readings, with one last one now."""
        if self._thread is None:
            return
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self._thread = None
        self.read(pids)

    def result(
        self,
        start_s: float,
        end_s: float,
        main: Sequence[tuple[str, Sequence[float]]],
        pids: set[int] | None = None,
        cpu: CpuTotals | None = None,
        rows: Sequence[dict[str, Any]] | None = None,
    ) -> LoaderInside:
        """The look inside over [start_s, end_s]: rows of ``pids`` only, where given (the
        loader's own processes, not those of a probe run in between). ``cpu``: the window's CPU
        totals where its counters were read over its own spans (``ioprof run``); otherwise from
        this recorder's readings. ``rows``: the loader's rows where the caller read them already."""
        rows = self.rows(pids) if rows is None else rows
        return LoaderInside(
            stages=stage_rows.summarize(rows, start_s=start_s, end_s=end_s, workers=self.workers, main=main),
            memory=self._memory(rows, start_s, end_s),
            cores=self._cores(cpu if cpu is not None else self._cpu(start_s, end_s)),
        )

    def with_handover(
        self,
        seen: LoaderInside,
        iters_s: Sequence[float],
        handed: Sequence[tuple[int, int, float, float]],
        window: Sequence[tuple[int, int]],
        pids: set[int] | None = None,
        rows: Sequence[dict[str, Any]] | None = None,
    ) -> LoaderInside:
        """``seen`` with what its slow samples cost the loop (``stage_rows.handover``): its passes
        (begun at ``iters_s``) replayed through the in-order hand-over, the loop's calls for each
        batch in ``handed`` (pass, k, call, return), its window's batches in ``window``. A loader
        that hands batches over as they come (``in_order=False``) is not replayed: call this only
        for one in order."""
        stages = seen.stages
        if stages is None or stages.per_sample is None or not self.workers:
            return seen
        slow = stage_rows.handover(
            self.rows(pids) if rows is None else rows,
            iters_s,
            handed,
            window,
            self.workers,
            self.prefetch_factor,
        )
        if slow is None:
            return seen
        per_sample = dataclasses.replace(stages.per_sample, slow=slow)
        return dataclasses.replace(seen, stages=dataclasses.replace(stages, per_sample=per_sample))

    def memory(self, start_s: float, end_s: float, pids: set[int] | None = None) -> WorkerMemory | None:
        """The memory of the loader's processes (``pids`` only, where given) over [start_s, end_s]."""
        return self._memory(self.rows(pids), start_s, end_s)

    def rows(self, pids: set[int] | None) -> list[dict[str, Any]]:
        """The loader's stage rows, of ``pids`` only where given."""
        return [r for r in stage_rows.read_rows(self.folder, self.tag) if pids is None or r["pid"] in pids]

    def _spanned(self, start_s: float, end_s: float) -> dict[int, list[ProcessReading]]:
        """Each process's readings that span [start_s, end_s]. A loop that may pause (a user's):
        those within EVERY_S of it, its thread reading every EVERY_S. A sweep's cell, read before
        its warm-up and after its window only: the last before the window, those within, the first
        after — however long the warm-up, and however long a round of readings of many workers
        took (each process is stamped when it is read, so one round spreads over its own time)."""
        with self._lock:
            readings = {pid: list(rs) for pid, rs in self.readings.items()}
        if self.pauses:
            return {
                pid: [r for r in rs if start_s - EVERY_S <= r.at_s <= end_s + EVERY_S]
                for pid, rs in readings.items()
            }
        out = {}
        for pid, rs in readings.items():
            before = [r for r in rs if r.at_s < start_s][-1:]
            after = [r for r in rs if r.at_s > end_s][:1]
            out[pid] = [*before, *(r for r in rs if start_s <= r.at_s <= end_s), *after]
        return out

    def _epochs(
        self, warm: Mapping[int, list[tuple[float, float]]], rows: Sequence[dict[str, Any]]
    ) -> EpochGrowth:
        """Persistent workers from one epoch to the next: each one's readings after its warm-up
        (``warm``), however few. The comparison is at the same point of two epochs, whose interval
        says what so few can tell; not a slope over the run, which needs its samples and readings
        (``after_warmup``)."""
        return across_epochs(warm, epoch_starts(rows, self.pass_starts_s))

    def _memory(self, rows: Sequence[dict[str, Any]], start_s: float, end_s: float) -> WorkerMemory | None:
        from ioprof.host.machine import memory_for_cache

        spans = self._spanned(start_s, end_s)
        main = spans.get(os.getpid()) or []
        if not main:
            return None
        lo, hi = start_s - EVERY_S, end_s + EVERY_S
        # every row counts its samples; a worker's own readings only within the span
        rows = [
            r
            if "uss" not in r or lo <= r["t"] <= hi
            else {k: v for k, v in r.items() if k not in ("uss", "pss")}
            for r in rows
        ]
        # and each process's memory as its life ended: the batches' rows count the samples
        own_rows = sorted([*rows, *self._life_ends(rows, lo, hi)], key=lambda r: r["t"])
        workers = {pid: rs for pid, rs in spans.items() if pid != os.getpid() and rs}
        for pid in {r["pid"] for r in own_rows if "uss" in r} - {os.getpid()}:  # workers that read themselves
            workers.setdefault(pid, [])
        producers = workers or {os.getpid(): main}  # no workers: the training process produces the samples
        dataset, per_pass = samples_counted(rows, self.dataset_items, self.batches_per_pass)
        batch = max((int(r["n"]) for r in rows), default=1)
        own: dict[int, list[dict[str, Any]]] = {}
        for r in own_rows:
            own.setdefault(r["pid"], []).append(r)
        warm = {pid: warm_points(rs, own.get(pid, []), batch) for pid, rs in producers.items()}
        fits = [after_warmup(points, dataset) for points in warm.values()]
        kept = [f for f in fits if f is not None]
        growth = pooled_slope([f.points for f in kept]) if kept else None
        epochs = self._epochs(warm, rows) if self.persistent and workers else None
        lives = first = later = None
        first_pass = False
        if workers and not self.persistent and per_pass:
            lives, first, later, first_pass = self._pass_peaks(workers, own, per_pass)
        latest = [_last(rs, own.get(pid, [])) for pid, rs in workers.items()]
        last = [m for m in latest if m is not None]
        available, source = memory_for_cache()
        shm = self.shm_at_start
        held = min((m[1] for m in last), default=0) if workers else main[-1].uss_bytes
        spanned = max((f.samples for f in kept), default=0)
        note, cause = self._growth_words(fits, growth, held, spanned, dataset)
        known = growth is not None and growth.batches and not note
        return WorkerMemory(
            main_uss_bytes=main[-1].uss_bytes,
            main_pss_bytes=main[-1].pss_bytes,
            worker_uss_bytes=round(sum(u for _, u, _ in last) / len(last)) if last else None,
            worker_pss_bytes=round(sum(p for _, _, p in last) / len(last)) if last else None,
            growth_bytes_per_1000_samples=growth.value * 1000 if known and growth is not None else None,
            growth_low=growth.low * 1000 if known and growth is not None and growth.known else None,
            growth_high=growth.high * 1000 if known and growth is not None and growth.known else None,
            readings=sum(len(rs) for rs in spans.values()) + sum(1 for r in own_rows if "uss" in r),
            batch_bytes=self.batch_bytes,
            prefetch_factor=self.prefetch_factor,
            workers=self.workers,
            shm_total_bytes=shm[0] if shm else None,
            shm_free_bytes=shm[1] if shm else None,
            ram_available_bytes=available,
            ram_source=source,
            samples_per_epoch=per_pass,
            dataset_samples=dataset,
            persistent_workers=self.persistent,
            growth_note=note,
            growth_samples=spanned,
            growth_cause=cause,
            revisited=any(f.revisited for f in kept),
            dataset_objects=self.objects[0] if self.objects else None,
            dataset_object_bytes=self.objects[1] if self.objects else None,
            **epoch_fields(epochs),
            life_peak_bytes=lives[0] if lives else None,
            life_growth_per_sample=lives[1] if lives else None,
            life_first_pass=first_pass,
            later_life_peak_bytes=later[0] if later else None,
            first_life_peak_bytes=first[0] if first else None,
        )

    def _life_ends(self, rows: Sequence[dict[str, Any]], lo: float, hi: float) -> list[dict[str, Any]]:
        """The memory of the rows' processes as each life ended (``StageClock.life_end``), within
        [lo, hi]: a worker forked each pass is read at its end however its readings fell."""
        pids = {r["pid"] for r in rows}
        return [
            r
            for r in stage_rows.read_rows(self.folder, self.tag, ends=True)
            if r["pid"] in pids and lo <= r["t"] <= hi
        ]

    def _pass_peaks(
        self,
        workers: Mapping[int, Sequence[ProcessReading]],
        own: Mapping[int, Sequence[dict[str, Any]]],
        per_pass: int,
    ) -> tuple[LifePeak | None, LifePeak | None, LifePeak | None, bool]:
        """Workers forked again each pass: the peak of all their lives, of the first pass's and of
        later passes' (each None where not read apart), and whether the first pass's were read. A
        worker forked in the first pass can hold several times what those forked later do (the
        ImageNet example's, read from outside), or less: the most is what must fit, the later ones'
        what each epoch after the first takes (a sweep's cell has no passes told)."""
        passes = {pid: self._pass_of(rs, own.get(pid, [])) for pid, rs in workers.items()}
        lives = self._lives(workers, own, per_pass, list(workers))
        first_pass = bool(self.pass_starts_s) and 0 in passes.values()
        after = [pid for pid, k in passes.items() if k > 0]
        if not (first_pass and after):
            return lives, None, None, first_pass
        first = self._lives(workers, own, per_pass, [pid for pid, k in passes.items() if k == 0])
        return lives, first, self._lives(workers, own, per_pass, after), first_pass

    def _pass_of(self, readings: Sequence[ProcessReading], rows: Sequence[dict[str, Any]]) -> int:
        """The pass (from 0) a worker was forked in: the last to begin before its first reading."""
        first = min([*(r.at_s for r in readings), *(float(r["t"]) for r in rows)], default=math.inf)
        return max(0, bisect.bisect_right(self.pass_starts_s, first) - 1)

    def _lives(
        self,
        workers: Mapping[int, Sequence[ProcessReading]],
        own: Mapping[int, Sequence[dict[str, Any]]],
        per_pass: int,
        pids: Sequence[int],
    ) -> LifePeak | None:
        """``one_life_peak`` of these workers' lives, each its share of a pass."""
        uss = [samples_vs_uss(workers[pid], own.get(pid, [])) for pid in pids]
        batch = max((int(r["n"]) for pid in pids for r in own.get(pid, [])), default=1)
        return one_life_peak(
            uss,
            per_pass / self.workers,
            [samples_vs_uss(workers[pid], own.get(pid, []), "rss") for pid in pids],
            [warm_from(series, own.get(pid, []), batch) for series, pid in zip(uss, pids, strict=True)],
        )

    def _growth_words(
        self,
        fits: Sequence[GrowthFit | None],
        growth: Interval | None,
        held: int,
        spanned: int,
        dataset: int | None,
    ) -> tuple[str, str]:
        """Why no growth is reported (``note``), or what causes it (``cause``): copy-on-read,
        leak, or unknown — named only with evidence."""
        kept = [f for f in fits if f is not None]
        if not kept:
            return (
                f"too short to judge: no {'worker' if self.workers else 'process'} produced "
                f"{GROWTH_MIN_SAMPLES} samples over {GROWTH_MIN_READINGS} readings after its warm-up",
                "",
            )
        if growth is None or not growth.known or growth.low * 1000 < GROWTH_NOISE_BYTES:
            return "", ""
        if growth.value * spanned > held:  # more than the process holds: not a steady growth
            return "not steady: the fit says more than the process holds", ""
        if growth.value * spanned < GROWTH_MIN_WINDOW_BYTES:
            return (
                f"none to speak of: {growth.value * spanned / 1e6:,.1f} MB over {spanned:,} samples after the warm-up "
                f"(under {GROWTH_MIN_WINDOW_BYTES / 1e6:.0f} MB: an allocator settling looks the same)",
                "",
            )
        if not goes_on(kept, growth):
            return "not steady: it did not go on growing in the later half of the window", ""
        if self.objects is None and self.count_objects is not None:
            self.objects = self.count_objects()
        revisited = any(f.revisited for f in kept)
        objects, size_bytes, capped = self.objects if self.objects else (0, 0, False)
        if revisited:
            return "", "leak"
        epoch = growth.value * (dataset or 0)
        if objects >= COPY_ON_READ_MIN_OBJECTS and (capped or epoch <= size_bytes * COPY_ON_READ_PAGE_FACTOR):
            return "", "copy-on-read"
        return "", "unknown"

    def _cpu(self, start_s: float, end_s: float) -> CpuTotals:
        """CPU over the readings this recorder took (consecutive pairs, pauses left out)."""
        spans = self._spanned(start_s, end_s)
        totals = CpuTotals()
        for pid, rs in spans.items():
            for a, b in itertools.pairwise(rs):
                if 0 < b.at_s - a.at_s <= (PAIR_MAX_S if self.pauses else float("inf")):
                    totals.add(pid, a, b, main=pid == os.getpid())
        return totals

    def _cores(self, cpu: CpuTotals) -> CoreUse:
        import torch

        from ioprof.host.machine import usable_cores

        return core_use(
            cpu,
            affinity_cores=usable_cores(),
            intra_op_threads=torch.get_num_threads(),
            ranks_on_host=self.ranks_on_host,
            pin_memory_thread=self.pin_memory and self.workers > 0,
            workers=self.workers,
        )


def samples_counted(
    rows: Sequence[dict[str, Any]], dataset_items: int | None, batches_per_pass: int | None
) -> tuple[int | None, int | None]:
    """The dataset's samples and one pass's, in the unit the rows count (``n``: a batch's images).

    A dataset's length counts its own items: one sample each where the loader batches them, a whole
    batch each where the dataset makes its batches itself (``batch_size=None``; a row's ``items``
    says how many it fetched). One pass of the loader in this process is its ``len(loader)``
    batches at the rows' mean: fewer than the dataset where a sampler shards it across ranks, or
    drops the last batch."""
    n = sum(int(r["n"]) for r in rows)
    items = sum(int(r.get("items", r["n"])) for r in rows)
    per_item = n / items if n and items else 1.0
    dataset = round(dataset_items * per_item) if dataset_items else None
    per_pass = round(batches_per_pass * n / len(rows)) if batches_per_pass and n else dataset
    return dataset, per_pass


@dataclass
class CpuTotals:
    """CPU of the training process and the loader's processes over a window's spans: process CPU
    (all threads, reaped children), each thread's CPU and run-queue seconds, and the spans' seconds."""

    cpu_s: float = 0.0
    window_s: float = 0.0
    # the seconds the threads' figures cover, where fewer (None: all of ``window_s``)
    threads_window_s: float | None = None
    thread_cpu_s: dict[str, float] = field(default_factory=dict)  # "pid/tid"
    thread_runq_s: dict[str, float] = field(default_factory=dict)
    main_pid: int = 0
    _seconds_by_pid: dict[int, float] = field(default_factory=dict)

    def add(self, pid: int, a: ProcessReading, b: ProcessReading, *, main: bool) -> None:
        self.cpu_s += max(0.0, b.cpu_s - a.cpu_s)
        span = b.at_s - a.at_s
        self._seconds_by_pid[pid] = self._seconds_by_pid.get(pid, 0.0) + span
        if main:
            self.main_pid = pid
        self.window_s = max(self._seconds_by_pid.values())
        runq_a, runq_b = a.thread_runq_s or {}, b.thread_runq_s or {}
        for tid, cpu in b.thread_cpu_s.items():
            key = f"{pid}/{tid}"
            self.thread_cpu_s[key] = self.thread_cpu_s.get(key, 0.0) + max(
                0.0, cpu - a.thread_cpu_s.get(tid, 0.0)
            )
            r = max(0.0, runq_b.get(tid, 0.0) - runq_a.get(tid, 0.0))
            self.thread_runq_s[key] = self.thread_runq_s.get(key, 0.0) + r


def core_use(
    cpu: CpuTotals,
    *,
    affinity_cores: int,
    intra_op_threads: int,
    ranks_on_host: int,
    pin_memory_thread: bool,
    workers: int,
) -> CoreUse:
    """Cores busy (CPU seconds ÷ the window's), the threads busy at least a tenth of it, and the
    share of their runnable time spent waiting for a core (run-queue delay)."""
    if cpu.window_s <= 0:
        return CoreUse(
            affinity_cores, intra_op_threads, ranks_on_host, pin_memory_thread, workers, 0, 0, None, 0.0
        )
    seen_s = cpu.window_s if cpu.threads_window_s is None else cpu.threads_window_s
    busy = {k for k, c in cpu.thread_cpu_s.items() if seen_s > 0 and c >= BUSY_THREAD_SHARE * seen_s}
    per_worker: dict[str, int] = {}
    for k in busy:
        pid = k.split("/")[0]
        if pid != str(cpu.main_pid):
            per_worker[pid] = per_worker.get(pid, 0) + 1
    on_cpu = sum(cpu.thread_cpu_s.values())
    waiting = sum(cpu.thread_runq_s.values())
    # each process is read at its own moment of a reading, and the children it reaped come in the
    # kernel's ticks: over a short window they can add up to more cores than the processes may
    # run on, which none can — the mask's cores (each rank's, where ranks share a host) bound it
    cores_busy = cpu.cpu_s / cpu.window_s * ranks_on_host
    if affinity_cores > 0:
        cores_busy = min(cores_busy, affinity_cores * ranks_on_host)
    return CoreUse(
        affinity_cores=affinity_cores,
        intra_op_threads=intra_op_threads,
        ranks_on_host=ranks_on_host,
        pin_memory_thread=pin_memory_thread,
        workers=workers,
        threads_per_worker=max([1, *per_worker.values()]) if workers else 0,
        threads_busy=len(busy) * ranks_on_host,
        cpu_busy_cores=cores_busy,
        window_s=cpu.window_s,
        runq_share=waiting / (on_cpu + waiting) if on_cpu + waiting > 0 else None,
        threads_read=seen_s > 0,
    )


def _last(
    readings: Sequence[ProcessReading], rows: Sequence[dict[str, Any]]
) -> tuple[float, int, int] | None:
    """A process's latest memory (at, USS, PSS): this recorder's reading or its own, the later."""
    mine = [(float(r["t"]), int(r["uss"]), int(r["pss"])) for r in rows if "uss" in r]
    theirs = [(r.at_s, r.uss_bytes, r.pss_bytes) for r in readings]
    return max([*mine[-1:], *theirs[-1:]], default=None)


def python_objects(root: Any, limit: int = 2_000_000) -> tuple[int, int, bool]:
    """(Python objects a dataset holds, their bytes, whether the count stopped at ``limit``): the
    containers and values reachable from it — what copy-on-read can copy into each worker. Tensors
    and arrays count as one object each (their elements have no reference counts); modules,
    classes and functions are not followed."""
    import gc
    import sys
    import types

    skip = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
    seen: set[int] = set()
    stack = [root]
    count = size = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        count += 1
        size += sys.getsizeof(obj, 0)
        if count >= limit:
            return count, size, True
        if hasattr(obj, "__array__") or type(obj).__name__ in ("Tensor", "ndarray", "Parameter"):
            continue
        stack.extend(gc.get_referents(obj))
    return count, size, False
