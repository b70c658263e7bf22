"""What a loader's workers hold open, read from the kernel (``/proc/PID/fd``): for a dataset none
of the other sources knows — one that reads members of an archive it keeps open, a database
file — the files it really reads, and so the filesystem whose counters count its bytes.

Left out: what every Python process opens (the interpreter's and its packages' files), torch's
shared-memory batches, pipes, sockets, anonymous memory and files open only to be written. A dataset that opens and closes a
file per sample is seen only where a reading falls inside a read.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable
from typing import Any

from ioprof.host.libc import read_held
from ioprof.host.procstat import descriptors
from ioprof.sources import files
from ioprof.sources.memory import MemoryView
from ioprof.sources.source import Source

_SKIP_PREFIXES = ("/dev/", "/proc/", "/sys/", "/memfd:", "anon_inode:", "socket:", "pipe:")


def _library_roots() -> tuple[str, ...]:
    return _roots((sys.prefix, sys.base_prefix, sys.exec_prefix), tuple(sys.path))


@functools.cache
def _roots(prefixes: tuple[str, ...], path: tuple[str, ...]) -> tuple[str, ...]:
    """Resolved once for each sys.path seen (``realpath`` stats every part of each)."""
    roots = {*prefixes, *(p for p in path if p.endswith("-packages"))}
    return tuple(sorted(os.path.realpath(r) + os.sep for r in roots if r))


KIND = "opened"


def find(dataset: Any) -> Source | None:
    """Nothing, from the dataset alone: what it reads is seen in its workers (``held_open``)."""
    return None


def source_of(paths: list[str]) -> Source:
    """The files a loader's workers were seen holding open, as a source."""
    root = files.common_root(paths)
    return Source(KIND, "the files its workers held open", tuple(paths), root, root, "filesystem")


def zips_held(paths: list[str], samples: int | None) -> Source | None:
    """Zip archives a loader's workers held open, as a source read by member: where their image
    members are as many as the dataset's samples (``samples``: its length), each a sample — a
    dataset reading members of zips it keeps open, one an image. Their central directories are
    read (a read at each one's end): asked once the window is over, never as the loader starts.
    None where a file is not a zip, or the counts differ (what a sample reads is then not known)."""
    from ioprof.sources import archive

    if not paths or not samples:
        return None
    try:
        found = archive.zip_members(paths)
    except (OSError, ValueError):  # unreadable, or a zip that is not one after all
        return None
    if found is None or found[0] != samples:
        return None
    root = files.common_root(paths)
    return Source(
        KIND,
        "images in zip archives its workers held open",
        tuple(paths),
        root,
        root,
        "filesystem",
        samples=samples,
        members=found[1],
        members_in="zip",
    )


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    return (
        "what it reads was seen only as files its workers held open, not through the dataset: "
        "no copy of it can be made to read them from memory"
    )


def held_open(pids: Iterable[int]) -> list[str]:
    """Regular files the processes hold open that belong to no library: what a dataset reads."""
    libraries = _library_roots()
    seen: dict[str, None] = {}
    for pid in pids:
        for fd, target in descriptors(pid):
            if (
                not target.startswith("/")
                or target.startswith(_SKIP_PREFIXES)
                or target.startswith(libraries)
            ):
                continue
            if target.endswith((".py", ".pyc", ".so", " (deleted)")) or _ioprof_own(target):
                continue
            try:
                if not os.path.isfile(target) or not _open_for_reading(pid, fd):
                    continue
            except OSError:
                continue
            seen[target] = None
    return list(seen)


def _open_for_reading(pid: int, fd: str) -> bool:
    """Whether the descriptor was opened to read: a log the script's output goes to (its stdout
    redirected, inherited by every worker) is open write-only, and nothing is read from it."""
    for line in (read_held(f"/proc/{pid}/fdinfo/{fd}") or b"").splitlines():
        if line.startswith(b"flags:"):
            return int(line.split()[1], 8) & os.O_ACCMODE != os.O_WRONLY
    return True


def _ioprof_own(path: str) -> bool:
    """ioprof's own files in a worker: its stage rows and its copies in memory."""
    name = os.path.basename(path)
    return "ioprof-" in path or (name.startswith("stages-") and name.endswith(".jsonl"))
