"""Hugging Face ``datasets``: a ``datasets.Dataset`` reads its rows from Arrow files it
memory-maps (``cache_files``: what ``load_dataset``, ``load_from_disk`` or ``save_to_disk`` left),
so its bytes come in as page faults, not ``read()`` calls — the mount's or the block device's
counters count them, a process's ``rchar`` does not.

Found as the loader's dataset itself or one level down, on the object that wraps it (``dataset``,
``ds``, ``data``, ``hf_dataset``…). The copy in memory holds a random sample of its rows in an
Arrow table in RAM, with the same format and transform (``set_transform``, ``with_format``); every
object between the loader's dataset and the Hugging Face one is a shallow copy: the user's
objects, their tables and their format are never changed.
"""

from __future__ import annotations

import os
import random
from typing import Any

from ioprof.sources import files
from ioprof.sources.memory import MEMORY_SAMPLE_BYTES, MEMORY_SAMPLE_FILES, MemoryView, shallow
from ioprof.sources.source import Source

# Where a wrapper keeps its Hugging Face dataset (besides the usual holders).
HOLDER_ATTRIBUTES = ("dataset", "ds", "data", "hf_dataset", "hf_ds", "reader", "data_source", "base")


def is_arrow_dataset(obj: Any) -> bool:
    """A Hugging Face ``datasets.Dataset`` (told by what it has, not imported: ``datasets`` may
    not be installed, and then no such object exists)."""
    return (
        type(obj).__module__.startswith("datasets.")
        and hasattr(obj, "cache_files")
        and hasattr(obj, "_data")
        and hasattr(obj, "with_format")
    )


def holder(ds: Any) -> tuple[str, Any] | None:
    """("", the dataset) where it is a Hugging Face one; (attribute, it) where a wrapper holds one."""
    if is_arrow_dataset(ds):
        return "", ds
    for name in HOLDER_ATTRIBUTES:
        obj = getattr(ds, name, None)
        if obj is not None and is_arrow_dataset(obj):
            return name, obj
    return None


def files_of(ds: Any) -> list[str]:
    """The Arrow files a (wrapped) Hugging Face dataset maps; [] for one held in memory."""
    found = holder(ds)
    if found is None:
        return []
    try:
        cache = found[1].cache_files
    except Exception:  # a dataset object in a state it cannot say
        return []
    return [os.fspath(c["filename"]) for c in cache if isinstance(c, dict) and c.get("filename")]


KIND = "arrow"


def find(dataset: Any) -> Source | None:
    """The Arrow files a Hugging Face dataset memory-maps (none where its table is held in RAM)."""
    mapped = files_of(dataset)
    if not mapped:
        return None
    root = files.common_root(mapped)
    return Source(KIND, "Arrow files (Hugging Face datasets)", tuple(mapped), root, root, "filesystem")


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    return copy_in_memory(dataset)


def copy_in_memory(
    dataset: Any, *, max_rows: int = MEMORY_SAMPLE_FILES, max_bytes: int = MEMORY_SAMPLE_BYTES, seed: int = 0
) -> MemoryView | str:
    """A copy whose Hugging Face dataset holds a random sample of its rows in RAM, at positions
    0…n−1 (a wrapper that maps its index i to row i reads them), or why not."""
    found = holder(dataset)
    if found is None:
        return "no Hugging Face dataset was found on it"
    attr, hf = found
    n = len(hf)
    if n == 0:
        return "its Hugging Face dataset has no rows"
    rows = random.Random(seed).sample(range(n), min(n, max_rows))
    try:
        from datasets.table import InMemoryTable

        table = hf.with_format("arrow")[rows]  # read now, from its files: the rows, in RAM
        while table.num_rows > 1 and table.nbytes > max_bytes:
            table = table.slice(0, table.num_rows // 2)
        copy = shallow(hf)
        copy._data = InMemoryTable(table.combine_chunks())
        copy._indices = None
    except Exception as e:  # an Arrow error reading the user's files: the ceiling cannot run
        return f"its rows could not be copied into memory ({type(e).__name__}: {e})"
    if attr:
        wrapper = shallow(dataset)
        setattr(wrapper, attr, copy)
    else:
        wrapper = copy
    return MemoryView(
        dataset=wrapper,
        positions=list(range(table.num_rows)),
        files=0,
        bytes=int(table.nbytes),
        source=f"{table.num_rows} of your dataset's rows (an Arrow table in RAM)",
    )
