"""Hugging Face ``datasets``: a ``datasets.Dataset`` reads its rows from Arrow files it
memory-maps (``cache_files``: what ``load_dataset``, ``load_from_disk`` or ``save_to_disk`` left),
so its bytes come in as page faults, not ``read()`` calls — the mount's or the block device's
counters count them, a process's ``rchar`` does not. But a column of files (its ``Image``,
``Audio`` or ``Video`` feature: an Arrow struct of ``bytes`` and ``path``) may hold only their
paths — ``load_dataset("imagefolder", …)`` and ``load_dataset(<a local folder>)`` of files on
disk do — and then each row's file is opened and read where the row is decoded: those files are
what it reads, one a sample, and its Arrow files only the list of them.

Found as the loader's dataset itself or down to two levels, on the objects that wrap it
(``dataset``, ``ds``, ``data``, ``hf_dataset``, timm's ``reader``…). The copy in memory holds a
random sample of its rows in an Arrow table in RAM, with the same format and transform
(``set_transform``, ``with_format``), and where its rows name files, each of them in memory under
its own name; every object between the loader's dataset and the Hugging Face one is a shallow
copy: the user's objects, their tables and their format are never changed.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ioprof.sources import files
from ioprof.sources.memory import (
    MEMORY_SAMPLE_BYTES,
    MEMORY_SAMPLE_FILES,
    MemoryCopies,
    MemoryView,
    held,
    read_whole,
    shallow,
    shuffled,
    unavailable,
    wrapped,
)
from ioprof.sources.source import ITEMS_LISTED, Source, spread

# Where a wrapper keeps its Hugging Face dataset (besides the usual holders).
HOLDER_ATTRIBUTES = ("dataset", "ds", "data", "hf_dataset", "hf_ds", "reader", "data_source", "base")
HOLDER_DEPTH = 2  # timm's ImageDataset → its reader (ReaderHfds) → the Hugging Face dataset
FILE_FIELDS = frozenset({"bytes", "path"})  # the Arrow struct of datasets' Image, Audio and Video


def is_arrow_dataset(obj: Any) -> bool:
    """A Hugging Face ``datasets.Dataset`` (told by what it has, not imported: ``datasets`` may
    not be installed, and then no such object exists)."""
    return (
        type(obj).__module__.startswith("datasets.")
        and hasattr(obj, "cache_files")
        and hasattr(obj, "_data")
        and hasattr(obj, "with_format")
    )


def holder(ds: Any) -> tuple[tuple[str, ...], Any] | None:
    """(the attributes from ``ds`` to its Hugging Face dataset, it): () where ``ds`` is one."""
    return held(ds, HOLDER_ATTRIBUTES, HOLDER_DEPTH, lambda obj: obj if is_arrow_dataset(obj) else None)


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


def file_columns(hf: Any) -> list[str]:
    """The columns whose cells can name a file instead of holding its bytes (Arrow structs of
    ``bytes`` and ``path``)."""
    import pyarrow as pa

    try:
        schema = hf.data.schema
    except Exception:  # a dataset object in a state it cannot say
        return []
    return [
        f.name
        for f in schema
        if pa.types.is_struct(f.type)
        and {f.type.field(i).name for i in range(f.type.num_fields)} == FILE_FIELDS
    ]


@dataclass(frozen=True)
class Named:
    """The files a dataset's rows name: the rows listed (all of them, or ``ITEMS_LISTED`` spread
    over the table), and for each column of files one of them names a file in, the path each of
    those rows opens (None where the row holds the file's bytes)."""

    rows: Sequence[int]
    columns: dict[str, list[str | None]]

    def files(self) -> list[str]:
        return [p for paths in self.columns.values() for p in paths if p is not None]


def named_files(hf: Any) -> Named | None:
    """The files the dataset's rows name; None where no row of those listed names one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = file_columns(hf)
    if not columns:
        return None
    rows = spread(len(hf), ITEMS_LISTED)
    cut = hf.select_columns(columns).with_format("arrow")
    table = cut[: len(rows)] if isinstance(rows, range) else cut[list(rows)]
    out: dict[str, list[str | None]] = {}
    for name in columns:
        cells = table.column(name).combine_chunks()
        data, paths = cells.field("bytes"), cells.field("path")
        opens = pc.and_(pc.and_(cells.is_valid(), data.is_null()), paths.is_valid())
        if pc.any(opens).as_py():
            out[name] = pc.if_else(opens, paths, pa.scalar(None, pa.string())).to_pylist()
    return Named(rows, out) if out else None


KIND = "arrow"


def find(dataset: Any) -> Source | None:
    """The files a Hugging Face dataset's rows name, where they name them; otherwise the Arrow
    files it memory-maps (none where its table is held in RAM)."""
    found = holder(dataset)
    if found is None:
        return None
    hf = found[1]
    try:
        named = named_files(hf)
    except Exception:  # an Arrow error reading the user's table: its files as they are mapped
        named = None
    if named is not None:
        listed = named.files()
        root = files.common_root(listed)
        one_each = len(named.columns) == 1 and len(listed) == len(named.rows)
        label = (
            f"files named in its {', '.join(f'`{c}`' for c in named.columns)} column (Hugging Face datasets)"
        )
        count = len(hf) * len(named.columns) if len(hf) > len(named.rows) else None
        return Source(KIND, label, tuple(listed), root, root, "filesystem", count, file_a_sample=one_each)
    mapped = files_of(dataset)
    if not mapped:
        return None
    root = files.common_root(mapped)
    return Source(KIND, "Arrow files (Hugging Face datasets)", tuple(mapped), root, root, "filesystem")


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    return copy_in_memory(dataset, read=read)


def copy_in_memory(
    dataset: Any,
    *,
    max_rows: int = MEMORY_SAMPLE_FILES,
    max_bytes: int = MEMORY_SAMPLE_BYTES,
    seed: int = 0,
    read: dict[str, bytes] | None = None,
) -> MemoryView | str:
    """A copy whose Hugging Face dataset holds a random sample of its rows in RAM, at positions
    0…n−1 (a wrapper that maps its index i to row i reads them), or why not. Where its rows name
    files, each is held in memory under its name (``read``: files already read, cold, by the
    storage read alone: the sample is drawn from them)."""
    found = holder(dataset)
    if found is None:
        return "no Hugging Face dataset was found on it"
    way, hf = found
    n = len(hf)
    if n == 0:
        return "its Hugging Face dataset has no rows"
    try:
        from datasets.table import InMemoryTable

        named = named_files(hf)
        if named is not None:
            copied = _files_in_memory(hf, named, seed, read, max_rows, max_bytes)
            if isinstance(copied, str):
                return copied
            table, copies = copied
        else:
            rows = list(itertools.islice(shuffled(n, seed), max_rows))
            table = hf.with_format("arrow")[rows]  # read now, from its files: the rows, in RAM
            while table.num_rows > 1 and table.nbytes > max_bytes:
                table = table.slice(0, table.num_rows // 2)
            copies = None
        copy = shallow(hf)
        copy._data = InMemoryTable(table.combine_chunks())
        copy._indices = None
    except Exception as e:  # an Arrow error reading the user's files: the ceiling cannot run
        return f"its rows could not be copied into memory ({type(e).__name__}: {e})"
    wrapper = wrapped(dataset, way, copy)
    if copies is not None:
        return copies.done(wrapper, list(range(table.num_rows)), f"{copies.view.files} of your files")
    return MemoryView(
        dataset=wrapper,
        positions=list(range(table.num_rows)),
        files=0,
        bytes=int(table.nbytes),
        source=f"{table.num_rows} of your dataset's rows (an Arrow table in RAM)",
    )


def _files_in_memory(
    hf: Any,
    named: Named,
    seed: int,
    read: dict[str, bytes] | None,
    max_rows: int,
    max_bytes: int,
) -> tuple[Any, MemoryCopies] | str:
    """The sampled rows as an Arrow table whose named files are links to copies in memory."""
    import pyarrow as pa

    why = unavailable()
    if why:
        return why
    order: Iterable[int] = shuffled(len(named.rows), seed)  # of the rows listed
    if read:  # the rows whose files were all read already
        order = [j for j in order if all(c[j] is None or c[j] in read for c in named.columns.values())]
    copies = MemoryCopies()
    chosen: list[int] = []
    links: dict[str, dict[int, str]] = {c: {} for c in named.columns}
    try:
        for j in order:
            if len(chosen) >= max_rows or copies.view.bytes >= max_bytes:
                break
            for column, paths in named.columns.items():
                path = paths[j]
                if path is not None:
                    data = read[path] if read and path in read else read_whole(path)
                    links[column][len(chosen)] = copies.add(path, data)
            chosen.append(named.rows[j])
    except OSError as e:
        return copies.fail(f"the sample could not be copied into memory ({e.strerror or e})")
    if not chosen:
        return copies.fail("none of the files its rows name could be read")
    table = hf.with_format("arrow")[chosen]
    for column, linked in links.items():
        cells = table.column(column).combine_chunks()
        paths = [linked.get(i, p) for i, p in enumerate(cells.field("path").to_pylist())]
        new = pa.StructArray.from_arrays(
            [cells.field("bytes"), pa.array(paths, pa.string())],
            fields=list(cells.type),
            mask=cells.is_null(),
        )
        table = table.set_column(table.schema.get_field_index(column), table.schema.field(column), new)
    return table, copies
