"""What ioprof can read off a user's DataLoader and dataset without changing them: the samples in
a batch, and the files a dataset lists (torchvision's ``ImageFolder``/``DatasetFolder``, a list of
paths under a usual name, through ``Subset`` and ``ConcatDataset``)."""

from __future__ import annotations

import os
from typing import Any

# Where datasets keep the list of their files: entries are paths, or (path, …) tuples.
FILE_LIST_ATTRIBUTES = ("samples", "imgs", "files", "paths", "image_paths", "img_paths")


def path_of(item: Any) -> str | None:
    """The path of one entry of a file list (a path, or a (path, …) tuple); None if it is neither."""
    path = item[0] if isinstance(item, (list, tuple)) and item else item
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else None


def file_list(dataset: Any) -> tuple[str, list[Any]] | None:
    """(attribute, entries) of the list naming the dataset's files; None when it has none."""
    for name in FILE_LIST_ATTRIBUTES:
        items = getattr(dataset, name, None)
        if isinstance(items, (list, tuple)) and items and path_of(items[0]) is not None:
            return name, list(items)
    return None


def batch_images(batch: Any, default: int) -> int:
    """Samples in a batch: the leading dimension of its first tensor (however nested)."""
    x = batch
    for _ in range(4):
        shape = getattr(x, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(x, dict) and x:
            x = next(iter(x.values()))
        elif isinstance(x, (list, tuple)) and x:
            x = x[0]
        else:
            break
    return default


def dataset_files(dataset: Any, limit: int = 100_000) -> list[str]:
    """The files a dataset reads, where it names them; [] where it does not."""
    inner = getattr(dataset, "dataset", None)
    if inner is not None and hasattr(dataset, "indices"):  # Subset
        files = dataset_files(inner, limit)
        return [files[i] for i in list(dataset.indices)[:limit] if i < len(files)] if files else []
    parts = getattr(dataset, "datasets", None)
    if isinstance(parts, (list, tuple)):  # ConcatDataset
        return [f for d in parts for f in dataset_files(d, limit)][:limit]
    found = file_list(dataset)
    return [path_of(i) or "" for i in found[1][:limit]] if found else []
