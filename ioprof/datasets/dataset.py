"""The datasets a run reads: the user's (``--data``) or the generated default sets, described."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ioprof.core.results import DatasetInfo
from ioprof.datasets.cache import ensure_datasets
from ioprof.datasets.discover import ImageList, describe, find_images
from ioprof.datasets.synth import DatasetSpec
from ioprof.host.pagecache import FilesystemInfo, filesystem_of


@dataclass(frozen=True)
class Dataset:
    """A dataset as measured: its description, its files, and the filesystem they sit on."""

    info: DatasetInfo
    images: ImageList
    fs: FilesystemInfo

    @property
    def label(self) -> str:
        return self.info.label

    @property
    def root(self) -> str:
        return self.images.root


def load_datasets(
    data_path: str | None,
    resolutions: Sequence[tuple[int, int]],
    images_per_dataset: int,
    *,
    seed: int,
    cache_dir: str | None,
    progress: Callable[[str], None],
) -> list[Dataset]:
    """The user's dataset (``data_path``) or the generated ones at ``resolutions``, described."""
    if data_path:
        images = find_images(data_path)
        return [
            Dataset(
                describe(images, data_path, generated=False, seed=seed), images, filesystem_of(images.root)
            )
        ]
    specs = [DatasetSpec(w, h, images_per_dataset, seed=seed) for w, h in resolutions]
    roots = ensure_datasets(specs, Path(cache_dir) if cache_dir else None, progress)
    out = []
    for spec, root in zip(specs, roots, strict=True):
        images = find_images(root)
        out.append(
            Dataset(describe(images, spec.label, generated=True, seed=seed), images, filesystem_of(root))
        )
    return out
