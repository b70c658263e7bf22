"""An in-memory sample of a dataset: what decode ceilings and emulated storage read.

A decode ceiling must be measured on bytes that are really in memory. The page cache cannot be
trusted to hold them — a FUSE mount drops its pages at every open, a dataset larger than RAM is
evicted before it is read again — so a shuffled sample of the files is read once into this
process (forked loader workers share it; spawned ones get a copy) and decoded from there.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice

from ioprof.core.errors import IoprofError
from ioprof.datasets import shards
from ioprof.datasets.discover import ImageList
from ioprof.host.pagecache import FilesystemInfo
from ioprof.measure.storage import STORAGE_LOST_ERRNOS, check_storage, read_file

# The sample: at most this many files and bytes (enough distinct images for a steady decode rate,
# little enough to read once even from slow network storage).
SAMPLE_MAX_FILES = 256
SAMPLE_MAX_BYTES = 48 * 10**6
# Files read at once for the copy where each read waits on a network (an object store, NFS, a FUSE
# daemon's server): a copy, not a measurement, so its reads may overlap their latency. A local disk
# is read one file at a time, as before.
SAMPLE_READERS = 8


@dataclass(frozen=True)
class MemorySample:
    """Files of a dataset held in memory, with their labels."""

    paths: tuple[str, ...]
    labels: tuple[int, ...]
    blobs: tuple[bytes, ...]
    read_s: float  # how long reading them took (from wherever they were)
    kept: int = 0  # of them, files (samples) whose bytes the storage ceilings had read already

    @property
    def bytes(self) -> int:
        return sum(len(b) for b in self.blobs)

    @property
    def files(self) -> int:
        return len(self.blobs)


def _read_or_error(path: str) -> bytes | OSError:
    try:
        return read_file(path)
    except OSError as e:  # a file that cannot be read is skipped; the caller asks whether storage went
        return e


def load_sample(
    images: ImageList,
    fs: FilesystemInfo,
    *,
    seed: int,
    max_files: int = SAMPLE_MAX_FILES,
    max_bytes: int = SAMPLE_MAX_BYTES,
    kept: Mapping[str, bytes] | None = None,
) -> MemorySample:
    """Read a shuffled sample of ``images`` into memory (files that cannot be read are skipped;
    tar shards: the first samples of shuffled shards, their images). ``kept``: files already read
    whole (by the storage ceilings, in their own shuffled order), taken first and not read again;
    of shards, their first bytes as read (``shards.first_samples``)."""
    if images.layout == "shards":
        first = shards.first_samples(
            list(images.paths), max_samples=max_files, max_bytes=max_bytes, seed=seed, kept=kept
        )
        folded = tuple(lb % shards.SHARD_CLASSES if lb >= 0 else 0 for lb in first.labels)
        return MemorySample(first.keys, folded, first.images, first.read_s, first.kept)
    order = list(range(len(images.paths)))
    random.Random(seed).shuffle(order)
    paths: list[str] = []
    labels: list[int] = []
    blobs: list[bytes] = []
    total = 0
    position = {p: i for i, p in enumerate(images.paths)} if kept else {}
    for path, data in (kept or {}).items():
        if len(blobs) >= max_files or total >= max_bytes:
            break
        if path in position:
            paths.append(path)
            labels.append(images.labels[position[path]])
            blobs.append(data)
            total += len(data)
    taken = set(paths)
    todo = (i for i in order if images.paths[i] not in taken)
    readers = SAMPLE_READERS if fs.network else 1
    t0 = time.perf_counter()
    with ThreadPoolExecutor(readers) as pool:
        while len(blobs) < max_files and total < max_bytes:
            # a round of reads in flight at once, taken in the shuffled order whatever finishes first
            round_ = list(islice(todo, min(readers, max_files - len(blobs))))
            if not round_:
                break
            for i, got in zip(
                round_, pool.map(_read_or_error, [images.paths[i] for i in round_]), strict=True
            ):
                if isinstance(got, OSError):
                    if got.errno in STORAGE_LOST_ERRNOS:
                        check_storage(images.root, fs, got)
                    continue
                if len(blobs) >= max_files or total >= max_bytes:
                    break
                paths.append(images.paths[i])
                labels.append(images.labels[i])
                blobs.append(got)
                total += len(got)
    if not blobs:
        raise IoprofError(f"{images.root}: none of its image files could be read; check their permissions")
    return MemorySample(tuple(paths), tuple(labels), tuple(blobs), time.perf_counter() - t0, len(taken))
