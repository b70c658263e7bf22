"""MosaicML Streaming (``streaming.StreamingDataset``; its fork ``streaming-community`` alike): a
dataset of shards (MDS, JSON, CSV…) listed in each stream's ``index.json``. As its workers first
need a shard, it downloads it whole from its stream's ``remote`` (a folder, ``s3://``, ``gs://``…)
into the stream's ``local`` cache, then reads it a sample at a time from there.
What it reads, then, is its remote's shard files — or the cache's, where the cache holds every
shard as its loader starts (nothing is downloaded), or a stream has no remote. Every worker reads
from every shard: it deals samples, not shards, out among the workers (its ``num_shards`` counts
no shards dealt out: ``shards.shard_count``). The index says what a shard holds and weighs, so the
bytes a sample takes are known without a read.

In memory: the first samples of a few MDS shards, each written as a shard of its own (its table
of offsets cut to them), read from the cache where a shard is there, else from its remote; and a
copy of the dataset whose readers of those shards read the copies, and whose record of when each
shard was last read is its own. The user's dataset, its shared memory and its cache are never
changed. The copy is drawn from by position, as the dataset's own ``__iter__`` draws its samples
(``self[sample_id]``): the user's ``__getitem__`` and transforms run as they do in the loader.
"""

from __future__ import annotations

import os
import random
import struct
from dataclasses import replace
from typing import IO, Any

from ioprof.sources.memory import MEMORY_SAMPLE_BYTES, MemoryCopies, MemoryView, held, shallow, unavailable
from ioprof.sources.shards import MEMORY_SAMPLES, MEMORY_SHARDS, NETWORK_SCHEMES, opened, scheme, url_source
from ioprof.sources.source import Source

KIND = "mds"
# where a loader's dataset holds the StreamingDataset (itself, first)
HOLDER_ATTRIBUTES = ("dataset", "ds", "data", "base")
HOLDER_DEPTH = 2
_U32 = struct.Struct("<I")


def is_streaming_dataset(obj: Any) -> bool:
    """A MosaicML ``StreamingDataset`` or a subclass of it (told by its classes: ``streaming`` may
    not be installed)."""
    named = any(
        c.__name__ == "StreamingDataset" and c.__module__.startswith("streaming.") for c in type(obj).__mro__
    )
    return named and isinstance(getattr(obj, "shards", None), list) and hasattr(obj, "streams")


def _stream_of(ds: Any, shard: int) -> Any:
    return ds.streams[int(ds.stream_per_shard[shard])]


def _file_of(reader: Any) -> tuple[str, int]:
    """(basename, bytes) of the file a shard's stream downloads: its compressed form, where it has one."""
    data = reader.zip_data if getattr(reader, "compression", None) and reader.zip_data else reader.raw_data
    return data.basename, int(data.bytes)


def _in_cache(reader: Any) -> str:
    """The shard's file in its stream's local cache."""
    return os.path.join(reader.dirname, reader.split or "", reader.raw_data.basename)


def _remote_of(ds: Any, shard: int) -> str:
    """Where the shard's bytes come from: its stream's remote, or the cache where it has none."""
    reader = ds.shards[shard]
    stream = _stream_of(ds, shard)
    basename, _ = _file_of(reader)
    if not stream.remote or os.path.abspath(str(stream.remote)) == os.path.abspath(str(stream.local)):
        return _in_cache(reader)
    base = str(stream.remote)
    base = base if scheme(base) != "file" else os.path.abspath(base)
    return os.path.join(base, stream.split or "", basename)


def find(dataset: Any) -> Source | None:
    """The shard files a MosaicML Streaming dataset reads: its remotes', where they are local or
    URLs ioprof reads alone (``s3``; not ``gs``, ``oci``…); its cache's, where every shard is in it
    already."""
    found = held(dataset, HOLDER_ATTRIBUTES, HOLDER_DEPTH, lambda o: o if is_streaming_dataset(o) else None)
    if found is None:
        return None
    ds = found[1]
    readers = ds.shards
    if not readers:
        return None
    cached = [_in_cache(r) for r in readers]
    if all(os.path.isfile(path) for path in cached):  # nothing to download: the cache is read
        listed = cached
        sizes = [int(r.raw_data.bytes) for r in readers]  # as the index sizes them: no stat again
    else:
        listed = [_remote_of(ds, k) for k in range(len(readers))]
        sizes = [_file_of(r)[1] for r in readers]
    if not {scheme(u) for u in listed} <= {"file", *NETWORK_SCHEMES}:
        return None
    source = url_source(KIND, "shards of a MosaicML Streaming dataset", listed)
    return replace(source, samples=int(ds.num_samples), item_bytes=sum(sizes))


