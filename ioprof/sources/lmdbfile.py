"""An LMDB database (``lmdb``, py-lmdb): a dataset that keeps its samples as records of one
database file — ``data.mdb`` in a folder, or a file of its own (``subdir=False``) — and reads
each through the file's memory map (``txn.get``). Such a dataset is known by what it holds: an
``lmdb.Environment``, or the path of a database (a folder or file whose first page carries
LMDB's magic number), on itself or on a dataset it wraps. Many open the database lazily, in each
worker, from that path.

What it reads: the database file (what a sample takes: its bytes over the dataset's samples, as
the file states them without a read of its records).
Read alone: the records of a random sample of its positions, where the dataset holds its keys
by position (a list of as many keys as it has samples), each read at its place in the file, in a
random order, as a random sampler asks for them. Where each lies is read off the database's
memory map in a process of its own (``lmdb_reads``: py-lmdb opens a database once a process, and
the training process may hold the user's open); py-lmdb reads a record's pages as it hands it
over, so those records are read once there before they are evicted and read cold. Without its
keys by position nothing is read alone: its records could be listed only by stepping over every
one with a cursor, which reads a page of each.

In memory: where the database is small, the whole file; otherwise, where it holds its keys by
position, the records of a random sample of positions with every record that is no sample's (its
list of keys, its length, which it may read as it opens: found stepping in from both ends of the
key order, where they sort apart from the samples' keys, within what a copy holds, each step
reading a page) — written as a database of their own in a memory file
(``lmdb_reads``). The copy of the dataset reads that database: its path (and any environment it
holds) is the copy's; the user's database is opened read-only and never written.
"""

from __future__ import annotations

import itertools
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from ioprof.sources.lmdb_reads import open_to_read
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
from ioprof.sources.source import MEMBERS_SAMPLED, Source

KIND = "lmdb"
# where a loader's dataset holds the dataset that opens the database (itself, first)
HOLDER_ATTRIBUTES = ("dataset", "data", "base", "data_source", "reader")
HOLDER_DEPTH = 2
_MAGIC = 0xBEEFC0DE  # a meta page's mm_magic, after the 16-byte page header of a 64-bit build
_META = struct.Struct("<16xI")


def _lmdb() -> Any:
    """py-lmdb, where the user's code imported it (a dataset that reads LMDB has): never imported here."""
    return sys.modules.get("lmdb")


