"""Reads of an LMDB database made in a process of their own, for ``sources.lmdbfile``: py-lmdb
refuses to open a database a second time in one process (LMDB's locks belong to the process),
and the training process may hold the user's open already. Run as a script
(``python lmdb_reads.py``): a pickled request on stdin, a pickled answer on stdout. It imports
only py-lmdb, numpy and the standard library, never ioprof or torch. The database is opened
read-only, with no lock file and no readahead: nothing of it is written.

Requests (a dict, ``what`` naming it):
- ``records``: a random sample of ``limit`` records, in random order, each as (offset of its
  bytes in the data file, their size), read off the memory map (the record's address less the
  map's start), not from the record itself — its keys listed once (the leaf pages only).
- ``copy``: a database of the records under ``keys`` (those present) and of every record whose
  key is not in ``samples`` (the database's own: its list of keys, its length), as the bytes of
  its file; with the keys found.
"""

from __future__ import annotations

import os
import pickle
import random
import sys
from typing import Any


def _open(path: str, folder: bool) -> Any:
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


def records(path: str, folder: bool, data: str, limit: int, seed: int) -> list[tuple[int, int]]:
    import numpy as np

    env = _open(path, folder)
    try:
        with env.begin(buffers=True) as txn:
            rng = random.Random(seed)
            keys: list[bytes] = []
            for n, key in enumerate(txn.cursor().iternext(keys=True, values=False)):
                if len(keys) < limit:
                    keys.append(bytes(key))
                elif (k := rng.randrange(n + 1)) < limit:
                    keys[k] = bytes(key)
            rng.shuffle(keys)
            out = []
            for key in keys:
                value = txn.get(key)
                if value is None or not len(value):
                    continue
                offset = _map_offset(int(np.frombuffer(value, np.uint8).ctypes.data), data)
                if offset is not None:
                    out.append((offset, len(value)))
            return out
    finally:
        env.close()


def copy(path: str, folder: bool, keys: list[bytes], samples: list[bytes]) -> tuple[bytes, list[bytes]]:
    import lmdb

    env = _open(path, folder)
    chosen: dict[bytes, bytes] = {}
    try:
        with env.begin() as txn:
            for key in keys:
                value = txn.get(key)
                if value is not None:
                    chosen[key] = value
            found = list(chosen)
            if int(env.stat()["entries"]) > len(samples):  # records that are no sample's
                theirs = set(samples)
                for key, value in txn.cursor():
                    if key not in theirs:
                        chosen[key] = value
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
        return os.pread(fd, os.fstat(fd).st_size, 0), found
    finally:
        os.close(fd)


def main() -> None:
    request = pickle.load(sys.stdin.buffer)
    where, folder = request["path"], request["folder"]
    if request["what"] == "records":
        answer: Any = records(where, folder, request["data"], request["limit"], request["seed"])
    else:
        answer = copy(where, folder, request["keys"], request["samples"])
    pickle.dump(answer, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    main()
