"""Reads of an LMDB database made in a process of their own, for ``sources.lmdbfile``: py-lmdb
refuses to open a database a second time in one process (LMDB's locks belong to the process),
and the training process may hold the user's open already. Run as a script
(``python lmdb_reads.py``): a pickled request on stdin, a pickled answer on stdout. It imports
only py-lmdb, numpy and the standard library, never ioprof or torch. The database is opened
read-only, with no lock file and no readahead: nothing of it is written.

Requests (a dict, ``what`` naming it):
- ``records``: the records under ``keys``, in their order, each as (offset of its bytes in the
  data file, their size), read off the memory map (the record's address less the map's start).
  py-lmdb reads a record's pages as it hands it over (and a page of each it steps over with a
  cursor): these records are read once here.
- ``copy``: a database of the records under ``keys`` (those present) and of every record whose
  key is not in ``samples`` (the database's own: its list of keys, its length), as the bytes of
  its file, with the keys found and how many records are no sample's; none where those were not
  found stepping in from both ends of the key order within ``scan_bytes`` (a page a step).
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any


def open_to_read(path: str, folder: bool) -> Any:
    """The database opened as a reader that changes nothing: read-only, no lock file, no readahead."""
    import lmdb

    return lmdb.open(path, subdir=folder, readonly=True, lock=False, readahead=False, max_readers=512)


def _map_offset(address: int, data: str) -> int | None:
    """Where in the file ``data`` the byte at ``address`` of this process lies, from the mapping of
    that file that holds it (``/proc/self/maps``)."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or parts[5].rstrip("\n") != data:
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            if start <= address < end:
                return address - start + int(parts[2], 16)
    return None


def records(path: str, folder: bool, data: str, keys: list[bytes]) -> list[tuple[int, int]]:
    import numpy as np

    env = open_to_read(path, folder)
    try:
        with env.begin(buffers=True) as txn:
            out = []
            for key in keys:
                value = txn.get(key)  # py-lmdb reads the record's pages as it hands it over
                if value is None or not len(value):
                    continue
                offset = _map_offset(int(np.frombuffer(value, np.uint8).ctypes.data), data)
                if offset is not None:
                    out.append((offset, len(value)))
            return out
    finally:
        env.close()


def copy(
    path: str, folder: bool, keys: list[bytes], samples: list[bytes], scan_bytes: int
) -> tuple[bytes | None, list[bytes], int]:
    import lmdb

    env = open_to_read(path, folder)
    chosen: dict[bytes, bytes] = {}
    try:
        stat = env.stat()
        others = int(stat["entries"]) - len(samples)
        with env.begin() as txn:
            for key in keys:
                value = txn.get(key)
                if value is not None:
                    chosen[key] = value
            found = list(chosen)
            if others > 0:
                theirs = set(samples)
                extra = _not_samples(
                    txn, theirs, others, int(stat["entries"]), scan_bytes // int(stat["psize"])
                )
                if extra is None:
                    return None, [], others
                chosen |= {key: txn.get(key) for key in extra}
    finally:
        env.close()
    fd = os.memfd_create("ioprof-lmdb-copy", os.MFD_CLOEXEC)
    try:
        size = 2 * sum(len(k) + len(v) + 4096 for k, v in chosen.items()) + 2**20
        out = lmdb.open(f"/proc/self/fd/{fd}", subdir=False, lock=False, map_size=size)
        with out.begin(write=True) as w:
            for key, value in chosen.items():
                w.put(key, value)
        out.close()
        return os.pread(fd, os.fstat(fd).st_size, 0), found, others
    finally:
        os.close(fd)


def _not_samples(txn: Any, theirs: set[bytes], others: int, entries: int, steps: int) -> list[bytes] | None:
    """The keys of the ``others`` records that are no sample's, stepping in from both ends of the
    key order at once (a database's own records, named apart from its samples' keys, sort before
    or after them), no more than ``steps`` steps (each reads a page of the record it passes); None
    where they were not all found within them."""
    ends = [txn.cursor(), txn.cursor()]
    if not (ends[0].first() and ends[1].last()):
        return None
    found: list[bytes] = []
    for step in range(min(steps, entries)):
        cursor = ends[step % 2]
        key = bytes(cursor.key())
        if key not in theirs and key not in found:
            found.append(key)
            if len(found) == others:
                return found
        if not (cursor.next() if step % 2 == 0 else cursor.prev()):
            break
    return None


def main() -> None:
    request = pickle.load(sys.stdin.buffer)
    where, folder = request["path"], request["folder"]
    if request["what"] == "records":
        answer: Any = records(where, folder, request["data"], request["keys"])
    else:
        answer = copy(where, folder, request["keys"], request["samples"], request["scan_bytes"])
    pickle.dump(answer, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    main()
