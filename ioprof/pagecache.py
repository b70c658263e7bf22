"""Page cache control: evict files, warm them, and *verify* what is resident.

A read that hits RAM is not a storage measurement, so every measurement states its
cache regime and the resident fraction measured right before it. Residency is read
with ``cachestat`` (Linux 6.5+) where the kernel has it, else with ``mincore`` on a
read-only shared mapping (``mincore`` on a private or writable mapping can report
pages the caller could not have faulted in).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import platform
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import psutil

from ioprof.results import CacheInfo

# Filesystems where POSIX_FADV_DONTNEED cannot drop the data: the page cache *is* the storage.
RAM_BACKED_FS_TYPES = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"})
# Network filesystems: eviction drops only this client's cache; the server may still hold the data.
NETWORK_FS_TYPES = frozenset({"nfs", "nfs4", "cifs", "smb3", "9p", "fuse.sshfs", "lustre", "gpfs", "beegfs"})

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
    def network(self) -> bool:
        return self.fs_type in NETWORK_FS_TYPES or self.fs_type.startswith("nfs")


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


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
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
    if size_bytes == 0:
        return 0
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
        return sum(b & 1 for b in vec)
    finally:
        _libc.munmap(ctypes.c_void_p(addr), size_bytes)


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


def evict(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Ask the kernel to drop the files' clean pages (POSIX_FADV_DONTNEED). Never writes the files."""
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            # Dirty pages cannot be dropped; flushing them persists what is pending and changes no data.
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Read every file once so that its pages are resident."""
    buf = bytearray(1 << 20)
    for p in paths:
        try:
            with open(p, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass
        except OSError:
            continue


# A cold measurement tolerates this much of the data still resident (metadata pages, a concurrent reader).
COLD_MAX_RESIDENT_FRACTION = 0.02
# A warm measurement needs at least this much resident.
WARM_MIN_RESIDENT_FRACTION = 0.98


def prepare(paths: Sequence[str], regime: str, fs: FilesystemInfo) -> CacheInfo:
    """Bring ``paths`` into the cache regime asked for, and say whether that worked."""
    note = ""
    if regime == "cold":
        evict(paths)
        res = residency(paths)
        verified = res.fraction <= COLD_MAX_RESIDENT_FRACTION
        if fs.ram_backed:
            note = f"not cold: {fs.fs_type} is RAM-backed, its files cannot be evicted"
            verified = False
        elif not verified:
            note = (
                f"not cold: {res.fraction:.0%} still resident after eviction "
                "(files mapped or being read by another process?)"
            )
        elif fs.network:
            note = f"{fs.fs_type}: only this client's cache was dropped; the server may still cache the files"
        return CacheInfo("cold", res.fraction, verified, res.method, note)
    if regime == "warm":
        warm(paths)
        res = residency(paths)
        verified = res.fraction >= WARM_MIN_RESIDENT_FRACTION
        if not verified:
            note = f"not warm: only {res.fraction:.0%} resident after reading (too little free RAM?)"
        return CacheInfo("warm", res.fraction, verified, res.method, note)
    if regime == "as-is":
        res = residency(paths)
        return CacheInfo("as-is", res.fraction, True, res.method, "")
    raise ValueError(f"unknown cache regime {regime!r}")
