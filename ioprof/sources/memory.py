"""Bytes held in memory under a file's name, for a pipeline to read instead of its source.

"In the page cache" is not "in memory": a FUSE mount (sshfs, s3fs) drops a file's cached pages at
every open by default, an NFS client revalidates them, and a URL is fetched again at each read.
So a copy is made in anonymous memory files (``memfd_create``: RAM, not ``/dev/shm``, whose size
Docker caps at 64 MB), reached through symlinks that keep each item's name
(``<tmp>/<n>/<parent>/<name>`` → ``/proc/<pid>/fd/<fd>``), which worker processes started by
fork, spawn or a fork server can all open.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

# What a copy in memory holds: enough items to vary sizes; over a slow link each one costs a read.
MEMORY_SAMPLE_FILES = 64
MEMORY_SAMPLE_BYTES = 64 * 2**20


@dataclass
class MemoryView:
    """A copy of a dataset whose reads come from memory.

    ``positions``: the indices of a map-style copy that read from memory (the probe draws from
    them); None for an iterable copy, every item of which reads from memory.
    """

    dataset: Any
    positions: list[int] | None
    files: int
    bytes: int
    source: str = ""  # what was copied: "64 of your files", "2 of your tar shards"
    _fds: list[int] = field(default_factory=list)
    _links: str = ""

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
        if self._links:
            shutil.rmtree(self._links, ignore_errors=True)


class MemoryCopies:
    """Items copied into memory files, each behind a symlink that keeps its name."""

    def __init__(self) -> None:
        self.view = MemoryView(dataset=None, positions=[], files=0, bytes=0)
        self.view._links = tempfile.mkdtemp(prefix="ioprof-memory-")

    def add(self, name: str, data: bytes) -> str:
        """Hold ``data`` in memory under ``name``'s last two parts; returns the link to open."""
        view = self.view
        fd = os.memfd_create(f"ioprof-{os.path.basename(name)}"[:200], os.MFD_CLOEXEC)
        view._fds.append(fd)
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        parent = os.path.basename(os.path.dirname(name.rstrip("/"))) or "items"
        folder = os.path.join(view._links, str(view.files), parent)
        os.makedirs(folder, exist_ok=True)
        link = os.path.join(folder, os.path.basename(name.rstrip("/")) or "item")
        os.symlink(f"/proc/{os.getpid()}/fd/{fd}", link)
        view.files += 1
        view.bytes += len(data)
        return link

    def done(self, dataset: Any, positions: list[int] | None, source: str) -> MemoryView:
        self.view.dataset, self.view.positions, self.view.source = dataset, positions, source
        return self.view

    def fail(self, why: str) -> str:
        self.view.close()
        return why


def read_whole(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def unavailable() -> str:
    """Why nothing can be held in memory files here, or ""."""
    return "" if hasattr(os, "memfd_create") else "this system has no memfd_create (Linux only)"


def shallow(obj: Any) -> Any:
    """A shallow copy: the user's object itself is never changed."""
    import copy

    return copy.copy(obj)


def held(
    obj: Any, names: Sequence[str], depth: int, found: Callable[[Any], T | None]
) -> tuple[tuple[str, ...], T] | None:
    """(the attributes from ``obj`` down to what ``found`` finds, what it found), ``obj`` itself
    first, then the objects it holds under ``names``, level by level down to ``depth``; None where
    nothing there is found (strings and containers are passed over)."""
    hit = found(obj)
    if hit is not None:
        return (), hit
    level: list[tuple[tuple[str, ...], Any]] = [((), obj)]
    for _ in range(depth):
        below: list[tuple[tuple[str, ...], Any]] = []
        for way, outer in level:
            for name in names:
                inner = getattr(outer, name, None)
                if inner is None or isinstance(inner, (str, bytes, list, tuple, dict)):
                    continue
                hit = found(inner)
                if hit is not None:
                    return (*way, name), hit
                below.append(((*way, name), inner))
        level = below
    return None


def wrapped(dataset: Any, way: Sequence[str], copy: Any) -> Any:
    """A copy of ``dataset`` whose objects down ``way`` (the attributes ``held`` found) are shallow
    copies, the last one ``copy``: the user's objects are never changed."""
    if not way:
        return copy
    top = shallow(dataset)
    obj = top
    for name in way[:-1]:
        inner = shallow(getattr(obj, name))
        setattr(obj, name, inner)
        obj = inner
    setattr(obj, way[-1], copy)
    return top


def shuffled(n: int, seed: int, first: int = 4 * MEMORY_SAMPLE_FILES) -> Iterator[int]:
    """0 … n − 1 in a random order, drawn as it is needed: ``first`` of them without shuffling all
    n (a dataset of a million samples), then the rest."""
    rng = random.Random(seed)
    drawn = rng.sample(range(n), min(n, first))
    yield from drawn
    if len(drawn) < n:
        taken = set(drawn)
        rest = [p for p in range(n) if p not in taken]
        rng.shuffle(rest)
        yield from rest
