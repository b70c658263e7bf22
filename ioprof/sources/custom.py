"""A dataset that names what it reads itself: two optional methods, the protocol for datasets
none of the other sources knows (members of one archive, a database, a custom format).

.. code-block:: python

    class MyDataset(torch.utils.data.Dataset):
        def ioprof_source(self) -> dict:
            # what this dataset reads: files on a filesystem, or URLs (http(s)://, pipe:)
            return {"files": self.archive_paths}          # or {"urls": [...]}

        def ioprof_in_memory(self, local: dict[str, str]) -> "MyDataset":
            # a copy of this dataset that reads local[x] instead of x (only those); any length
            copy = MyDataset.__new__(MyDataset)
            copy.__dict__.update(self.__dict__, archive_paths=[local[p] for p in self.archive_paths if p in local])
            return copy

``ioprof_source`` alone gives the storage read alone and the bytes drawn; ``ioprof_in_memory``
adds the decode ceiling (the copy is iterated at random over its whole length).
"""

from __future__ import annotations

import random
from typing import Any

from ioprof.sources import files, shards
from ioprof.sources.memory import (
    MEMORY_SAMPLE_BYTES,
    MEMORY_SAMPLE_FILES,
    MemoryCopies,
    MemoryView,
    read_whole,
    unavailable,
)
from ioprof.sources.source import ITEMS_LISTED, Source

SOURCE_METHOD = "ioprof_source"
IN_MEMORY_METHOD = "ioprof_in_memory"


def declared(dataset: Any) -> dict[str, Any] | None:
    """What the dataset says it reads (``{"files": […]}`` or ``{"urls": […]}``), or None."""
    method = getattr(dataset, SOURCE_METHOD, None)
    if not callable(method):
        return None
    said = method()
    if not isinstance(said, dict):
        return None
    for key in ("files", "urls"):
        items = said.get(key)
        if isinstance(items, (list, tuple)) and items and all(isinstance(i, str) for i in items):
            return {key: list(items), **{k: v for k, v in said.items() if k != key}}
    return None


KIND = "custom"


def find(dataset: Any) -> Source | None:
    """The files or URLs the dataset names through ``ioprof_source()``."""
    said = declared(dataset)
    if said is None:
        return None
    if "files" in said:
        paths = said["files"]
        root = files.common_root(paths)
        return Source(
            KIND, "the files your dataset names", tuple(paths[:ITEMS_LISTED]), root, root, "filesystem"
        )
    return shards.url_source(KIND, "the URLs your dataset names", said["urls"])


def read_item(source: Source, item: str) -> bytes:
    """One item's bytes, read as the pipeline would get them."""
    if source.root:
        return read_whole(item)
    with shards.opened(item) as stream:
        return stream.read()


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    return copy_in_memory(dataset, lambda item: read_item(source, item))


def copy_in_memory(
    dataset: Any, read: Any, *, max_files: int = MEMORY_SAMPLE_FILES, max_bytes: int = MEMORY_SAMPLE_BYTES
) -> MemoryView | str:
    """The dataset's own copy reading a sample of its items from memory, or why not. ``read``
    gives an item's bytes (a file's, a URL's)."""
    why = unavailable()
    said = declared(dataset)
    method = getattr(dataset, IN_MEMORY_METHOD, None)
    if why or said is None:
        return why or f"{type(dataset).__name__}.{SOURCE_METHOD}() named nothing to read"
    if not callable(method):
        return f"{type(dataset).__name__} has no {IN_MEMORY_METHOD}(local) to read a copy from memory"
    items = list(said.get("files") or said.get("urls") or [])
    random.Random(0).shuffle(items)
    copies = MemoryCopies()
    local: dict[str, str] = {}
    try:
        for item in items:
            if copies.view.files >= max_files or copies.view.bytes >= max_bytes:
                break
            local[item] = copies.add(item, read(item))
    except OSError as e:
        return copies.fail(f"its items could not be copied into memory ({e.strerror or e})")
    copy = method(dict(local))
    try:
        positions: list[int] | None = list(range(len(copy)))
    except TypeError:
        positions = None  # an iterable copy
    return copies.done(copy, positions, f"{len(local)} of the items it names")
