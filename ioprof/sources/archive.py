"""Images in tar archives read by member: timm's ``ReaderImageInTar`` (``create_dataset`` with a
``root`` that is a ``.tar`` of images, a folder of tars — one a class —, or a tar of tars), on
an ``ImageDataset``'s ``reader``. Its ``samples`` are the members (``TarInfo``, each with its
offset in the archive), so what it reads is the archives, files of many samples, and how many
samples they hold is known without reading them.

The copy in memory: a random sample of the members, read from the archives (opened afresh: the
reader's own open archives are never touched, its workers inherit them), packed into one tar in
memory, and a copy of the reader whose root is that tar and whose samples are its members; it
opens the tar for each sample (the reader's cache of open archives is off in the copy: one open
archive would be shared by the probe's threads and by the workers forked after them), a cost of
tens of microseconds a sample beside its decode.
"""

from __future__ import annotations

import io
import itertools
import os
import struct
import tarfile
import threading
import zipfile
from contextlib import ExitStack
from typing import Any, BinaryIO

from ioprof.sources import files
from ioprof.sources.memory import (
    MEMORY_SAMPLE_BYTES,
    MEMORY_SAMPLE_FILES,
    MemoryCopies,
    MemoryView,
    held,
    shallow,
    shuffled,
    unavailable,
    wrapped,
)
from ioprof.sources.source import ITEMS_LISTED, MEMBERS_SAMPLED, Source

KIND = "archive"
HOLDER_DEPTH = 2  # timm's ImageDataset → its reader


def reader_of(obj: Any) -> Any | None:
    """A reader whose samples are members of tar archives under its root: (TarInfo, the parent
    archive's name under the root or None, the TarInfo of a tar within it or None)."""
    root, samples = getattr(obj, "root", None), getattr(obj, "samples", None)
    if not isinstance(root, str) or samples is None or not hasattr(obj, "tar_state"):
        return None
    try:
        first = samples[0]
    except (IndexError, KeyError, TypeError):
        return None
    ok = len(first) == 3 and isinstance(first[0], tarfile.TarInfo)
    return obj if ok else None


def archives(reader: Any) -> list[str]:
    """The archive files the reader's samples lie in: its root, or the archives in it the reader
    keeps a state for (one each: read off them, not off a million samples, as the loader starts)."""
    if getattr(reader, "root_is_tar", False):
        return [reader.root]
    return [os.path.join(reader.root, parent) for parent in reader.tar_state]  # a state per archive


def find(dataset: Any) -> Source | None:
    """The tar archives a timm reader's members lie in."""
    found = held(dataset, files.HOLDER_ATTRIBUTES, HOLDER_DEPTH, reader_of)
    if found is None:
        return None
    reader = found[1]
    paths = archives(reader)
    root = os.path.dirname(reader.root) if reader.root_is_tar else reader.root
    count = len(paths) if len(paths) > ITEMS_LISTED else None
    return Source(
        KIND,
        "images in tar archives",
        tuple(paths[:ITEMS_LISTED]),
        root,
        root,
        "filesystem",
        count,
        samples=len(reader.samples),
        members=members(reader),
    )


def members(reader: Any, limit: int = MEMBERS_SAMPLED, seed: int = 0) -> tuple[tuple[str, int, int], ...]:
    """A random sample of the reader's members, in random order, each as (archive file, offset of
    its bytes in that file, size): a member of a tar within a tar lies at the inner tar's offset
    plus its own. Read off the members' headers as the reader indexed them: nothing is read."""
    out = []
    for i in itertools.islice(shuffled(len(reader.samples), seed, first=limit), limit):
        member, parent, child = reader.samples[i]
        path = os.path.join(reader.root, parent) if parent else reader.root
        offset = member.offset_data + (child.offset_data if child is not None else 0)
        out.append((path, int(offset), int(member.size)))
    return tuple(out)


class MemberReads:
    """Members read as their readers read them, each reader thread keeping its own handle on each
    archive (as each worker keeps its own). A tar's as timm's reader reads them: through a
    ``TarFile``'s ``extractfile``, whose file objects read the archive in pieces of their buffer's
    size (8 kB: two reads of the archive for a member of 12 kB, and each a read of the disk where it
    is cold), at the offset its header gave. A zip's (``zipped``) as ``zipfile`` reads one: its
    local header at the offset the central directory gave, its name and extra field, then its
    bytes as stored (a storage read: nothing is decompressed). An LMDB database's record
    (``lmdb``): its bytes at their place, in one read (the dataset faults in the pages of its
    memory map that hold them). A context manager: the archives are closed at its end."""

    def __init__(self, members_in: str = "tar") -> None:
        self._mine = threading.local()
        self._opened: list[tarfile.TarFile | BinaryIO] = []
        self._lock = threading.Lock()
        self._in = members_in
        self._zipped = members_in == "zip"

    def _held(self, path: str) -> Any:
        held: dict[str, Any] = self._mine.__dict__.setdefault("archives", {})
        if path not in held:
            # closed with the rest at the end
            held[path] = open(path, "rb") if self._in != "tar" else tarfile.open(path)  # noqa: SIM115
            with self._lock:
                self._opened.append(held[path])
        return held[path]

    def __call__(self, path: str, offset: int, size: int) -> int:
        try:
            if self._zipped:
                return _zip_member(self._held(path), path, offset, size)
            if self._in == "lmdb":
                return len(os.pread(self._held(path).fileno(), size, offset))
            member = tarfile.TarInfo("member")
            member.offset_data, member.size = offset, size
            extracted = self._held(path).extractfile(member)
            return len(extracted.read()) if extracted is not None else 0
        except tarfile.TarError as e:  # not a tar (any more): unreadable, as a file that fails
            raise OSError(f"{path}: {e}") from e

    def __enter__(self) -> MemberReads:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for tf in opened:
            tf.close()


