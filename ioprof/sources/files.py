"""Loose files: a dataset that keeps a list of the files it reads.

Found on the dataset itself under a usual name (torchvision's ``ImageFolder``/``DatasetFolder``:
``samples``/``imgs``; ``files``, ``paths``, ``image_files``, ``filenames``… of users' own), as
a column of a pandas DataFrame it holds (a CSV of names), or under any name where one list alone
holds an entry for each sample, each entry a path or a name in a folder
the dataset holds (``img_dir``, ``root``); one level down on an object it holds (timm's
``ImageDataset`` keeps them on its ``reader``); and through ``Subset`` and ``ConcatDataset``. The
copy in memory replaces the chosen entries of a copy of every object between the dataset and
the list — the user's dataset, its reader and its lists are never changed.
"""

from __future__ import annotations

import bisect
import os
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

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
)
from ioprof.sources.source import ITEMS_LISTED, Source, spread

# Where datasets keep the list of their files: entries are paths, or (path, …) tuples. After
# torchvision's and timm's, the names users' own datasets give it most.
FILE_LIST_ATTRIBUTES = (
    "samples",
    "imgs",
    "files",
    "paths",
    "image_paths",
    "img_paths",
    "image_files",
    "img_files",
    "file_paths",
    "filenames",
    "file_list",
    "image_list",
    "img_list",
    "images",
)
# Objects a dataset may hold its list on (timm: ``reader``; older timm: ``parser``).
HOLDER_ATTRIBUTES = ("reader", "parser", "data_source", "base")

# an edge from an object to the next one on the way to the list: ("attr", name) or ("item", name, i)
Edge = tuple[Any, ...]


def path_of(item: Any) -> str | None:
    """The path of one entry of a file list (a path, or a (path, …) tuple); None if it is neither."""
    path = item[0] if isinstance(item, (list, tuple)) and item else item
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else None


def _base(obj: Any, first: str) -> str | None:
    """Where an entry names a file: "" where it is a path to one, else the folder of the object's
    own (``img_dir``, ``root``…) it lies in, joined as ``os.path.join(folder, entry)``; None where
    it names no file that is there."""
    if os.path.isfile(first):
        return ""
    folders = [v for v in vars(obj).values() if isinstance(v, str) and v] if hasattr(obj, "__dict__") else []
    return next((f for f in folders if os.path.isdir(f) and os.path.isfile(os.path.join(f, first))), None)


def _is_frame(obj: Any) -> bool:
    """A pandas DataFrame (told by what it has: pandas may not be installed)."""
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "iloc") and hasattr(obj, "columns")


@dataclass(frozen=True)
class _Leaf:
    """Where one part's list lives: the edges from that part to the list's owner, its name there,
    its entries (the owner's own list, not a copy) — or a column of a table it holds (a CSV of file
    names read into a DataFrame, row i its sample i) — and the folder its entries are joined to,
    where they are names in one."""

    edges: tuple[Edge, ...]
    attr: str
    items: Sequence[Any]  # the list, or the column's values (a pandas Series)
    column: Any = None  # the DataFrame's column, where ``attr`` holds one
    base: str = ""

    def __len__(self) -> int:
        return len(self.items)

    @cached_property
    def values(self) -> Sequence[Any]:
        """The entries, indexed by position (a table's column read once into a list)."""
        return self.items.tolist() if self.column is not None else self.items  # type: ignore[attr-defined]

    def entry(self, index: int) -> Any:
        return self.values[index]

    def entries(self) -> list[Any]:
        """A copy of the entries, to change."""
        return list(self.values)

    def path(self, index: int) -> str:
        return os.path.join(self.base, path_of(self.entry(index)) or "")


def file_list(obj: Any) -> _Leaf | None:
    """The list naming an object's files (its first a file that is there, or a name in a folder
    the object holds: a list of captions or labels is not one), or a column of file names in a
    table it holds; None when it has none."""
    for name in FILE_LIST_ATTRIBUTES:
        items = getattr(obj, name, None)
        if not isinstance(items, (list, tuple)) or not items:
            continue
        first = path_of(items[0])
        base = _base(obj, first) if first is not None else None
        if base is not None:
            return _Leaf((), name, items, base=base)
    frames = [(k, v) for k, v in vars(obj).items() if _is_frame(v)] if hasattr(obj, "__dict__") else []
    for name, frame in frames:
        if len(frame) == 0:
            continue
        for column in frame.columns:
            first = frame[column].iloc[0]
            base = _base(obj, first) if isinstance(first, str) and first else None
            if base is not None:
                return _Leaf((), name, frame[column], column, base)
    return _unnamed(obj)


