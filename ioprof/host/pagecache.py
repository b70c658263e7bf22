"""Page cache control: evict files, warm them, and *verify* what is resident.

A read that hits RAM is not a storage measurement, so every measurement states its
cache regime and the resident fraction measured right before it. Residency is read
with ``cachestat`` (Linux 6.5+) where the kernel has it, else with ``mincore`` on a
read-only shared mapping (``mincore`` on a private or writable mapping can report
pages the caller could not have faulted in).
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import mmap
import os
import platform
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

import psutil

from ioprof.core.counts import CacheInfo, Fetched, ReadBack
from ioprof.core.percent import pct
from ioprof.core.results import REQUEST_FS_TYPES
from ioprof.core.thresholds import CONTRADICTION_MIN_BYTES, WARM_MAX_FETCHED_SHARE
from ioprof.core.vocab import cache_regime
from ioprof.host.libc import LIBC

# Filesystems where POSIX_FADV_DONTNEED cannot drop the data: the page cache *is* the storage.
RAM_BACKED_FS_TYPES = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"})
# Network filesystems (kernel clients) and object stores: eviction drops only this client's cache;
# the server may still hold the data. Block I/O counters (read_bytes) never see their reads.
NETWORK_FS_TYPES = frozenset(
    {
        *REQUEST_FS_TYPES,
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "lustre",
        "gpfs",
        "beegfs",
        "ceph",
        "afs",
        "virtiofs",
    }
)
# Local filesystems on block devices: their reads show up in the reader's read_bytes.
BLOCK_FS_TYPES = frozenset(
    {
        "ext2",
        "ext3",
        "ext4",
        "xfs",
        "btrfs",
        "f2fs",
        "vfat",
        "exfat",
        "ntfs3",
        "jfs",
        "reiserfs",
        "overlay",
        "squashfs",
        "iso9660",
        "hfsplus",
        "udf",
    }
)

_CACHESTAT_SYSCALL_X86_64 = 451  # cachestat(2), Linux 6.5+, same number on all architectures since 6.5
_PAGE_SIZE = mmap.PAGESIZE


@dataclass(frozen=True)
class FilesystemInfo:
    """Where a path lives: filesystem type, mount point and mount source."""

    fs_type: str
    mountpoint: str
    source: str

    @property
    def ram_backed(self) -> bool:
        return self.fs_type in RAM_BACKED_FS_TYPES

    @property
    def fuse(self) -> bool:
        """A FUSE filesystem (sshfs, s3fs, gcsfuse, rclone, ntfs-3g…): a daemon does the reads."""
        return self.fs_type == "fuse" or self.fs_type.startswith(("fuse.", "fuseblk"))

    @property
    def network(self) -> bool:
        """Data over a network: a kernel network client, or a FUSE daemon talking to a server."""
        return (
            self.fs_type in NETWORK_FS_TYPES
            or self.fs_type.startswith("nfs")
            or (self.fuse and self.fs_type != "fuseblk")
        )

    @property
    def object_store(self) -> bool:
        """An S3-compatible object store (``--data s3://…``) or shards over HTTP(S): read by GETs,
        no page cache."""
        return self.fs_type in REQUEST_FS_TYPES

    @property
    def kind(self) -> str:
        """How bytes fetched from this filesystem can be counted: block | network | fuse | ram | unknown."""
        if self.ram_backed:
            return "ram"
        if self.fuse:
            return "fuse"
        if self.network:
            return "network"
        if self.fs_type in BLOCK_FS_TYPES or self.source.startswith("/dev/"):
            return "block"
        return "unknown"


def filesystem_of(path: str | os.PathLike[str]) -> FilesystemInfo:
    """The mount that holds ``path`` (longest matching mount point)."""
    real = os.path.realpath(path)
    best: FilesystemInfo | None = None
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint
        inside = real == mp or real.startswith(mp.rstrip("/") + "/")
        if inside and (best is None or len(mp) > len(best.mountpoint)):
            best = FilesystemInfo(fs_type=part.fstype, mountpoint=mp, source=part.device)
    return best or FilesystemInfo(fs_type="unknown", mountpoint="/", source="unknown")


class _CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [
        ("nr_cache", ctypes.c_uint64),
        ("nr_dirty", ctypes.c_uint64),
        ("nr_writeback", ctypes.c_uint64),
        ("nr_evicted", ctypes.c_uint64),
        ("nr_recently_evicted", ctypes.c_uint64),
    ]


_libc = LIBC
_libc.syscall.restype = ctypes.c_long
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
_MAP_FAILED = ctypes.c_void_p(-1).value


def _pages(size_bytes: int) -> int:
    return (size_bytes + _PAGE_SIZE - 1) // _PAGE_SIZE


def resident_pages_cachestat(fd: int) -> int | None:
    """Resident pages of an open file via cachestat(2), or None where the kernel lacks it."""
    if platform.machine() not in ("x86_64", "aarch64"):
        return None
    rng = _CachestatRange(0, 0)  # len 0: to the end of the file
    out = _Cachestat()
    rc = _libc.syscall(_CACHESTAT_SYSCALL_X86_64, ctypes.c_uint(fd), ctypes.byref(rng), ctypes.byref(out), 0)
    if rc != 0:
        if ctypes.get_errno() in (errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP, errno.EINVAL):
            return None
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return int(out.nr_cache)


def resident_pages_mincore(fd: int, size_bytes: int) -> int:
    """Resident pages of an open file via mincore(2) on a read-only shared mapping."""
    return sum(_resident_vector(fd, size_bytes))


def _resident_vector(fd: int, size_bytes: int) -> list[bool]:
    """Whether each page of an open file is resident, by mincore(2) on a read-only shared mapping."""
    if size_bytes == 0:
        return []
    addr = _libc.mmap(None, size_bytes, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr in (None, _MAP_FAILED):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    try:
        n = _pages(size_bytes)
        vec = (ctypes.c_ubyte * n)()
        if _libc.mincore(ctypes.c_void_p(addr), size_bytes, vec) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return [bool(b & 1) for b in vec]
    finally:
        _libc.munmap(ctypes.c_void_p(addr), size_bytes)


# Of each file, the runs of its pages the page cache held: (first page, pages)
PageRuns = dict[str, list[tuple[int, int]]]


def resident_runs(fd: int, size_bytes: int) -> list[tuple[int, int]]:
    """The runs of an open file's pages that are resident, as (first page, pages); none where the
    file cannot be mapped to read them (a FUSE mount in direct I/O): nothing to read back."""
    if size_bytes == 0 or resident_pages_cachestat(fd) == 0:  # most files of a cold dataset: one call
        return []
    try:
        vector = _resident_vector(fd, size_bytes)
    except OSError:
        return []
    runs: list[tuple[int, int]] = []
    for page, resident in enumerate(vector):
        if not resident:
            continue
        if runs and runs[-1][0] + runs[-1][1] == page:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((page, 1))
    return runs


def held_resident(ranges: Sequence[tuple[str, int, int]]) -> list[bool]:
    """Whether any page of each (file, offset, bytes) range is resident: a sample read at its place
    in a file of many (an archive's member, a database's record) whose pages the cache holds."""
    runs: PageRuns = {}
    out = []
    for path, offset, size in ranges:
        if path not in runs:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                runs[path] = []
            else:
                try:
                    runs[path] = resident_runs(fd, os.fstat(fd).st_size)
                finally:
                    os.close(fd)
        first, last = offset // _PAGE_SIZE, (offset + max(size, 1) - 1) // _PAGE_SIZE
        out.append(any(start <= last and first < start + n for start, n in runs[path]))
    return out


@dataclass(frozen=True)
class Residency:
    """How much of a set of files sits in the page cache, and how it was measured."""

    resident_pages: int
    total_pages: int
    method: str  # "cachestat" | "mincore" | "unreadable"

    @property
    def fraction(self) -> float:
        return self.resident_pages / self.total_pages if self.total_pages else 1.0


def residency(paths: Iterable[str | os.PathLike[str]]) -> Residency:
    """Measure the resident fraction of ``paths`` without reading them."""
    resident = total = 0
    methods: set[str] = set()
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            methods.add("unreadable")
            continue
        try:
            size = os.fstat(fd).st_size
            total += _pages(size)
            pages = resident_pages_cachestat(fd)
            if pages is None:
                pages = resident_pages_mincore(fd, size)
                methods.add("mincore")
            else:
                methods.add("cachestat")
            resident += min(pages, _pages(size))
        finally:
            os.close(fd)
    method = "cachestat" if methods == {"cachestat"} else "+".join(sorted(methods)) or "cachestat"
    return Residency(resident_pages=resident, total_pages=total, method=method)


# Files read to see whether the filesystem keeps their pages, and at most this many bytes of them:
# a few pages tell as well as many, and at 1 MB/s 8 MB of a zip or an Arrow file held a user's
# training 4.8 s longer (the pause of `ioprof run` describes the dataset).
KEEPS_PAGES_FILES = 3
KEEPS_PAGES_MAX_BYTES = 2**20


def keeps_pages(paths: Sequence[str], fs: FilesystemInfo) -> bool | None:
    """Whether this filesystem keeps a file's pages cached once it has been read and closed: read a
    few files whole, close them, and look at their residency (opening a file again is what drops
    them on a FUSE mount such as sshfs, and residency is read through a fresh open). True on a
    RAM-backed filesystem; None when no file could be read."""
    if fs.ram_backed:
        return True
    chosen: list[str] = []
    read = 0
    for p in paths:
        if len(chosen) >= KEEPS_PAGES_FILES or read >= KEEPS_PAGES_MAX_BYTES:
            break
        try:
            with open(p, "rb") as f:
                read += _pages(len(f.read(KEEPS_PAGES_MAX_BYTES - read))) * _PAGE_SIZE
        except OSError:
            continue
        chosen.append(p)
    if not chosen or read == 0:
        return None
    return residency(chosen).resident_pages * _PAGE_SIZE >= 0.5 * read


def remember(paths: Iterable[str | os.PathLike[str]], found: PageRuns | None) -> None:
    """Record the runs of pages each file has resident now, as ``evict`` does, without evicting:
    for cold reads made in other processes (``scale``'s ranks), to be read back after them."""
    if found is None:
        return
    for path, fd in _each_open(paths):
        _remember(fd, path, found)


def _each_open(paths: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[str, int]]:
    """Each file that can be opened to read, with its descriptor (closed once the next is asked for)."""
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            yield os.fspath(p), fd
        finally:
            os.close(fd)


def _remember(fd: int, path: str, found: PageRuns) -> None:
    """An open file's resident page runs, unless it has its record: the first is the user's."""
    if path not in found:
        found[path] = resident_runs(fd, os.fstat(fd).st_size)


def evict(paths: Iterable[str | os.PathLike[str]], found: PageRuns | None = None) -> None:
    """Ask the kernel to drop the files' clean pages (POSIX_FADV_DONTNEED). Never writes the files.
    ``found``: filled with the runs of pages each file had resident before its first eviction
    (``read_back``); a file evicted again keeps that record, for the pages a later eviction finds
    are those ioprof's own reads left, not the user's."""
    for path, fd in _each_open(paths):
        if found is not None:
            _remember(fd, path, found)
        # Dirty pages cannot be dropped; flushing them persists what is pending and changes no data.
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def read_back(
    found: PageRuns, max_seconds: float, clock: Callable[[], float] = time.perf_counter
) -> ReadBack:
    """Read back the pages ``evict`` found resident and dropped, so that the page cache holds them
    again, and only them: readahead is off for these reads (POSIX_FADV_RANDOM). Stops once it has
    taken ``max_seconds``; what is left is counted, not read (``LEAVE_ALL``: all of it)."""
    t0 = clock()
    back = left = 0
    held = {path: runs for path, runs in found.items() if runs}
    for path, runs in held.items():
        wanted = sum(n for _, n in runs) * _PAGE_SIZE
        if clock() - t0 > max_seconds:
            left += wanted
            continue
        try:
            got = _read_runs(path, runs)
        except OSError:
            left += wanted
            continue
        back += got
        left += max(0, wanted - _pages(got) * _PAGE_SIZE)  # a file's last page may end short
    return ReadBack(files=len(held), bytes=back, left_bytes=left, seconds=clock() - t0)


# read_back's time for a command stopped by its user: nothing is read, what is left is counted
LEAVE_ALL = -1.0


def held_any(found: PageRuns | None) -> bool:
    """Whether the files ``evict`` recorded had any page in the cache when it dropped them."""
    return found is not None and any(found.values())


def _read_runs(path: str, runs: Sequence[tuple[int, int]]) -> int:
    """Bytes read from ``path``'s page runs, readahead off."""
    got = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for first, pages in runs:
            offset, end = first * _PAGE_SIZE, (first + pages) * _PAGE_SIZE
            while offset < end:
                piece = os.pread(fd, min(READ_BACK_PIECE_BYTES, end - offset), offset)
                if not piece:
                    break
                got += len(piece)
                offset += len(piece)
    finally:
        os.close(fd)
    return got


READ_BACK_PIECE_BYTES = 1 << 20


def warm(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Read every file that is not already resident once, so that its pages are."""
    buf = bytearray(1 << 20)
    for p in paths:
        try:
            with open(p, "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                pages = resident_pages_cachestat(f.fileno())
                if pages is not None and pages >= _pages(size):
                    continue
                while f.readinto(buf):
                    pass
        except OSError:
            continue


def drop_after_read(fd: int) -> None:
    """Drop an open file's pages right after it was read, so that a later read is cold again:
    what a dataset much larger than RAM gets from the kernel's LRU. Changes no data."""
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


# A cold measurement tolerates this much of the data still resident (metadata pages, a concurrent reader).
COLD_MAX_RESIDENT_FRACTION = 0.02
# A warm measurement needs at least this much resident.
WARM_MIN_RESIDENT_FRACTION = 0.98


def prepare(
    paths: Sequence[str], regime: str, fs: FilesystemInfo, found: PageRuns | None = None
) -> CacheInfo:
    """Bring ``paths`` into the cache regime asked for, and say whether that worked.

    Cold: every file evicted and residency verified; the readers then evict each file again after
    reading it (``evict_after_read``), so a file read twice is read cold twice.
    An object store's objects are never in this host's page cache: every GET fetches the object
    again (cold, and nothing to evict), and a warm regime cannot be made. ``found``: filled with
    what the cold eviction dropped that was resident (``evict``), to be read back after.
    """
    if fs.object_store:
        note = f"an object store ({fs.source}): no page cache on this host holds its objects — every read is a GET"
        if regime == "warm":
            return CacheInfo("warm", 0.0, False, "object store", f"not warm: {note}")
        return CacheInfo(cache_regime(regime), 0.0, True, "object store", note)
    if regime == "cold":
        evict(paths, found)
        res = residency(paths)
        verified = res.fraction <= COLD_MAX_RESIDENT_FRACTION
        note = ""
        if fs.ram_backed:
            note = f"not cold: {fs.fs_type} is RAM-backed, its files cannot be evicted"
            verified = False
        elif res.total_pages == 0:
            note = "not cold: none of the files could be opened to check their residency"
            verified = False
        elif not verified:
            note = (
                f"not cold: {pct(res.fraction, 0)} still resident after eviction "
                "(files mapped or being read by another process?)"
            )
        elif fs.kind == "network":
            note = f"{fs.fs_type}: only this client's cache was dropped; the server may still cache the files"
        elif fs.kind == "fuse":
            note = (
                f"{fs.fs_type}: the kernel's cache was dropped; the FUSE daemon or its server may cache too"
            )
        return CacheInfo("cold", res.fraction, verified, res.method, note, evict_after_read=True)
    if regime == "warm":
        warm(paths)
        res = residency(paths)
        verified = res.fraction >= WARM_MIN_RESIDENT_FRACTION
        note = (
            ""
            if verified
            else f"not warm: only {pct(res.fraction, 0)} resident after reading (too little free RAM?)"
        )
        if verified and fs.kind == "fuse":
            note = (
                f"{fs.fs_type}: FUSE drops a file's cached pages when it is opened again unless mounted "
                "with kernel_cache/auto_cache, so warm files may be fetched again"
            )
        return CacheInfo("warm", res.fraction, verified, res.method, note)
    if regime == "as-is":
        res = residency(paths)
        return CacheInfo("as-is", res.fraction, True, res.method, "")
    raise ValueError(f"unknown cache regime {regime!r}")


def keep_warm(cache: CacheInfo, paths: Sequence[str], total_files: int) -> CacheInfo:
    """A cold regime with ``paths`` read back into the page cache (the share RAM would hold), and
    their residency verified: a filesystem that drops read pages cannot hold them, and says so."""
    warm(paths)
    res = residency(paths)
    share = len(paths) / max(1, total_files)
    if res.fraction < WARM_MIN_RESIDENT_FRACTION:
        return replace(
            cache,
            verified=False,
            note=f"the {pct(share, 0)} meant to stay warm is not: only {pct(res.fraction, 0)} resident after reading",
        )
    note = (
        f"cold, but {pct(share, 0)} of the files kept warm ({pct(res.fraction, 0)} of their pages resident)"
    )
    return replace(cache, note=note)


def _file_part(path: str) -> str:
    """The file behind a sample's name: a tar shard's member ``shard.tar:key`` is read from ``shard.tar``."""
    head, sep, _ = path.rpartition(":")
    return head if sep and not os.path.exists(path) and os.path.exists(head) else path


# After a cold window, residency is checked on at most this many of the files read (cheap).
AFTER_CHECK_MAX_FILES = 256


def cut_reads(root: str, open_paths: Iterable[str], cache: CacheInfo) -> list[str]:
    """The files under ``root`` among ``open_paths``, those a loader's readers had open when they
    were ended: in the cold regime their pages are dropped, as the readers would have dropped them
    once read. A read still in flight when its reader was ended fills its pages after that drop."""
    top = os.path.realpath(root)
    cut = [p for p in open_paths if os.path.commonpath([top, os.path.realpath(p)]) == top]
    if cache.evict_after_read:
        evict(cut)
    return cut


def verify_after(cache: CacheInfo, read_paths: Sequence[str], cut: Iterable[str] = ()) -> CacheInfo:
    """``cache`` with the residency of the files a window read, measured after it.

    A cold window whose files stayed resident was not cold throughout (another reader, a mapping);
    it loses its verification and says so. The files in ``cut`` are left out: the window's own
    readers were reading them again when they were ended (``cut_reads``: after the window, a loader
    reads ahead into the next epoch), and what a cut read left resident says nothing of the window.
    """
    if cache.regime != "cold" or not read_paths:
        return cache
    ours = {os.path.realpath(p) for p in cut}
    files = dict.fromkeys(_file_part(p) for p in read_paths)
    # resolved only where there is a cut to compare with, and only as far as the sample goes: on a
    # network mount each resolution may cost a round trip
    kept = (p for p in files if not ours or os.path.realpath(p) not in ours)
    sample = list(itertools.islice(kept, AFTER_CHECK_MAX_FILES))
    if not sample:
        return cache
    after = residency(sample).fraction
    if after <= COLD_MAX_RESIDENT_FRACTION or not cache.verified:
        return replace(cache, resident_after=after)
    return replace(
        cache,
        resident_after=after,
        verified=False,
        note=f"not cold throughout: {pct(after, 0)} of the files read were resident after the window",
    )


# Counters of what storage itself delivered (not an emulated device's charge, not a GET's body)
STORAGE_COUNTERS = ("block-io", "nfs-mountstats", "fuse-daemon")


def verify_warm_after(
    cache: CacheInfo, fetched: Fetched, read_bytes: int, fs: FilesystemInfo | None = None
) -> CacheInfo:
    """``cache`` as it held over a warm window: one whose storage counters show more than
    ``WARM_MAX_FETCHED_SHARE`` of the bytes it read fetched was not warm throughout and loses its
    verification, saying why: a FUSE mount (``fs``) that drops a file's pages when it is opened
    again, or pages evicted after they were warmed — naming the host's own reclaim where one runs."""
    fetched_bytes = fetched.bytes
    if (
        cache.regime != "warm"
        or not cache.verified
        or fetched.method not in STORAGE_COUNTERS
        or fetched_bytes is None
        or read_bytes < CONTRADICTION_MIN_BYTES
        or fetched_bytes <= WARM_MAX_FETCHED_SHARE * read_bytes
    ):
        return cache
    if fs is not None and fs.kind == "fuse":
        why = (
            f"{fs.fs_type} drops a file's cached pages when it is opened again, unless mounted with "
            "kernel_cache or auto_cache"
        )
    else:
        reclaim, _ = proactive_reclaim()
        cause = (
            f"this host runs {reclaim}" if reclaim else "memory pressure, or the host reclaiming idle pages"
        )
        why = f"pages evicted after they were warmed ({cause})"
    if fetched_bytes > read_bytes:
        why += "; more than was read, by the readahead around the pages read again"
    return replace(
        cache,
        verified=False,
        note=(
            f"not warm throughout: {pct(fetched_bytes / read_bytes, 0)} of the bytes read were fetched from "
            f"storage during the window — {why}"
        ),
    )


_DAMON = "/sys/kernel/mm/damon"


def _text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def proactive_reclaim(
    root: str = _DAMON, module: str = "/sys/module/damon_reclaim"
) -> tuple[str, float | None]:
    """The kernel's own reclaim of idle pages, where it runs — DAMON_RECLAIM, or a kdamond with a
    pageout scheme (what some fleets run to keep memory free) — and the seconds a page must have
    looked idle before it is paged out (None where not read); ("", None) where none runs or it
    cannot be read. DAMON watches memory in regions and samples one page of each, so a page read
    a moment ago can go with an idle region around it: the age is a floor, not a promise."""
    import glob

    if _text(f"{module}/parameters/enabled") == "Y":
        age_us = _text(f"{module}/parameters/min_age")
        return "DAMON_RECLAIM", int(age_us) / 1e6 if age_us and age_us.isdigit() else None
    for state in sorted(glob.glob(f"{root}/admin/kdamonds/*/state")):
        if _text(state) != "on":
            continue
        kdamond = os.path.dirname(state)
        for action in sorted(glob.glob(f"{kdamond}/contexts/*/schemes/*/action")):
            if _text(action) != "pageout":
                continue
            scheme = os.path.dirname(action)
            context = os.path.dirname(os.path.dirname(scheme))
            ages = _text(f"{scheme}/access_pattern/age/min")
            aggr_us = _text(f"{context}/monitoring_attrs/intervals/aggr_us")
            idle = (
                int(ages) * int(aggr_us) / 1e6
                if ages and aggr_us and ages.isdigit() and aggr_us.isdigit()
                else None
            )
            return f"DAMON's pageout scheme in kdamond {os.path.basename(kdamond)}", idle
    return "", None
