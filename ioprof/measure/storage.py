"""Reading the dataset's bytes, and the read bandwidth of the storage they sit on.

One read path serves the loader and the storage probe: a file from its filesystem (in the cold
regime its pages are dropped right after the read, so a file read twice is read cold twice), or a
blob of an in-memory sample. Either may pass through emulated storage.

Emulated storage (``--storage-profile``) reads from an in-memory sample of the dataset, so the
real device never adds its own cost to the emulated figures; each read pays the profile's
per-file latency and then its share of one bandwidth budget held by every loader process (a
reservation on a clock in shared memory). Latency overlaps across readers except where the
profile says it is serial (an HDD's seek).

The storage probe reads files in shuffled order with N concurrent readers (threads: a read
releases the GIL) and records each file's completion, so that MB/s, files/s and their 95 %
intervals rest on raw samples; it stops when the interval is within ±5 % at one of its fixed
looks (after 100, 200, 400… files) or at its cap.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import multiprocessing
import os
import random
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil

from ioprof.core.config import TARGET_REL_HALF_WIDTH
from ioprof.core.counts import CacheInfo, Fetched
from ioprof.core.errors import IoprofError
from ioprof.core.presets import StorageProfile
from ioprof.core.results import StorageCeiling
from ioprof.core.stats import LOOKS, gaps, is_look, percentile, ratio_interval, steady_start
from ioprof.datasets import objects, shards
from ioprof.host.fetched import MountCounters, decide
from ioprof.host.pagecache import (
    FilesystemInfo,
    PageRuns,
    drop_after_read,
    filesystem_of,
    held_resident,
    prepare,
)

# A read failing with one of these means the storage itself may have stopped answering (a
# dropped network or FUSE mount, a vanished device), not that one file is bad.
STORAGE_LOST_ERRNOS = frozenset(
    {
        errno.ENOTCONN,
        errno.ESTALE,
        errno.EIO,
        errno.ENODEV,
        errno.ENXIO,
        errno.EHOSTDOWN,
        errno.EHOSTUNREACH,
        errno.ETIMEDOUT,
        errno.ECONNABORTED,
        errno.ECONNRESET,
        errno.ECONNREFUSED,
    }
)
# The storage probe: at least this many files before its interval may stop it, and at most this long.
STORAGE_PROBE_MIN_FILES = 100
STORAGE_PROBE_MAX_S = 20.0
_MONITOR_S = 0.1


class StorageLost(IoprofError):
    """The dataset's storage stopped answering mid-run (a dropped mount): the run cannot go on."""


def check_storage(root: str, fs: FilesystemInfo, error: OSError) -> None:
    """Raise StorageLost when ``root`` is no longer reachable on the mount it was found on.

    Called after a read failed with one of STORAGE_LOST_ERRNOS: a single bad file (an I/O error
    on one sector) leaves the folder reachable and is counted as unreadable instead.
    """
    reason = error.strerror or type(error).__name__
    if fs.object_store:  # the client retried already (boto3's standard mode): the store is gone
        what = "the object store" if fs.fs_type == "s3" else "the server"
        how = "AWS_ENDPOINT_URL, the network" if fs.fs_type == "s3" else "the URL, the network"
        raise StorageLost(
            f"{root}: {what} stopped answering mid-run ({reason}); check that {fs.source} is "
            f"reachable ({how}), then run again"
        )
    try:
        os.stat(root)
        os.listdir(root)
        now = filesystem_of(root)
    except OSError as e:
        reason = e.strerror or reason
    else:
        if (now.mountpoint, now.fs_type) == (fs.mountpoint, fs.fs_type):
            return
        reason = f"the {fs.fs_type} mount at {fs.mountpoint} is gone"
    raise StorageLost(
        f"{root}: the storage stopped answering mid-run ({reason}); check that {fs.mountpoint} "
        f"({fs.fs_type} from {fs.source}) is mounted and reachable, then run again"
    )


def _if_mine(owner: int, undo: Callable[[Any], None], what: Any) -> None:
    """A finalizer's undo (the emulated device's lock file removed, a descriptor of it closed), run
    only in the process that made ``what``: a forked child inherits the finalizer, never the file's
    ownership, and a descriptor's number may be another file's there."""
    if os.getpid() == owner:
        with contextlib.suppress(OSError):
            undo(what)


