"""A user's dataset redirected to memory: the same dataset, transforms and collate, reading a
sample of its files from RAM — so that iterating it measures decode and augment alone.

"In the page cache" is not "in memory": a FUSE mount (sshfs, s3fs) drops a file's cached pages
at every open by default, and an NFS client revalidates them, so a loader over such files keeps
reading the storage. Here the sample's bytes are copied into anonymous memory files
(``memfd_create``: RAM, not ``/dev/shm``, whose size Docker caps at 64 MB) and the dataset's
entries for those files are pointed at them through symlinks that keep each file's name
(``<tmp>/<n>/<class>/<name>.jpg`` → ``/proc/<pid>/fd/<fd>``), which worker processes started by
fork, spawn or a fork server can all open.

Only datasets that list their files can be redirected — torchvision's ``ImageFolder`` and
``DatasetFolder`` (``samples``/``imgs``), datasets with a ``files``/``paths``-style list, and a
``Subset`` of one. Anything else gets a reason, never a fall-back to reading the storage.
"""

from __future__ import annotations

import copy
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

from ioprof.observe.userdata import FILE_LIST_ATTRIBUTES, file_list, path_of

MEMORY_SAMPLE_FILES = 64  # enough to vary sizes; over a slow link each one costs a read
MEMORY_SAMPLE_BYTES = 64 * 2**20


@dataclass
class MemoryView:
    """A shallow copy of the dataset whose entries at ``positions`` read from memory."""

    dataset: Any
    positions: list[int]
    files: int
    bytes: int
    _fds: list[int] = field(default_factory=list)
    _links: str = ""

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
        if self._links:
            shutil.rmtree(self._links, ignore_errors=True)


def memory_view(
    dataset: Any,
    *,
    max_files: int = MEMORY_SAMPLE_FILES,
    max_bytes: int = MEMORY_SAMPLE_BYTES,
    seed: int = 0,
) -> MemoryView | str:
    """The dataset with a random sample of its files in memory, or why that cannot be done."""
    if not hasattr(os, "memfd_create"):
        return "this system has no memfd_create (Linux only)"
    inner, outer = dataset, None
    if hasattr(dataset, "indices") and getattr(dataset, "dataset", None) is not None:  # Subset
        inner, outer = dataset.dataset, dataset
    found = file_list(inner)
    if found is None:
        names = ", ".join(FILE_LIST_ATTRIBUTES)
        return f"{type(dataset).__name__} does not list its files ({names}): its reads cannot be redirected"
    attr, items = found
    candidates = list(range(len(outer.indices))) if outer is not None else list(range(len(items)))
    random.Random(seed).shuffle(candidates)
    view = MemoryView(dataset=None, positions=[], files=0, bytes=0)
    view._links = tempfile.mkdtemp(prefix="ioprof-memory-")
    entries = list(items)
    try:
        for pos in candidates:
            index = int(outer.indices[pos]) if outer is not None else pos
            if view.files >= max_files or view.bytes >= max_bytes or index >= len(items):
                break
            entries[index] = _pointed(items[index], _in_memory(path_of(items[index]) or "", view))
            view.positions.append(pos)
    except OSError as e:
        view.close()
        return f"the sample could not be copied into memory ({e.strerror or e})"
    view.dataset = _redirected(inner, outer, attr, entries)
    return view


def _pointed(item: Any, link: str) -> Any:
    """The entry with its path replaced, of the same shape (path, tuple or list)."""
    if isinstance(item, tuple):
        return (link, *item[1:])
    if isinstance(item, list):
        return [link, *item[1:]]
    return link


def _in_memory(path: str, view: MemoryView) -> str:
    """Copy one file into a memory file; returns the symlink that keeps its name."""
    with open(path, "rb") as f:
        data = f.read()
    fd = os.memfd_create(f"ioprof-{os.path.basename(path)}"[:200], os.MFD_CLOEXEC)
    view._fds.append(fd)
    written = 0
    while written < len(data):
        written += os.write(fd, data[written:])
    folder = os.path.join(view._links, str(len(view.positions)), os.path.basename(os.path.dirname(path)))
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, os.path.basename(path))
    os.symlink(f"/proc/{os.getpid()}/fd/{fd}", link)
    view.files += 1
    view.bytes += len(data)
    return link


def _redirected(inner: Any, outer: Any, attr: str, entries: list[Any]) -> Any:
    """A shallow copy of the dataset (and of its Subset) with the new entries; ImageFolder's
    ``imgs`` is the same list as ``samples`` and follows it."""
    original = getattr(inner, attr)
    copied = copy.copy(inner)
    new: Any = tuple(entries) if isinstance(original, tuple) else entries
    for name in FILE_LIST_ATTRIBUTES:
        if getattr(inner, name, None) is original:
            setattr(copied, name, new)
    if outer is None:
        return copied
    wrapper = copy.copy(outer)
    wrapper.dataset = copied
    return wrapper