def _unnamed(obj: Any) -> _Leaf | None:
    """A list under a name of the object's own choosing (``file_names``, ``im_paths``): one holding
    an entry for each of its samples (as long as the object is), its first and last entries files
    that are there — taken only where exactly one list does (two, images and masks: which of them
    is a sample's read is not known)."""
    try:
        n = len(obj)
    except Exception:  # no length (an iterable), or one that cannot be read: no list is its samples'
        return None
    found = []
    for name, items in vars(obj).items() if n and hasattr(obj, "__dict__") else ():
        if not isinstance(items, (list, tuple)) or len(items) != n:
            continue
        first, last = path_of(items[0]), path_of(items[-1])
        base = _base(obj, first) if first is not None and last is not None else None
        if base is not None and last is not None and os.path.isfile(os.path.join(base, last)):
            found.append(_Leaf((), name, items, base=base))
    return found[0] if len(found) == 1 else None


def _leaf(ds: Any) -> _Leaf | None:
    """The list naming the files of ``ds`` or of an object it holds (timm's ``reader``)."""
    found = held(ds, HOLDER_ATTRIBUTES, 1, file_list)
    if found is None:
        return None
    way, leaf = found
    return replace(leaf, edges=tuple(("attr", name) for name in way))


def _is_subset(ds: Any) -> bool:
    return hasattr(ds, "indices") and getattr(ds, "dataset", None) is not None


def _parts(ds: Any) -> list[Any] | None:
    parts = getattr(ds, "datasets", None)
    return list(parts) if isinstance(parts, (list, tuple)) and hasattr(ds, "cumulative_sizes") else None


Found = tuple[tuple[Edge, ...], _Leaf, int]  # (edges from the dataset to a part, its list, index in it)


@dataclass(frozen=True)
class _Way:
    """The way from a dataset to the list holding each of its samples (through Subset and
    ConcatDataset), its lists found once: ``at(pos)`` for sample ``pos``, of ``size`` in all."""

    at: Callable[[int], Found | None]
    size: int


def _way(ds: Any) -> _Way | None:
    """The dataset's way to its lists; None where a part of it lists none."""
    if _is_subset(ds):
        inner, indices = _way(ds.dataset), ds.indices
        if inner is None:
            return None
        return _Way(lambda pos: _below(("attr", "dataset"), inner.at(int(indices[pos]))), len(indices))
    parts = _parts(ds)
    if parts is not None:
        ways = [_way(p) for p in parts]
        if not ways or any(w is None for w in ways):
            return None
        ends = list(ds.cumulative_sizes)

        def at(pos: int) -> Found | None:
            i = bisect.bisect_right(ends, pos)
            inner = ways[i] if i < len(ways) else None
            return (
                _below(("item", "datasets", i), inner.at(pos - (ends[i - 1] if i else 0))) if inner else None
            )

        return _Way(at, ends[-1])
    leaf = _leaf(ds)
    return (
        _Way(lambda pos: ((), leaf, pos) if pos < len(leaf) else None, len(leaf))
        if leaf is not None
        else None
    )


def _below(edge: Edge, found: Found | None) -> Found | None:
    return ((edge, *found[0]), found[1], found[2]) if found is not None else None


def listed(ds: Any) -> bool:
    """Whether the dataset (through Subset and ConcatDataset) lists its files."""
    return _way(ds) is not None


def listed_files(ds: Any, limit: int | None = None) -> list[tuple[int, str]]:
    """(sample, its file) for the files a dataset reads where it lists them, [] where it does not:
    all of them in its own order, or ``limit`` of them spread evenly over it (the first ``limit``
    of an ImageFolder are its first classes only)."""
    way = _way(ds)
    return _listed(way, ITEMS_LISTED if limit is None else limit) if way is not None else []


def _listed(way: _Way, limit: int) -> list[tuple[int, str]]:
    out = []
    for pos in spread(way.size, limit):
        found = way.at(pos)
        if found is not None:
            out.append((pos, found[1].path(found[2])))
    return out


def files_of(ds: Any, limit: int | None = None) -> list[str]:
    """The files a dataset reads, where it lists them (``listed_files``); [] where it does not."""
    return [path for _, path in listed_files(ds, limit)]


def _length(ds: Any) -> int:
    try:
        return len(ds)
    except TypeError:
        return 0


KIND = "files"


