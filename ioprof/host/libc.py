"""The C library, loaded once for every module of the house that calls it directly (the page
cache's residency calls, the heap's trim, the kernel's own files read without letting the GIL go)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_NAME = ctypes.util.find_library("c") or "libc.so.6"
LIBC = ctypes.CDLL(_NAME, use_errno=True)

# The same library called holding the GIL (``PyDLL``), for the kernel's own files under /proc: a
# read there takes microseconds and never waits on a device, while a call that lets the GIL go
# (``os.pread``, ``open``, ``os.listdir``) takes it back behind any busy Python thread of the
# process only at that thread's next switch — 5 ms each (``sys.getswitchinterval``), which made a
# training loop with a busy thread pay tens of ms a batch for ioprof's readings.
_HELD = ctypes.PyDLL(_NAME, use_errno=True)
_HELD.open.argtypes = [ctypes.c_char_p, ctypes.c_int]
_HELD.open.restype = ctypes.c_int
_HELD.pread.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long]
_HELD.pread.restype = ctypes.c_ssize_t
_HELD.close.argtypes = [ctypes.c_int]
_HELD.close.restype = ctypes.c_int
_HELD.opendir.argtypes = [ctypes.c_char_p]
_HELD.opendir.restype = ctypes.c_void_p
_HELD.readdir.argtypes = [ctypes.c_void_p]
_HELD.readdir.restype = ctypes.c_void_p
_HELD.closedir.argtypes = [ctypes.c_void_p]
_HELD.closedir.restype = ctypes.c_int
_HELD.readlink.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
_HELD.readlink.restype = ctypes.c_ssize_t
# struct dirent on Linux (glibc and musl, 64-bit): d_ino 8, d_off 8, d_reclen 2, d_type 1, d_name
_D_NAME = 19


def _error(what: str) -> OSError:
    e = ctypes.get_errno()
    return OSError(e, f"{what}: {os.strerror(e)}")


def pread_held(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes of an open file from its start, holding the GIL (for /proc only)."""
    buf = ctypes.create_string_buffer(size)
    got = _HELD.pread(fd, buf, size, 0)
    if got < 0:
        raise _error("pread")
    return buf.raw[:got]


def _open(path: str) -> int:
    """A /proc file opened for reading holding the GIL: its descriptor, or -1 (``errno`` set)."""
    return int(_HELD.open(os.fsencode(path), os.O_RDONLY | os.O_CLOEXEC))


def open_held(path: str) -> int:
    """A /proc file opened for reading holding the GIL (close it with ``os.close``)."""
    fd = _open(path)
    if fd < 0:
        raise _error(f"open {path}")
    return fd


def read_held(path: str, size: int = 4096) -> bytes | None:
    """A /proc file's first ``size`` bytes holding the GIL, or None where it cannot be read."""
    fd = _open(path)
    if fd < 0:
        return None
    try:
        return pread_held(fd, size)
    except OSError:
        return None
    finally:
        _HELD.close(fd)


def read_whole_held(path: str, chunk: int = 1 << 16) -> bytes | None:
    """A whole /proc file holding the GIL (``/proc/self/net/dev``, ``mountstats``: a line an
    interface or a mount, of any length), or None where it cannot be read."""
    fd = _open(path)
    if fd < 0:
        return None
    parts = []
    buf = ctypes.create_string_buffer(chunk)
    offset = 0
    try:
        while (got := _HELD.pread(fd, buf, chunk, offset)) > 0:
            parts.append(buf.raw[:got])
            offset += got
        return b"".join(parts) if got == 0 else None
    finally:
        _HELD.close(fd)


def listdir_held(path: str) -> list[str] | None:
    """A /proc folder's names (without . and ..) holding the GIL, or None where it cannot be read."""
    d = _HELD.opendir(os.fsencode(path))
    if not d:
        return None
    names = []
    try:
        while entry := _HELD.readdir(d):
            name = ctypes.string_at(entry + _D_NAME).decode()
            if name not in (".", ".."):
                names.append(name)
    finally:
        _HELD.closedir(d)
    return names


def readlink_held(path: str) -> str | None:
    """Where a /proc link points (a descriptor's file), holding the GIL; None where it cannot be read."""
    buf = ctypes.create_string_buffer(4096)
    got = _HELD.readlink(os.fsencode(path), buf, 4096)
    return os.fsdecode(buf.raw[:got]) if got >= 0 else None
