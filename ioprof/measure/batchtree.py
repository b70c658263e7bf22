"""What a batch holds, however a collate function packed it.

``default_collate`` gives tensors in tuples, lists and dicts; users' collate functions give
dataclasses, named tuples, ``UserDict``-based mappings (Hugging Face's ``BatchFeature``), objects
with attributes. A batch crosses from a worker as pickle sends it: every tensor an attribute or
item reaches travels, in ``/dev/shm``. So a batch is walked as pickle walks it — items of mappings
and sequences, fields of dataclasses and slots, an object's attributes — to a bounded depth, each
object once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

DEPTH = 6  # a batch nests a few containers deep; a deeper object is not the batch's own data
# …and holds a few hundred objects at most (a list of a batch's file names, say): a walk that
# meets more has reached what the batch only refers to (a dataset, a module), and stops there
BUDGET = 10_000


def leaves(batch: Any, depth: int = DEPTH) -> Iterator[Any]:
    """Every array-like (an object with a ``shape``: a tensor, a NumPy array) the batch reaches, in the order pickle would reach them, none twice."""
    seen: set[int] = set()

    def walk(x: Any, left: int) -> Iterator[Any]:
        if id(x) in seen or len(seen) >= BUDGET or x is None or isinstance(x, _ATOMS):
            return
        seen.add(id(x))
        try:
            shape = getattr(x, "shape", None)
            if isinstance(shape, tuple):  # torch.Size is a tuple
                yield x
                return
            items = _items(x) if left > 0 else []
        except Exception:  # a user's object whose attributes raise: no part of the batch
            return
        for item in items:
            yield from walk(item, left - 1)

    yield from walk(batch, depth)


_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type)


def _items(x: Any) -> list[Any]:
    if isinstance(x, Mapping):
        return list(x.values())
    if isinstance(x, (list, tuple, set, frozenset)):
        return list(x)
    if dataclasses.is_dataclass(x):
        return [getattr(x, f.name, None) for f in dataclasses.fields(x)]
    found = list(vars(x).values()) if hasattr(x, "__dict__") else []
    for cls in type(x).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(x, name):
                found.append(getattr(x, name))
    return found


def images_in(batch: Any, default: int) -> int:
    """Samples in a batch: the leading dimension of the first array it holds (``default`` where
    it holds none)."""
    first = next((a for a in leaves(batch) if len(a.shape) > 0), None)
    return int(first.shape[0]) if first is not None else default


def tensor_bytes(batch: Any) -> int:
    """Bytes of the tensors a batch holds, as they cross ``/dev/shm`` from a worker."""
    import torch

    return sum(int(t.element_size() * t.nelement()) for t in leaves(batch) if isinstance(t, torch.Tensor))