def find(dataset: Any) -> Source | None:
    """Loose files the dataset lists (ImageFolder's ``samples``, timm's reader's, through Subset and
    ConcatDataset), under the folder they share."""
    if not listed(dataset):
        return None
    paths = files_of(dataset, ITEMS_LISTED)
    root = str(getattr(dataset, "root", "") or "") or common_root(paths)
    files = _length(dataset)  # a sample a file: an ImageNet of 1.28 M files lists 100,000 of them
    count = files if files > len(paths) else None
    return Source(KIND, "loose files", tuple(paths), root, root, "filesystem", count, file_a_sample=True)


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    return copy_in_memory(dataset, read=read)


def copy_in_memory(
    dataset: Any,
    *,
    max_files: int = MEMORY_SAMPLE_FILES,
    max_bytes: int = MEMORY_SAMPLE_BYTES,
    seed: int = 0,
    read: dict[str, bytes] | None = None,
) -> MemoryView | str:
    """A copy of the dataset with a random sample of its files in memory, or why not. ``read``:
    files already read (cold, by the storage read alone): the sample is drawn from them."""
    why = unavailable()
    if why:
        return why
    way = _way(dataset)
    if way is None:
        return "none of its files could be found through its lists"
    order: Iterable[int] = shuffled(way.size, seed)
    if read:
        drawn = [pos for pos, path in _listed(way, ITEMS_LISTED) if path in read]
        random.Random(seed).shuffle(drawn)
        order = drawn
    copies = MemoryCopies()
    # (edges to the owner) → the owner's new entries, made from its own list
    changed: dict[tuple[Edge, ...], tuple[_Leaf, list[Any]]] = {}
    positions: list[int] = []
    try:
        for pos in order:
            if copies.view.files >= max_files or copies.view.bytes >= max_bytes:
                break
            found = way.at(pos)
            if found is None:
                continue
            edges, leaf, index = found
            key = (*edges, *leaf.edges)
            if key not in changed:
                changed[key] = (leaf, leaf.entries())
            entries = changed[key][1]
            path = leaf.path(index)
            data = read[path] if read and path in read else read_whole(path)
            entries[index] = _pointed(entries[index], copies.add(path, data))
            positions.append(pos)
    except OSError as e:
        return copies.fail(f"the sample could not be copied into memory ({e.strerror or e})")
    if not positions:
        return copies.fail("none of its files could be found through its lists")
    copy = _rebuilt(dataset, changed)
    return copies.done(copy, positions, f"{copies.view.files} of your files")


def _pointed(item: Any, link: str) -> Any:
    """The entry with its path replaced, of the same shape (path, tuple or list)."""
    if isinstance(item, tuple):
        return (link, *item[1:])
    if isinstance(item, list):
        return [link, *item[1:]]
    return link


def _step(obj: Any, edge: Edge) -> Any:
    return getattr(obj, edge[1]) if edge[0] == "attr" else getattr(obj, edge[1])[edge[2]]


def _rebuilt(root: Any, changed: dict[tuple[Edge, ...], tuple[_Leaf, list[Any]]]) -> Any:
    """A copy of ``root`` in which every object on the way to a changed list is a shallow copy
    and the list is the new one; everything else is shared, read-only, with the user's."""
    copies: dict[tuple[Edge, ...], Any] = {(): shallow(root)}

    def copied(path: tuple[Edge, ...]) -> Any:
        if path in copies:
            return copies[path]
        parent = copied(path[:-1])
        edge = path[-1]
        obj = shallow(_step(parent, edge))
        if edge[0] == "attr":
            setattr(parent, edge[1], obj)
        else:  # a ConcatDataset's part: its list of parts is copied before one is replaced
            parts = list(getattr(parent, edge[1]))
            parts[edge[2]] = obj
            setattr(parent, edge[1], parts)
        copies[path] = obj
        return obj

    for path, (leaf, entries) in changed.items():
        owner = copied(path)
        original = getattr(owner, leaf.attr)
        if leaf.column is not None:  # a table: a copy with its column of names replaced
            frame = original.copy(deep=False)
            frame[leaf.column] = entries
            setattr(owner, leaf.attr, frame)
            continue
        new: Any = tuple(entries) if isinstance(original, tuple) else entries
        for name in (leaf.attr, *FILE_LIST_ATTRIBUTES):  # ImageFolder's imgs is the list its samples is
            if getattr(owner, name, None) is original:
                setattr(owner, name, new)
    return copies[()]


def common_root(files: Sequence[str]) -> str:
    """The folder every listed file lies under."""
    if not files:
        return ""
    try:
        return os.path.commonpath(files[:1000])
    except ValueError:  # relative and absolute paths mixed
        return os.path.dirname(files[0])
