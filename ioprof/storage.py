"""Reading the dataset's bytes: the one read path used by the loader and the storage probe,
optionally through emulated storage, and the storage probe itself.

Emulated storage (``--storage-profile``) can only slow reads down: the real bytes are
still read, and the read finishes no earlier than the emulated device would allow.
The device's bandwidth is one budget shared by every loader process (a reservation on a
clock in shared memory); per-file latency overlaps across readers except where the
profile says it is serial (an HDD's seek).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import psutil

from ioprof.pagecache import FilesystemInfo, prepare
from ioprof.presets import StorageProfile
from ioprof.results import StorageCeiling
from ioprof.stats import percentile

READ_CHUNK_BYTES = 1 << 20


class EmulatedStorage:
    """A shared bandwidth budget plus per-file latency, valid across forked/spawned processes."""

    def __init__(self, profile: StorageProfile) -> None:
        self.profile = profile
        # monotonic time at which the emulated device becomes free; shared by all processes
        self._device_free_at = multiprocessing.get_context().Value("d", 0.0, lock=True)

    def reserve(self, size_bytes: int) -> float:
        """Book ``size_bytes`` on the device; returns the monotonic time the read may finish."""
        transfer_s = size_bytes / (self.profile.read_mb_per_s * 1e6)
        latency_s = self.profile.latency_ms / 1e3
        now = time.monotonic()
        with self._device_free_at.get_lock():
            start = max(now, self._device_free_at.value)
            if self.profile.serial_latency:
                end = start + latency_s + transfer_s
                self._device_free_at.value = end
                return end
            self._device_free_at.value = start + transfer_s
            return max(start + transfer_s, now + latency_s)

    @staticmethod
    def wait_until(deadline: float) -> None:
        delay = deadline - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def read_file(path: str, emulated: EmulatedStorage | None = None) -> bytes:
    """All bytes of ``path``; through the emulated device when one is given."""
    with open(path, "rb", buffering=0) as f:
        if emulated is None:
            return f.read()
        deadline = emulated.reserve(os.fstat(f.fileno()).st_size)
        data = f.read()
    emulated.wait_until(deadline)
    return data


def probe_storage(
    paths: Sequence[str],
    concurrency: int,
    fs: FilesystemInfo,
    regime: str = "cold",
    emulated: EmulatedStorage | None = None,
    max_files: int | None = None,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> StorageCeiling:
    """Read the files in shuffled order with ``concurrency`` readers; bandwidth, files/s, latency.

    Readers are threads: a read releases the GIL, and the kernel's per-process counters
    (``read_bytes``) sum over the process's threads, so bytes fetched are counted, not inferred.
    """
    order = list(paths)
    random.Random(seed).shuffle(order)
    if max_files is not None:
        order = order[:max_files]
    cache = prepare(order, regime, fs)
    me = psutil.Process()
    latencies: list[float] = [0.0] * len(order)
    sizes: list[int] = [0] * len(order)
    failed: list[bool] = [False] * len(order)
    next_index = iter(range(len(order)))
    lock = threading.Lock()

    def reader() -> None:
        while True:
            with lock:
                i = next(next_index, None)
            if i is None:
                return
            t0 = clock()
            try:
                sizes[i] = len(read_file(order[i], emulated))
            except OSError:  # broken link, permission, vanished: counted, not fatal
                failed[i] = True
                continue
            latencies[i] = clock() - t0

    io_before = me.io_counters()
    started = clock()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for f in [pool.submit(reader) for _ in range(concurrency)]:
            f.result()
    elapsed = max(clock() - started, 1e-9)
    io_after = me.io_counters()
    total = sum(sizes)
    read_ok = [lat for lat, bad in zip(latencies, failed, strict=True) if not bad]
    done = len(read_ok)
    return StorageCeiling(
        concurrency=concurrency,
        files=done,
        bytes=total,
        elapsed_s=elapsed,
        read_mb_per_s=total / 1e6 / elapsed,
        files_per_s=done / elapsed,
        latency_s=tuple(read_ok),
        latency_p50_s=percentile(read_ok, 50) if read_ok else 0.0,
        latency_p99_s=percentile(read_ok, 99) if read_ok else 0.0,
        img_per_s=done / elapsed,
        storage_read_bytes=io_after.read_bytes - io_before.read_bytes,
        cache=cache,
        emulated=emulated.profile.name if emulated else "",
        unreadable_files=sum(failed),
    )