def _first_samples(stream: IO[bytes], samples: int, limit_bytes: int) -> tuple[bytes, int]:
    """The first ``samples`` samples of an MDS shard (no more than ``limit_bytes`` of them, one at
    least), written as an MDS shard of their own: its count and its table of offsets cut to them,
    moved by what was cut, then what follows the table (the shard's own description, then the
    samples) as it was, up to their end."""
    n = _U32.unpack(_read(stream, 4))[0]
    table = 4 * (n + 2)  # the count, and n + 1 offsets
    offsets = struct.unpack(f"<{n + 1}I", _read(stream, table - 4))
    m = max(1, min(n, samples))
    while m > 1 and offsets[m] - offsets[0] > limit_bytes:
        m -= 1
    rest = _read(stream, offsets[m] - table)
    shift = 4 * (n - m)
    return struct.pack(f"<{m + 2}I", m, *(o - shift for o in offsets[: m + 1])) + rest, m


def _read(stream: IO[bytes], size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = stream.read(size - len(out))
        if not chunk:
            raise OSError(f"an MDS shard ended {size - len(out)} bytes short of what its header says")
        out += chunk
    return bytes(out)


class ByPosition:
    """A copy of a StreamingDataset read by position (a map-style dataset for the probe's sampler;
    the StreamingDataset itself is an IterableDataset, to which a DataLoader gives no sampler)."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __getitem__(self, index: int) -> Any:
        return self.dataset[index]

    def __len__(self) -> int:
        return len(self.dataset)


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    why = unavailable()
    if why or not is_streaming_dataset(dataset):
        return why or (
            "its StreamingDataset is held inside another dataset, whose positions are not its own: "
            "no copy of it is read from memory"
        )
    import numpy as np

    ds = dataset
    readable = [k for k, r in enumerate(ds.shards) if type(r).__name__ == "MDSReader" and r.samples]
    if not readable:
        return "its shards are not MDS shards: no copy of them can be made in memory"
    random.Random(0).shuffle(readable)
    starts = np.cumsum([0] + [int(r.samples) for r in ds.shards])
    copies = MemoryCopies()
    readers = list(ds.shards)
    positions: list[int] = []
    taken = 0
    try:
        for k in readable[:MEMORY_SHARDS]:
            reader = ds.shards[k]
            cached = _in_cache(reader)
            if os.path.isfile(cached):
                origin = cached
            elif getattr(reader, "compression", None):
                continue  # a compressed shard not yet in the cache: not decompressed here
            else:
                origin = _remote_of(ds, k)
            shards_left = min(MEMORY_SHARDS, len(readable)) - taken
            want = max(1, (MEMORY_SAMPLES - len(positions)) // max(1, shards_left))
            with opened(origin) as stream:
                data, m = _first_samples(stream, want, MEMORY_SAMPLE_BYTES // MEMORY_SHARDS)
            link = copies.add(os.path.join(reader.split or "items", reader.raw_data.basename), data)
            copy = shallow(reader)
            copy.dirname, copy.split = (
                os.path.dirname(os.path.dirname(link)),
                os.path.basename(os.path.dirname(link)),
            )
            readers[k] = copy
            positions.extend(range(int(starts[k]), int(starts[k]) + m))
            taken += 1
    except (OSError, struct.error) as e:
        return copies.fail(f"its shards could not be copied into memory ({e})")
    if not positions:
        return copies.fail("none of its shards could be copied into memory (compressed and not in its cache)")
    copy = shallow(ds)
    copy.shards = readers
    # when each shard was last read: its own, not the dataset's shared memory (its cache's eviction)
    copy._shard_access_times = np.zeros(len(readers), np.int64)
    view = copies.done(
        ByPosition(copy), positions, f"the first {len(positions)} samples of {taken} of your shards"
    )
    view.files = len(positions)  # samples, for the report's "n of your …"
    return view