_OPENING = threading.Lock()  # a forked process's first open of an emulated device's lock file


def _opening_anew() -> None:
    """A forked child's own: a thread of the parent may have held it at the fork."""
    global _OPENING
    _OPENING = threading.Lock()


os.register_at_fork(after_in_child=_opening_anew)


class EmulatedStorage:
    """A shared bandwidth budget plus per-file latency, valid across forked/spawned processes.

    The device's next free moment is in shared memory; the lock around it is an ``flock`` on a file
    of its own, which the kernel drops when its holder dies. A multiprocessing lock stays held by a
    worker ended inside it (ioprof ends a measurement's workers with SIGKILL; so do the OOM killer
    and a user's ``kill``), and every read after it, in any process, would wait for it for good.
    An flock excludes open files, not threads: each process opens the file itself, and its threads
    take a lock of that process's own first."""

    def __init__(self, profile: StorageProfile) -> None:
        self.profile = profile
        # monotonic time at which the emulated device's transfer path is free; shared by all processes
        self._device_free_at = multiprocessing.get_context().RawValue("d", 0.0)
        fd, self._lock_path = tempfile.mkstemp(prefix="ioprof-emulated-", suffix=".lock")
        os.close(fd)
        weakref.finalize(self, _if_mine, os.getpid(), os.unlink, self._lock_path)
        self._opened()

    def _opened(self) -> None:
        """This process's own descriptor of the lock file and lock for its threads."""
        self._pid = os.getpid()
        self._fd = os.open(self._lock_path, os.O_RDWR)
        self._threads = threading.Lock()
        weakref.finalize(self, _if_mine, self._pid, os.close, self._fd)

    def __getstate__(self) -> dict[str, Any]:  # a spawned worker opens its own
        return {k: v for k, v in self.__dict__.items() if k not in ("_fd", "_threads")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._opened()

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        if self._pid != os.getpid():  # forked: the parent's descriptor would share its lock
            with _OPENING:
                if self._pid != os.getpid():
                    self._opened()
        with self._threads:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def reserve(self, size_bytes: int, now: float | None = None) -> float:
        """Book a read of ``size_bytes``; returns the monotonic time it completes.

        A read first pays its latency (the request reaching the device, a seek), then its
        transfer at the shared bandwidth: latency + transfer when the device is idle.
        """
        transfer_s = size_bytes / (self.profile.read_mb_per_s * 1e6)
        latency_s = self.profile.latency_ms / 1e3
        now = time.monotonic() if now is None else now
        with self._held():
            if self.profile.serial_latency:  # the seek occupies the one head
                end = max(now, self._device_free_at.value) + latency_s + transfer_s
            else:
                end = max(now + latency_s, self._device_free_at.value) + transfer_s
            self._device_free_at.value = end
            return end

    @staticmethod
    def wait_until(deadline: float) -> None:
        delay = deadline - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def read_file(path: str, emulated: EmulatedStorage | None = None, evict: bool = False) -> bytes:
    """All bytes of ``path``; through the emulated device when one is given. ``evict``: drop the
    file's pages once read (the cold regime), so that reading it again fetches it again. An object
    in a store (``s3://…``) is read whole by one GET."""
    if objects.is_store_url(path):
        return objects.read_object(path)
    with open(path, "rb", buffering=0) as f:
        deadline = emulated.reserve(os.fstat(f.fileno()).st_size) if emulated else None
        data = f.read()
        if evict:
            drop_after_read(f.fileno())
    if emulated is not None and deadline is not None:
        emulated.wait_until(deadline)
    return data


# A file read alone is read in pieces of this size, so that a reader can stop inside a large one
# (a tar shard or an Arrow file of hundreds of MB over a slow link) when the probe's time is up:
# at 1 MB/s a piece of 4 MB held a 0.7 s reading of an Arrow file for 4.0 s; 1 MB is what an NFS
# client asks for at a time (rsize) and its syscalls cost nothing beside it.
READ_PIECE_BYTES = 2**20


def read_until(
    path: str, stop: threading.Event, evict: bool = False, keep: bool = False
) -> tuple[int, bytes | None]:
    """(bytes read, the file's bytes where ``keep`` and it was read whole): ``path`` read in
    pieces until its end or until ``stop`` is set. ``evict``: drop its pages once read."""
    n, parts, whole = 0, [], False
    with open(path, "rb", buffering=0) as f:
        while not whole:
            piece = f.read(READ_PIECE_BYTES)  # may come short before the end (a pipe, a network read)
            whole = not piece
            n += len(piece)
            if keep:
                parts.append(piece)
            if not whole and stop.is_set():
                break
        if evict:
            drop_after_read(f.fileno())
    return n, (b"".join(parts) if keep and whole else None)


def copy_to(src: str, dst: Path) -> str:
    """``src`` (a file, an object in a store or a shard by URL: one GET) written to ``dst`` and synced."""
    with open(dst, "wb") as fout:
        if objects.is_store_url(src) or shards.is_shard_url(src):
            with shards.opened(src) as fin:
                shutil.copyfileobj(fin, fout, 1 << 20)
        else:
            with open(src, "rb") as fin:
                shutil.copyfileobj(fin, fout, 1 << 20)
        fout.flush()
        os.fsync(fout.fileno())
    return str(dst)


def per_sample(s: StorageCeiling, bytes_per_sample: float | None) -> StorageCeiling:
    """A ceiling of files that each hold many samples (tar shards): img/s is MB/s ÷ the bytes a
    sample takes. Unchanged where ``bytes_per_sample`` is None (a file is an image)."""
    if not bytes_per_sample:
        return s
    return replace(s, img_per_s=s.read_mb_per_s * 1e6 / bytes_per_sample, bytes_per_sample=bytes_per_sample)


def read_blob(blob: bytes, emulated: EmulatedStorage | None = None) -> bytes:
    """A file's bytes held in memory, delivered as the emulated device would (or at once)."""
    if emulated is not None:
        emulated.wait_until(emulated.reserve(len(blob)))
    return blob


class Readers:
    """``n`` plain threads running ``target`` (not a ThreadPoolExecutor: a probe may run while the
    interpreter exits, when ``concurrent.futures`` refuses new work); an exception in one is
    raised again by ``join``."""

    def __init__(self, n: int, target: Callable[[], None]) -> None:
        self.errors: list[BaseException] = []
        self._threads = [
            threading.Thread(target=self._run, args=(target,), name="ioprof-reader", daemon=True)
            for _ in range(n)
        ]
        for t in self._threads:
            t.start()

    def _run(self, target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as e:  # raised again in the caller's thread by join()
            self.errors.append(e)

    def running(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for them to end; whether any still runs."""
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return any(t.is_alive() for t in self._threads)

    def join(self) -> None:
        for t in self._threads:
            t.join()
        if self.errors:
            raise self.errors[0]


class _Readers:
    """N threads reading the files of ``order`` one by one, recording each completion; a monitor
    stops them at the cap or once the bandwidth's interval is narrow enough."""

    def __init__(
        self,
        order: list[int],
        read: Callable[[int], int],
        clock: Callable[[], float],
        stop: threading.Event | None = None,
    ) -> None:
        self._queue = iter(order)
        self._read = read
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = stop or threading.Event()  # set: the readers end, inside a file where they can
        self.completed_s: list[float] = []
        self.completed_bytes: list[int] = []
        self.latencies: list[float] = []
        self.failed = 0
        self.last_error: OSError | None = None
        self.lost: OSError | None = None
        self.started = 0.0

    def _reader(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                i = next(self._queue, None)
            if i is None:
                return
            t0 = self._clock()
            try:
                size = self._read(i)
            except OSError as e:  # broken link, permission, vanished: counted, not fatal
                with self._lock:
                    self.failed += 1
                    self.last_error = e
                    if e.errno in STORAGE_LOST_ERRNOS:
                        self.lost = e
                continue
            t1 = self._clock()
            with self._lock:
                self.completed_s.append(t1 - self.started)
                self.completed_bytes.append(size)
                self.latencies.append(t1 - t0)

    def run(self, concurrency: int, max_seconds: float | None) -> str:
        """Read until done, the cap, or a narrow interval; returns which stopped it."""
        self.started = self._clock()
        threads = Readers(concurrency, self._reader)
        try:
            stopped_by = self._monitor(threads, concurrency, max_seconds)
        finally:
            self._stop.set()
            threads.join()
        return stopped_by

    def _monitor(self, threads: Readers, concurrency: int, max_seconds: float | None) -> str:
        look = STORAGE_PROBE_MIN_FILES  # the interval is looked at after 100, 200, 400… completions only
        while threads.running(_MONITOR_S):
            if max_seconds is not None and self._clock() - self.started >= max_seconds:
                self._stop.set()
                return "seconds"
            with self._lock:
                done_s, sizes = self.completed_s[:look], self.completed_bytes[:look]
            if len(done_s) < look or not is_look(look, STORAGE_PROBE_MIN_FILES):
                continue
            if narrow(done_s, sizes, concurrency):
                self._stop.set()
                return "interval"
            look *= 2
        return "files"


@dataclass(frozen=True)
class Steady:
    """The completions a reading's rates count: those after its start-up transient."""

    warmup: int  # completions left out at the start (``stats.steady_start``)
    sizes: list[float]  # bytes of each counted completion
    spans: list[float]  # seconds from the completion before to each counted one

    @property
    def seconds(self) -> float:
        return max(sum(self.spans), 1e-9)


def steady(completed_s: Sequence[float], completed_bytes: Sequence[int], concurrency: int) -> Steady:
    """The completions past the start-up transient — a link's burst that arrives at once, a
    connection's slow start — which a rate sustained over an epoch does not include."""
    spans = gaps(completed_s)
    sizes = [float(b) for b in completed_bytes]
    w = steady_start(sizes, spans, concurrency)
    return Steady(w, sizes[w:], spans[w:])


def narrow(completed_s: Sequence[float], completed_bytes: Sequence[int], concurrency: int) -> bool:
    """Whether MB/s past the start-up transient is within ±5 % (at a look: held to 95 % / LOOKS)."""
    s = steady(completed_s, completed_bytes, concurrency)
    return ratio_interval(s.sizes, s.spans, concurrency, LOOKS).rel_half_width <= TARGET_REL_HALF_WIDTH


def probe_storage(
    paths: Sequence[str],
    concurrency: int,
    fs: FilesystemInfo,
    *,
    regime: str = "cold",
    emulated: EmulatedStorage | None = None,
    blobs: Sequence[bytes] | None = None,
    max_files: int | None = None,
    max_seconds: float | None = STORAGE_PROBE_MAX_S,
    seed: int = 0,
    root: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
    keep: dict[str, bytes] | None = None,
    keep_bytes: int = 0,
    found: PageRuns | None = None,
    read_member: Callable[[int], int] | None = None,
    places: Sequence[tuple[int, int]] | None = None,
) -> StorageCeiling:
    """Read files in shuffled order with ``concurrency`` readers: bandwidth, files/s, latency.
    ``read_member``: each item is one sample's member of the file ``paths[i]`` (an archive's), read
    by this as its dataset's library reads it, in the order given: a completion is a sample, and
    a file's pages are evicted before, not after each (a member shares pages with its neighbours);
    ``places``, each one's (offset, bytes): cold, one whose pages stayed cached is left out.

    ``keep``: filled with the bytes of the first files read, up to ``keep_bytes`` (a copy in
    memory for the decode ceiling, made from the same cold reads instead of reading them again).
    ``found``: filled with the pages the cold eviction dropped that were resident (to read back).
    ``blobs``: read an in-memory sample (aligned with ``paths``) instead of the files — only
    through emulated storage. The kernel's per-process counters (``read_bytes``) sum over the
    process's threads; bytes fetched are counted by the method the filesystem allows (``fetched``).
    Stops when every file was read, when MB/s's interval is within ±5 % (after
    STORAGE_PROBE_MIN_FILES), or after ``max_seconds``."""
    order = list(range(len(paths)))
    if read_member is None:  # members come in a random order already
        random.Random(seed).shuffle(order)
    order = order[:max_files] if max_files is not None else order
    if blobs is not None:
        cache = CacheInfo(
            "memory", 1.0, True, "in-process", "an in-memory sample: the real device is not read"
        )
        readers = _Readers(order, lambda i: len(read_blob(blobs[i], emulated)), clock)
    else:
        cache = prepare(list(dict.fromkeys(paths[i] for i in order)), regime, fs, found)
        order, cache = _cold_members(order, paths, places, cache, fs)
        lock = threading.Lock()
        stop = threading.Event()

        def read(i: int) -> int:
            if read_member is not None:
                return read_member(i)
            if emulated is not None:
                return len(read_file(paths[i], emulated, cache.evict_after_read))
            with lock:
                wanted = keep is not None and sum(map(len, keep.values())) < keep_bytes
            n, whole = read_until(paths[i], stop, cache.evict_after_read, keep=wanted)
            if keep is not None and whole is not None:
                with lock:
                    keep[paths[i]] = whole
            return n

        readers = _Readers(order, read, clock, stop)
    mount, me = MountCounters(fs), psutil.Process()
    before, io_before = mount.snapshot(), me.io_counters()
    stopped_by = readers.run(concurrency, max_seconds)
    read_bytes = me.io_counters().read_bytes - io_before.read_bytes
    if readers.lost is not None:
        check_storage(root or os.path.dirname(paths[order[0]]), fs, readers.lost)
    fetched = decide(
        fs,
        cache,
        read_bytes=read_bytes,
        requested_bytes=sum(readers.completed_bytes),
        before=before,
        after=mount.snapshot(),
        emulated=emulated is not None and blobs is not None,
        whole_files=read_member is None,
    )
    ceiling = _ceiling(readers, concurrency, cache, fetched, read_bytes, stopped_by, emulated)
    return replace(ceiling, by_member=True, latency_kind="a member") if read_member is not None else ceiling


def _cold_members(
    order: list[int],
    paths: Sequence[str],
    places: Sequence[tuple[int, int]] | None,
    cache: CacheInfo,
    fs: FilesystemInfo,
) -> tuple[list[int], CacheInfo]:
    """The members to read cold: those none of whose pages the cache still holds once evicted. A
    page mapped by a process stays (a memory-mapped database's, mapped in the loader's workers
    that read it), and a member read there is read from memory: such members are left out, and
    the rest, read cold, are the figure (said in the cache's note). Unchanged where none stayed,
    or all did, and where nothing can be evicted (memory, an object store)."""
    if places is None or cache.regime != "cold" or fs.ram_backed or fs.object_store:
        return order, cache
    held = held_resident([(paths[i], *places[i]) for i in order])
    cold = [i for i, h in zip(order, held, strict=True) if not h]
    if not cold or len(cold) == len(order):
        return order, cache
    note = (
        f"{len(order) - len(cold)} of the {len(order)} samples drawn were left out: their pages stayed "
        "in the page cache after eviction (mapped by another process: the loader's workers?); the "
        "rest were read cold"
    )
    return cold, replace(cache, resident_fraction=0.0, verified=True, note=note)


def _ceiling(
    readers: _Readers,
    concurrency: int,
    cache: CacheInfo,
    fetched: Fetched,
    read_bytes: int,
    stopped_by: str,
    emulated: EmulatedStorage | None,
) -> StorageCeiling:
    if not readers.completed_s and readers.last_error is not None:  # nothing read: no figure
        raise OSError(
            f"none of the {readers.failed} items tried could be read; the last: {readers.last_error}"
        )
    # the last read's completion ends the measurement (not the moment the readers were joined);
    # the rates count the reads after the start-up transient
    elapsed = max(max(readers.completed_s, default=0.0), 1e-9)
    total, done, lat = sum(readers.completed_bytes), len(readers.completed_s), readers.latencies
    counted = steady(readers.completed_s, readers.completed_bytes, concurrency)
    return StorageCeiling(
        concurrency=concurrency,
        files=done,
        bytes=total,
        elapsed_s=elapsed,
        read_mb_per_s=sum(counted.sizes) / 1e6 / counted.seconds,
        files_per_s=len(counted.spans) / counted.seconds,
        latency_s=tuple(lat),
        latency_p50_s=percentile(lat, 50) if lat else 0.0,
        latency_p99_s=percentile(lat, 99) if lat else 0.0,
        img_per_s=len(counted.spans) / counted.seconds,
        storage_read_bytes=read_bytes,
        cache=cache,
        emulated=emulated.profile.name if emulated else "",
        unreadable_files=readers.failed,
        fetched=fetched,
        completed_s=tuple(readers.completed_s),
        completed_bytes=tuple(readers.completed_bytes),
        stopped_by=stopped_by,
        looks=LOOKS,
        warmup=counted.warmup,
    )