def database_of(path: Any) -> tuple[str, str, bool] | None:
    """(the database's path as given, its data file, whether it is a folder) where ``path`` names
    an LMDB database; None otherwise. One read of the file's first bytes."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    p = os.fspath(path)
    if not isinstance(p, str) or not p or len(p) > 4096:
        return None
    folder = os.path.isdir(p)
    data = os.path.join(p, "data.mdb") if folder else p
    try:
        with open(data, "rb") as f:
            head = f.read(_META.size)
    except OSError:
        return None
    if len(head) < _META.size or _META.unpack(head)[0] != _MAGIC:
        return None
    return p, os.path.realpath(data), folder


def _opened_by(obj: Any) -> tuple[Any, str, str, bool] | None:
    """(the object, and the database it holds: an open ``lmdb.Environment``, or a path to one,
    among its own attributes)."""
    lmdb = _lmdb()
    fields = getattr(obj, "__dict__", None)
    if lmdb is None or not isinstance(fields, dict):
        return None
    for value in fields.values():
        if isinstance(value, lmdb.Environment):
            try:
                found = database_of(value.path())
            except lmdb.Error:  # closed
                continue
        else:
            found = database_of(value)
        if found is not None:
            return (obj, *found)
    return None


def find(dataset: Any) -> Source | None:
    """The database file an LMDB dataset reads, and the bytes its records take."""
    found = held(dataset, HOLDER_ATTRIBUTES, HOLDER_DEPTH, _opened_by)
    if found is None:
        return None
    _, (holder, path, data, folder) = found
    try:
        samples = len(holder)
    except TypeError:
        samples = None
    root = os.path.dirname(data) if folder else data  # the database, as a zip held open is its file
    try:
        size = os.path.getsize(data)
    except OSError:
        return None
    keys = _keys_by_position(holder)
    drawn = itertools.islice(shuffled(len(keys), 0, MEMBERS_SAMPLED), MEMBERS_SAMPLED) if keys else ()
    return Source(
        KIND,
        "records of an LMDB database",
        (data,),
        root,
        path,
        "filesystem",
        samples=samples,
        item_bytes=size,
        members_in="lmdb",
        keys=tuple(_key(keys[i]) for i in drawn) if keys else (),
    )


def _ask(request: dict[str, Any]) -> Any:
    """What ``lmdb_reads`` answers, in a process of its own."""
    done = subprocess.run(
        [sys.executable, os.path.join(os.path.dirname(__file__), "lmdb_reads.py")],
        input=pickle.dumps(request),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise OSError(f"reading the LMDB database failed: {last}")
    return pickle.loads(done.stdout)


def members(source: Source, limit: int) -> tuple[tuple[str, int, int], ...]:
    """The records of the first ``limit`` of the source's sampled keys, in their random order, each
    as (its data file, the offset of its bytes there, their size). Where each lies is read off the
    database's memory map: py-lmdb reads a record's pages as it hands it over, so these records are
    read once here, before the storage read evicts them and reads them cold. Without the keys of
    its samples, its records could be listed only by reading a page of each."""
    if not source.keys:
        raise OSError(
            "the dataset holds no list of its LMDB keys by position, and the database's records could be "
            "listed only by reading a page of every one of them"
        )
    data = source.items[0]
    found = _ask(
        {"what": "records", "path": source.where, "folder": os.path.isdir(source.where), "data": data}
        | {"keys": list(source.keys[:limit])}
    )
    return tuple((data, int(offset), int(size)) for offset, size in found)


def _key(k: bytes | str) -> bytes:
    return k.encode() if isinstance(k, str) else bytes(k)


def _keys_by_position(holder: Any) -> list[Any] | tuple[Any, ...] | None:
    """The list of keys a dataset holds by position: as many as its samples, each a key (bytes, or
    a string of them), as it holds it (a million keys are not copied as its loader starts)."""
    try:
        n = len(holder)
    except TypeError:
        return None
    for value in getattr(holder, "__dict__", {}).values():
        if (
            isinstance(value, (list, tuple))
            and len(value) == n
            and n
            and all(isinstance(k, (bytes, str)) for k in (value[0], value[-1]))
        ):
            return value
    return None


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    why = unavailable()
    if why:
        return why
    found = held(dataset, HOLDER_ATTRIBUTES, HOLDER_DEPTH, _opened_by)
    if found is None:
        return "its LMDB database is no longer held by the dataset: no copy of it can be made"
    way, (holder, path, data, folder) = found
    try:
        size = os.path.getsize(data)
        if size <= MEMORY_SAMPLE_BYTES:
            with open(data, "rb") as f:
                copied, positions = f.read(), list(range(len(holder)))
            what = "your LMDB database whole"
        else:
            picked = _records(path, folder, holder, size)
            if isinstance(picked, str):
                return picked
            copied, positions = picked
            what = f"{len(positions)} of your LMDB records"
    except OSError as e:
        return f"its LMDB database could not be copied into memory ({e})"
    copies = MemoryCopies()
    link = copies.add(data, copied)
    copy_path = os.path.dirname(link) if folder else link
    view = copies.done(wrapped(dataset, way, _reading(holder, path, copy_path, folder)), positions, what)
    view.files = len(positions)  # samples, for the report's "n of your …" and a sample's bytes
    return view


def _records(path: str, folder: bool, holder: Any, size: int) -> tuple[bytes, list[int]] | str:
    """A database of the records of a random sample of the dataset's positions (up to what a copy
    in memory holds, by their mean size) and of every record that is no sample's, as the bytes of
    its file, and those positions."""
    keys = _keys_by_position(holder)
    if keys is None:
        return (
            "it holds no list of its LMDB keys by position, and its database is larger than a copy "
            "in memory holds: which record a sample reads is not known"
        )
    per_sample = size / len(keys)
    want = max(1, min(MEMORY_SAMPLE_FILES, int(MEMORY_SAMPLE_BYTES // max(per_sample, 1.0))))
    drawn = list(itertools.islice(shuffled(len(keys), 0), want))
    copied, found, others = _ask(
        {"what": "copy", "path": path, "folder": folder, "keys": [_key(keys[i]) for i in drawn]}
        | {"samples": [_key(k) for k in keys], "scan_bytes": MEMORY_SAMPLE_BYTES}
    )
    if copied is None:
        return (
            f"its database holds {others:,} record(s) that are no sample's (its own: a list of keys, a length, "
            "which it may read as it opens), not found at either end of its keys within what a copy in "
            "memory reads (each step over a record reads a page of it): no copy of its records is made"
        )
    present = set(found)
    positions = [i for i in drawn if _key(keys[i]) in present]
    if not positions:
        return "none of the keys it holds by position is in its LMDB database: no copy of its records"
    return copied, positions


def _reading(holder: Any, path: str, copy_path: str, folder: bool) -> Any:
    """A shallow copy of the dataset that opens the database: what named the user's database
    names the copy, an environment open on it is one open on the copy (its transactions too)."""
    lmdb = _lmdb()
    copy = shallow(holder)
    env = None
    user = database_of(path)
    for name, value in list(vars(copy).items()):
        if isinstance(value, lmdb.Environment):
            env = env or open_to_read(copy_path, folder)
            setattr(copy, name, env)
        elif isinstance(value, (lmdb.Transaction, lmdb.Cursor)):
            env = env or open_to_read(copy_path, folder)
            txn = env.begin()
            setattr(copy, name, txn if isinstance(value, lmdb.Transaction) else txn.cursor())
        elif (named := database_of(value)) is not None and user is not None and named[1] == user[1]:
            setattr(copy, name, Path(copy_path) if isinstance(value, os.PathLike) else copy_path)
    return copy