_ZIP_HEADER = struct.Struct("<4s22xHH")  # a zip member's local header: its signature, name and extra lengths


def _zip_member(f: BinaryIO, path: str, offset: int, size: int) -> int:
    """A zip member's bytes as stored, read as ``zipfile`` reads them from its local header on."""
    f.seek(offset)
    head = f.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise OSError(f"{path}: no zip member at offset {offset}")
    _, name, extra = _ZIP_HEADER.unpack(head)
    f.read(name + extra)
    return len(f.read(size))


ZIP_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".gif")


def zip_members(
    paths: list[str], limit: int = MEMBERS_SAMPLED, seed: int = 0
) -> tuple[int, tuple[tuple[str, int, int], ...]] | None:
    """The image members of zip archives, from their central directories (one read at each one's
    end): how many there are, and a random sample of them in random order, each as (archive,
    offset of its local header, bytes as stored); None where a file is not a zip."""
    found: list[tuple[str, int, int]] = []
    for path in paths:
        if not zipfile.is_zipfile(path):
            return None
        with zipfile.ZipFile(path) as z:
            found += [
                (path, i.header_offset, i.compress_size)
                for i in z.infolist()
                if not i.is_dir() and i.filename.lower().endswith(ZIP_IMAGE_SUFFIXES)
            ]
    picked = tuple(found[i] for i in itertools.islice(shuffled(len(found), seed, first=limit), limit))
    return len(found), picked


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    return copy_in_memory(dataset)


def copy_in_memory(
    dataset: Any, *, max_files: int = MEMORY_SAMPLE_FILES, max_bytes: int = MEMORY_SAMPLE_BYTES, seed: int = 0
) -> MemoryView | str:
    """A copy of the dataset whose reader reads a random sample of its members from one tar in
    memory, or why not."""
    why = unavailable()
    found = held(dataset, files.HOLDER_ATTRIBUTES, HOLDER_DEPTH, reader_of)
    if why or found is None:
        return why or "no tar reader in this dataset"
    way, reader = found
    out = io.BytesIO()
    targets: list[Any] = []
    try:
        with ExitStack() as opened, tarfile.open(fileobj=out, mode="w") as packed:
            held_open: dict[tuple[str, str | None], tarfile.TarFile] = {}
            for i in shuffled(len(reader.samples), seed):
                if len(targets) >= max_files or out.tell() >= max_bytes:
                    break
                member, parent, child = reader.samples[i]
                tf = _archive(reader, opened, held_open, parent, child)
                extracted = tf.extractfile(member)
                if extracted is None:
                    raise tarfile.TarError(f"{member.name} is not a file")
                data = extracted.read()
                packed.addfile(_named(member, len(targets), len(data)), io.BytesIO(data))
                targets.append(reader.targets[i])
    except (OSError, tarfile.TarError) as e:
        return f"its archives could not be read ({e})"
    copies = MemoryCopies()
    link = copies.add(os.path.join(reader.root, "ioprof-sample.tar"), out.getvalue())
    with tarfile.open(link) as tf:
        members = [m for m in tf if m.isfile()]
    copy = shallow(reader)
    # each sample opens the tar afresh: an archive the reader kept open would be shared by the
    # probe's threads, and by workers forked after them, whose reads at one offset interleave
    copy.root, copy.root_is_tar, copy.cache_tarfiles = link, True, False
    state = reader.tar_state if reader.root_is_tar else next(iter(reader.tar_state.values()))
    copy.tar_state = type(state)()  # a state of its own, of timm's kind
    copy.samples = _like(reader.samples, [(m, None, None) for m in members])
    copy.targets = _like(reader.targets, targets)
    source = f"{len(members)} of your archives' images, packed into one tar"
    view = copies.done(wrapped(dataset, way, copy), list(range(len(members))), source)
    view.files = len(members)  # samples, each with its member's header: what a sample takes in a tar
    return view


def _archive(
    reader: Any,
    opened: ExitStack,
    held_open: dict[tuple[str, str | None], tarfile.TarFile],
    parent: str | None,
    child: tarfile.TarInfo | None,
) -> tarfile.TarFile:
    """The archive a member lies in, opened here once (a tar within a tar opened within it)."""
    path = os.path.join(reader.root, parent) if parent else reader.root
    if (path, None) not in held_open:
        held_open[(path, None)] = opened.enter_context(tarfile.open(path))  # noqa: SIM115  (closed by the stack)
    if child is None:
        return held_open[(path, None)]
    if (path, child.name) not in held_open:
        inner = held_open[(path, None)].extractfile(child)
        if inner is None:
            raise tarfile.TarError(f"{child.name} is not a file")
        held_open[(path, child.name)] = opened.enter_context(tarfile.open(fileobj=inner))  # noqa: SIM115
    return held_open[(path, child.name)]


def _named(member: tarfile.TarInfo, k: int, size: int) -> tarfile.TarInfo:
    """The member's name, kept (its class folder and file name), made unique by its place."""
    head, tail = os.path.split(member.name)
    info = tarfile.TarInfo(os.path.join(head, f"{k:05d}-{tail}"))
    info.size, info.mtime, info.mode = size, member.mtime, member.mode
    return info


def _like(original: Any, items: list[Any]) -> Any:
    """``items`` as the container ``original`` is (timm keeps numpy arrays: its samples a row of
    three each)."""
    if type(original).__module__ == "numpy":
        import numpy as np

        return np.asarray(items, dtype=original.dtype)
    return type(original)(items) if isinstance(original, (list, tuple)) else items
