"""Hugging Face streaming datasets: a ``datasets.IterableDataset`` (``load_dataset(…,
streaming=True)``) reads its data files as it iterates. Its builder named them when it was made:
the innermost examples iterable of its chain (under ``map``, ``shuffle``, ``with_format``…,
``ex_iterable``; ``ex_iterables`` where datasets were interleaved or concatenated) holds them in
its ``kwargs`` (``files``, ``base_files``) — the Parquet, Arrow, JSON or CSV files of a packaged builder, each a file
of many rows, or for a folder of images (``imagefolder``) the images themselves, one a sample.
Those are what it reads: local paths (the filesystem counts them) or ``http(s)``/``s3`` URLs (the
network does); a URL no reader of ioprof opens (``hf://``) leaves it unknown.

No copy in memory is made: a streaming pipeline is built by its builder from those files, not from
a list ioprof could point elsewhere, so its decode is not measured alone (said in the report).
Local Parquet files say how many rows they hold in their footers: counted (after the window, not
as the loader starts), they give the bytes a sample takes, and so the storage read alone its rate
in samples.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ioprof.sources import arrow
from ioprof.sources.memory import MemoryView, held
from ioprof.sources.shards import NETWORK_SCHEMES, local_path, scheme, url_source
from ioprof.sources.shards import is_hugging_face_streaming as is_streaming
from ioprof.sources.source import ITEMS_LISTED, Source, spread

KIND = "streamed"
CHAIN_DEPTH = 64  # examples iterables wrapped one in another: map, filter, shuffle, formatting…
# where a builder's generator names its files: Parquet's and the folders' ``files``, the JSON and
# CSV builders' ``base_files`` (the local or downloaded paths they read)
FILE_KEYS = ("files", "base_files")
FOOTERS_READ = 256  # Parquet files whose rows are counted from their footers, at most
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")


def data_files(ds: Any) -> list[str]:
    """The files the examples iterables under ``ds`` were built from, in order (one path each)."""
    out: list[str] = []
    stack, seen = [ds._ex_iterable], 0
    while stack and seen < CHAIN_DEPTH:
        node = stack.pop()
        seen += 1
        kwargs = getattr(node, "kwargs", None)
        listed = (
            next((kwargs[k] for k in FILE_KEYS if k in kwargs), None) if isinstance(kwargs, dict) else None
        )
        if isinstance(listed, (list, tuple)):
            # a packaged builder's paths, or a folder builder's (path, archive, original) per file
            out.extend(path for path in map(_path_of, listed) if path is not None)
            continue
        below = getattr(node, "ex_iterables", None)
        below = below if isinstance(below, list) else [getattr(node, "ex_iterable", None)]
        stack.extend(inner for inner in reversed(below) if inner is not None)
    return out


def _path_of(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, tuple) and item and isinstance(item[0], str):
        return item[0]
    return None


def find(dataset: Any) -> Source | None:
    """The data files a Hugging Face streaming dataset reads, where they are local or URLs ioprof
    reads (``http(s)``, ``s3``)."""
    found = held(
        dataset, arrow.HOLDER_ATTRIBUTES, arrow.HOLDER_DEPTH, lambda o: o if is_streaming(o) else None
    )
    if found is None:
        return None
    listed = data_files(found[1])
    if not listed or not {scheme(u) for u in listed} <= {"file", *NETWORK_SCHEMES}:
        return None
    images = all(u.lower().endswith(IMAGE_SUFFIXES) for u in listed)
    label = f"{'image' if images else 'data'} files of a Hugging Face streaming dataset"
    source = url_source(KIND, label, listed)
    if source.root:  # spread over the dataset, not its first folders only
        source = replace(
            source, items=tuple(local_path(listed[i]) for i in spread(len(listed), ITEMS_LISTED))
        )
    return replace(source, file_a_sample=images)


def rows(source: Source) -> int | None:
    """The rows of local Parquet files, from their footers (a read of a few kB each, a round trip
    or more on a network filesystem: asked only once the window is over, ``sources.samples_of``),
    where there are few enough to read them all; None otherwise."""
    items = source.items
    if source.file_a_sample:
        return None
    if not source.root or len(items) > FOOTERS_READ or not all(u.endswith(".parquet") for u in items):
        return None
    try:
        import pyarrow.parquet as pq

        return sum(pq.read_metadata(path).num_rows for path in items)
    except Exception:  # not Parquet after all, or unreadable: not counted
        return None


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    return (
        "a Hugging Face streaming dataset is built by its builder from its data files: "
        "no copy of it can be made to read them from memory"
    )
