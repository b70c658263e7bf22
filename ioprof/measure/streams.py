"""The read bandwidth of a source read as streams: tar shards over HTTP or through a command,
objects in a store — items too large, or too slow, to count one completion each.

``concurrency`` readers (threads: a socket or pipe read releases the GIL) each take the next item,
open it (the time to its first byte is that item's latency) and read it in chunks; every chunk is
a completion (its bytes and when it arrived), so MB/s and its 95 % interval rest on raw samples
even when only a few items finish. Stops at the cap, once the interval is within ±5 % at a fixed
look, or when every item was read. Nothing on this host caches these bytes: every one of them
crossed the network (or came out of the command).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import IO

from ioprof.core.counts import CacheInfo, Fetched
from ioprof.core.results import StorageCeiling
from ioprof.core.stats import LOOKS, is_look, percentile
from ioprof.measure.storage import Readers, narrow, steady

CHUNK_BYTES = 256 * 1024
# Items failing one after another with none read between: the source went away or refuses every
# request — the reading stops and fails (its rate would be the time spent failing), instead of
# trying every item left, each through the client's retries. A ConnectionError (refused, reset:
# the client already retried it) stops it at once.
FAILURES_IN_A_ROW = 5
FIRST_LOOK = 40  # chunks: 10 MB before the interval may stop the reading
_MONITOR_S = 0.1

Opener = Callable[[str], AbstractContextManager[IO[bytes]]]


class _Streams:
    def __init__(
        self,
        items: Sequence[str],
        open_item: Opener,
        clock: Callable[[], float],
        ready: Callable[[], object] | None,
        keep: dict[str, bytes] | None = None,
        keep_bytes: int = 0,
        prefixes: bool = False,
    ) -> None:
        self._queue = iter(items)
        self.keep, self.keep_bytes, self._kept_bytes = keep, keep_bytes, 0
        self.prefixes = prefixes
        self._open = open_item
        self._clock = clock
        self._ready = ready
        self._lock = threading.Lock()
        self.stop = threading.Event()
        self.started = 0.0
        self.chunk_s: list[float] = []
        self.chunk_bytes: list[int] = []
        self.first_byte_s: list[float] = []
        self.items_done = 0
        self.items_read = 0
        self.items_failed = 0
        self.failed_in_row = 0
        self.errors: list[str] = []

    def reader(self) -> None:
        if self._ready is not None:  # before its first item's clock: no object's time to first byte
            self._ready()
        while not self.stop.is_set():
            with self._lock:
                item = next(self._queue, None)
            if item is None:
                return
            try:
                self._read(item)
            except OSError as e:
                with self._lock:
                    self.items_failed += 1
                    self.failed_in_row += 1
                    self.errors.append(str(e) if str(e).startswith(item) else f"{item}: {e}")
                    if isinstance(e, ConnectionError):  # refused or reset: the source is gone
                        self.failed_in_row = FAILURES_IN_A_ROW
                    if self.failed_in_row >= FAILURES_IN_A_ROW:
                        self.stop.set()

    def _read(self, item: str) -> None:
        t0 = self._clock()
        first = True
        with self._lock:
            parts: list[bytes] | None = (
                [] if self.keep is not None and self._kept_bytes < self.keep_bytes else None
            )
        with self._open(item) as stream:
            while not self.stop.is_set():
                data = stream.read(CHUNK_BYTES)
                if not data:
                    with self._lock:
                        self.items_done += 1
                        if parts is not None and self.keep is not None:  # read whole: kept
                            whole = b"".join(parts)
                            self.keep[item] = whole
                            self._kept_bytes += 0 if self.prefixes else len(whole)
                    return
                if parts is not None and self.prefixes:  # within the budget, counted as it grows
                    with self._lock:
                        room = self._kept_bytes + len(data) <= self.keep_bytes
                        self._kept_bytes += len(data) if room else 0
                    if not room:
                        self._keep_prefix(item, parts)
                        parts = None
                if parts is not None:
                    parts.append(data)
                now = self._clock()
                with self._lock:
                    if first:  # an item counts as read from its first chunk (a shard may not finish)
                        self.first_byte_s.append(now - t0)
                        self.items_read += 1
                        self.failed_in_row = 0
                        first = False
                    self.chunk_s.append(now - self.started)
                    self.chunk_bytes.append(len(data))
        if parts is not None:  # stopped within the item
            self._keep_prefix(item, parts)

    def _keep_prefix(self, item: str, parts: list[bytes]) -> None:
        """What was read of an item that was not read whole: kept where prefixes are asked for
        (a tar shard's first samples are whole in its first bytes)."""
        if self.prefixes and parts and self.keep is not None:
            with self._lock:
                self.keep[item] = b"".join(parts)


def probe_streams(
    items: Sequence[str],
    open_item: Opener,
    concurrency: int,
    *,
    bytes_per_sample: float | None,
    where: str,
    max_seconds: float,
    clock: Callable[[], float] = time.perf_counter,
    ready: Callable[[], object] | None = None,
    keep: dict[str, bytes] | None = None,
    keep_bytes: int = 0,
    keep_prefixes: bool = False,
) -> StorageCeiling:
    """Read ``items`` as streams with ``concurrency`` readers: MB/s, items/s, first-byte latency,
    and the samples/s that bandwidth feeds (``bytes_per_sample``; None: one sample an item). An item
    counts as read from its first chunk (a shard need not finish within the cap). ``ready``: what each
    reader does first (a store's client is made per thread: no object's time to its first byte, but
    the reading's, as in a loader's first batch). ``keep``: filled with the items read whole, up to
    ``keep_bytes`` (a copy in memory from the same reads); ``keep_prefixes``: and what was read of the rest."""
    streams = _Streams(items, open_item, clock, ready, keep, keep_bytes, keep_prefixes)
    streams.started = clock()
    stopped_by = "files"
    threads = Readers(concurrency, streams.reader)
    try:
        look = FIRST_LOOK
        while threads.running(_MONITOR_S):
            if clock() - streams.started >= max_seconds:
                stopped_by = "seconds"
                break
            with streams._lock:
                done_s, sizes = streams.chunk_s[:look], streams.chunk_bytes[:look]
            if len(done_s) < look or not is_look(look, FIRST_LOOK):
                continue
            if narrow(done_s, sizes, concurrency):
                stopped_by = "interval"
                break
            look *= 2
    finally:
        streams.stop.set()
        threads.join()
    if streams.failed_in_row >= FAILURES_IN_A_ROW or (not streams.chunk_s and streams.errors):
        raise OSError(streams.errors[-1])
    return _ceiling(streams, concurrency, stopped_by, where, bytes_per_sample or None)


def _ceiling(
    streams: _Streams, concurrency: int, stopped_by: str, where: str, per_sample: float | None
) -> StorageCeiling:
    """What the streams read, as a storage ceiling: its rates counted past the start-up transient."""
    elapsed = max(max(streams.chunk_s, default=0.0), 1e-9)
    total = sum(streams.chunk_bytes)
    counted = steady(streams.chunk_s, streams.chunk_bytes, concurrency)  # the rates: past the start-up
    mb_per_s = sum(counted.sizes) / 1e6 / counted.seconds
    # items at that rate: an item may take several chunks, so by the bytes read of each on average
    item_bytes = total / streams.items_read if streams.items_read else 0.0
    items_per_s = mb_per_s * 1e6 / item_bytes if item_bytes else 0.0
    lat = streams.first_byte_s
    cache = CacheInfo(
        "cold",
        0.0,
        True,
        "network",
        f"every byte came from {where}: nothing on this host keeps it between reads",
    )
    return StorageCeiling(
        concurrency=concurrency,
        files=streams.items_read,
        bytes=total,
        elapsed_s=elapsed,
        read_mb_per_s=mb_per_s,
        files_per_s=items_per_s,
        latency_s=tuple(lat),
        latency_p50_s=percentile(lat, 50) if lat else 0.0,
        latency_p99_s=percentile(lat, 99) if lat else 0.0,
        img_per_s=mb_per_s * 1e6 / per_sample if per_sample else items_per_s,
        storage_read_bytes=0,
        cache=cache,
        unreadable_files=streams.items_failed,
        fetched=Fetched(total, "read-alone", f"every byte read from {where}"),
        completed_s=tuple(streams.chunk_s),
        completed_bytes=tuple(streams.chunk_bytes),
        stopped_by=stopped_by,
        looks=LOOKS,
        latency_kind="first byte",
        where=where,
        bytes_per_sample=per_sample,
        warmup=counted.warmup,
    )
