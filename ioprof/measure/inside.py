"""A look inside a loader while it runs: its stages per sample (``stages``), the memory of its
processes, the threads that ran against the cores it may use, and the batches in /dev/shm.

``InsideRecorder`` is fed by whoever runs the window (a sweep's cell, the observer of a user's
script): the loader's pids now and then (memory and thread CPU, at most every ``EVERY_S``), the
first batch (its bytes), and at the end the window's span; it gives a ``LoaderInside``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ioprof.core.config import worker_count
from ioprof.core.results import CoreUse, LoaderInside, WorkerMemory
from ioprof.core.stats import pooled_slope
from ioprof.host.processes import ProcessReading, busy_threads, read_process, shm_space
from ioprof.measure import stages

EVERY_S = 2.0  # memory and thread readings: often enough for a slope…
# …but no more than this share of one core: the kernel walks each process's page tables to sum
# its private pages (about 20 ms for a worker forked from a process that loaded torch)
READING_BUDGET = 0.01
PAIR_MAX_S = 3 * EVERY_S  # two readings further apart have a pause between them


def batch_bytes(batch: Any) -> int:
    """Bytes of the tensors in a batch (nested tuples, lists and dicts), as they cross /dev/shm."""
    import torch

    if isinstance(batch, torch.Tensor):
        return int(batch.element_size() * batch.nelement())
    if isinstance(batch, dict):
        return sum(batch_bytes(v) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(batch_bytes(v) for v in batch)
    return 0


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
        samples_per_epoch: int | None,
        ranks_on_host: int = 1,
        pauses: bool = True,
    ) -> None:
        self.folder, self.tag, self.workers = folder, tag, workers
        self.prefetch_factor = prefetch_factor or 0
        self.pin_memory, self.persistent = pin_memory, persistent_workers
        self.samples_per_epoch = samples_per_epoch
        self.ranks_on_host = ranks_on_host
        self.pauses = pauses  # the loop may pause between readings (a user's evaluation, a probe)
        self.readings: dict[int, list[ProcessReading]] = {}
        self.batch_bytes = 0
        self.shm_at_start = shm_space()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.reading_s = 0.0  # what the last reading took
        self._stop = threading.Event()

    def first_batch(self, batch: Any) -> int:
        if not self.batch_bytes:
            self.batch_bytes = batch_bytes(batch)
        return self.batch_bytes

    def read(self, pids: Sequence[int], *, main: bool = True) -> None:
        """Memory and thread CPU of ``pids`` (and of the training process, with ``main``), now."""
        at_s = time.perf_counter()
        for pid in {*pids, *([os.getpid()] if main else [])}:
            r = read_process(pid, at_s)
            if r is not None:
                with self._lock:
                    self.readings.setdefault(pid, []).append(r)

    def start(self, pids: Callable[[], Sequence[int]]) -> None:
        """Read now and every EVERY_S on a thread of its own, never in the timed loop: reading a
        process's memory walks its page tables (milliseconds, the process stalled meanwhile if it
        maps memory), so the readings are held to ``READING_BUDGET`` of the time. A window too
        short for that (a sweep's cell) is read before and after it instead (``read``)."""
        if self._thread is not None:
            return
        stop = self._stop = threading.Event()
        workers = self.workers > 0

        def loop() -> None:
            first = True
            while True:
                t0 = time.perf_counter()
                with contextlib.suppress(Exception):  # a reading is a nicety: never break what it watches
                    # the training process (a large one: reading it costs most) at the start and the
                    # end; its own samples' growth between, only where it makes them (no workers)
                    self.read(pids(), main=first or not workers)
                first = False
                self.reading_s = time.perf_counter() - t0
                if stop.wait(max(EVERY_S, self.reading_s / READING_BUDGET)):
                    return

        self._thread = threading.Thread(target=loop, name="ioprof-inside", daemon=True)
        self._thread.start()

    def stop(self, pids: Sequence[int]) -> None:
        """Stop the readings, with one last one now."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.read(pids)

    def result(
        self,
        start_s: float,
        end_s: float,
        main: Sequence[tuple[str, Sequence[float]]],
        pids: set[int] | None = None,
    ) -> LoaderInside:
        """The look inside over [start_s, end_s]: rows of ``pids`` only, where given (the
        loader's own processes, not those of a probe run in between)."""
        rows = [r for r in stages.read_rows(self.folder, self.tag) if pids is None or r["pid"] in pids]
        return LoaderInside(
            stages=stages.summarize(rows, start_s=start_s, end_s=end_s, workers=self.workers, main=main),
            memory=self._memory(rows, start_s, end_s),
            cores=self._cores(start_s, end_s),
        )

    def _spanned(self, start_s: float, end_s: float) -> dict[int, list[ProcessReading]]:
        with self._lock:
            readings = {pid: list(rs) for pid, rs in self.readings.items()}
        return {
            pid: [r for r in rs if start_s - EVERY_S <= r.at_s <= end_s + EVERY_S]
            for pid, rs in readings.items()
        }

    def _memory(self, rows: Sequence[dict[str, Any]], start_s: float, end_s: float) -> WorkerMemory | None:
        from ioprof.host.machine import memory_for_cache

        spans = self._spanned(start_s, end_s)
        main = spans.get(os.getpid()) or []
        if not main:
            return None
        workers = {pid: rs for pid, rs in spans.items() if pid != os.getpid() and rs}
        series = [_samples_vs_uss(rs, [r for r in rows if r["pid"] == pid]) for pid, rs in workers.items()]
        if not workers:  # no workers: the training process produces the samples
            series = [_samples_vs_uss(main, [r for r in rows if r["pid"] == os.getpid()])]
        growth = pooled_slope([s for s in series if len(s) >= 2])
        last = [rs[-1] for rs in workers.values()]
        available, source = memory_for_cache()
        shm = self.shm_at_start
        return WorkerMemory(
            main_uss_bytes=main[-1].uss_bytes,
            main_pss_bytes=main[-1].pss_bytes,
            worker_uss_bytes=round(sum(r.uss_bytes for r in last) / len(last)) if last else 0,
            worker_pss_bytes=round(sum(r.pss_bytes for r in last) / len(last)) if last else 0,
            growth_bytes_per_1000_samples=growth.value * 1000 if growth.batches else None,
            growth_low=growth.low * 1000 if growth.known else None,
            growth_high=growth.high * 1000 if growth.known else None,
            readings=sum(len(rs) for rs in spans.values()),
            batch_bytes=self.batch_bytes,
            prefetch_factor=self.prefetch_factor,
            workers=self.workers,
            shm_total_bytes=shm[0] if shm else None,
            shm_free_bytes=shm[1] if shm else None,
            ram_available_bytes=available,
            ram_source=source,
            samples_per_epoch=self.samples_per_epoch,
            persistent_workers=self.persistent,
        )

    def _cores(self, start_s: float, end_s: float) -> CoreUse | None:
        import torch

        from ioprof.host.machine import usable_cores

        spans = self._spanned(start_s, end_s)
        # consecutive readings within one stretch of batches (a pause — evaluation, a probe — between
        # two readings would count as idle cores)
        pairs = [
            (a, b)
            for rs in spans.values()
            for a, b in itertools.pairwise(rs)
            if 0 < b.at_s - a.at_s <= (PAIR_MAX_S if self.pauses else float("inf"))
        ]
        if not pairs:
            return None
        moments = sorted({a.at_s for a, _ in pairs})
        window_s = sum(max(b.at_s - a.at_s for a, b in pairs if a.at_s == t) for t in moments)
        busy = [(a, *busy_threads(a, b)) for a, b in pairs]  # (first reading, threads busy, CPU s)
        busy_at = [sum(n for a, n, _ in busy if a.at_s == t) for t in moments]
        cpu = sum(c for _, _, c in busy)
        per_worker = [n for a, n, _ in busy if a.pid != os.getpid()]
        return CoreUse(
            affinity_cores=usable_cores(),
            intra_op_threads=torch.get_num_threads(),
            ranks_on_host=self.ranks_on_host,
            pin_memory_thread=self.pin_memory and self.workers > 0,
            workers=self.workers,
            threads_per_worker=max([1, *per_worker]) if self.workers else 0,
            threads_busy=sorted(busy_at)[len(busy_at) // 2] * self.ranks_on_host,
            cpu_busy_cores=cpu / window_s * self.ranks_on_host if window_s > 0 else 0.0,
            window_s=window_s,
        )


def _samples_vs_uss(
    readings: Sequence[ProcessReading], rows: Sequence[dict[str, Any]]
) -> list[tuple[float, float]]:
    """(samples this process had produced, its USS) at each reading."""
    out = []
    for r in readings:
        produced = sum(row["n"] for row in rows if row["t"] <= r.at_s)
        out.append((float(produced), float(r.uss_bytes)))
    return out


# -- /dev/shm: batches travel from the workers through it ---------------------------------------

SHM_HEADROOM = 0.9  # what batches in flight may take of /dev/shm's free space


class ShmTooSmall(RuntimeError):
    """The batches in flight do not fit in /dev/shm (predicted before a cell, or the cause of a
    worker's death): one line naming /dev/shm and the fix."""


def shm_line(batch: int, prefetch: int, workers: int, free: int, total: int) -> str:
    """The one line a user reads when batches in flight outgrow /dev/shm."""
    need = batch * prefetch * workers
    fit = max(0, int(free * SHM_HEADROOM // max(1, batch * prefetch)))
    return (
        f"the DataLoader's batches in flight need {need / 1e6:,.1f} MB of /dev/shm ({batch / 1e6:,.2f} MB a "
        f"batch × prefetch_factor {prefetch} × {workers} workers) and /dev/shm has {free / 1e6:,.1f} MB free "
        f"of {total / 1e6:,.1f} MB: give it more (docker run --shm-size=…, or a larger tmpfs), "
        + (
            f"use at most {worker_count(fit)}"
            if fit
            else "use num_workers=0 (not even one worker's batches fit)"
        )
        + ", or a smaller prefetch_factor or batch size"
    )


def shm_fits(batch: int, prefetch: int, workers: int) -> tuple[bool, str]:
    """Whether ``workers`` × ``prefetch`` batches of ``batch`` bytes fit in /dev/shm now, and the
    line to say if not (True where there is no /dev/shm to check)."""
    shm = shm_space()
    if shm is None or not workers or not batch:
        return True, ""
    total, free = shm
    if batch * prefetch * workers <= free * SHM_HEADROOM:
        return True, ""
    return False, shm_line(batch, prefetch, workers, free, total)


def check_shm(batch: int, prefetch: int, workers: int) -> None:
    """Raise ``ShmTooSmall`` before a loader whose batches in flight cannot fit in /dev/shm."""
    fits, line = shm_fits(batch, prefetch, workers)
    if not fits:
        raise ShmTooSmall(f"skipped before it ran: {line}")


def shm_died(batch: int, prefetch: int, workers: int, cause: BaseException) -> None:
    """Raise ``ShmTooSmall`` for a worker that died for want of /dev/shm (``shm_failure``)."""
    shm = shm_space() or (0, 0)
    line = shm_line(batch, prefetch, workers, shm[1], shm[0])
    raise ShmTooSmall(f"a loader worker ran out of shared memory: {line}") from cause


def shm_note() -> str:
    """/dev/shm's size, and the fixes, for a failure whose batch size is not known."""
    shm = shm_space() or (0, 0)
    return (
        f"/dev/shm has {shm[1] / 1e6:,.1f} MB free of {shm[0] / 1e6:,.1f} MB: give it more (docker run "
        "--shm-size=…), use fewer workers, or a smaller prefetch_factor or batch size"
    )


def shm_failure(error: BaseException) -> bool:
    """An error torch raises when a worker's batch could not be written to /dev/shm."""
    text = str(error)
    return (
        "shared memory" in text
        or "Bus error" in text
        or ("No space left on device" in text and "torch_" in text)
    )
