"""The datasets a run reads: the user's (``--data``) or the generated default sets, described."""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO

from ioprof.core.results import OBJECT_STORE_FS_TYPE, DatasetInfo
from ioprof.datasets import objects, shards
from ioprof.datasets.cache import ensure_datasets
from ioprof.datasets.discover import ImageList, bits_per_pixel, describe, find_images, mean_resolution
from ioprof.datasets.synth import DatasetSpec
from ioprof.host.pagecache import FilesystemInfo, PageRuns, filesystem_of

# An object store's images: the first bytes of this many are read for their resolution.
STORE_HEADER_OBJECTS = 8
STORE_HEADER_BYTES = 64 * 1024


@dataclass(frozen=True)
class Dataset:
    """A dataset as measured: its description, its files, and the filesystem they sit on."""

    info: DatasetInfo
    images: ImageList
    fs: FilesystemInfo
    # a user's files: what the page cache held of them when ioprof's cold reads first evicted them
    # (``pagecache.evict``), read back when the command is done; None for ioprof's own files
    evicted: PageRuns | None = field(default=None, compare=False, repr=False)

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
    stores: bool = False,
) -> list[Dataset]:
    """The user's dataset (``data_path``) or the generated ones at ``resolutions``, described.
    ``stores``: the caller reads an object store (``s3://…``); others get a one-line error."""
    if data_path is not None and (objects.is_store_url(data_path) or shards.is_shard_url(data_path)):
        if not stores:
            raise objects.not_yet("--data", data_path)
        if shards.is_shard_url(data_path):
            return [shard_dataset(data_path, progress=progress)]
        try:
            return [store_dataset(data_path, seed=seed, progress=progress)]
        except objects.HoldsShards:
            return [shard_dataset(data_path, progress=progress)]
    if data_path:
        images = find_images(data_path)
        return [
            Dataset(
                describe(images, data_path, generated=False, seed=seed),
                images,
                filesystem_of(images.root),
                evicted={},
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


def store_dataset(url: str, *, seed: int, progress: Callable[[str], None]) -> Dataset:
    """The images under an object store's prefix (listing bounded: ``objects.MAX_LISTED``),
    described from the listing and the first bytes of a few of them."""
    listing = objects.list_images(url)
    more = f" (the first {len(listing.urls):,} listed: the prefix holds more)" if listing.truncated else ""
    progress(
        f"{url}: {len(listing.urls):,} images in {len(listing.classes)} class(es), {sum(listing.sizes) / 1e6:,.1f} MB"
        f"{more}, listed in {listing.requests} request(s) at {objects.endpoint()}"
    )
    picked = random.Random(seed).sample(list(listing.urls), min(STORE_HEADER_OBJECTS, len(listing.urls)))
    mean_w, mean_h = mean_resolution(partial(_header, u) for u in picked)
    total = sum(listing.sizes)
    mean_bytes = total / len(listing.sizes)
    nested = listing.classes != ("",)
    info = DatasetInfo(
        label=url,
        path=url,
        generated=False,
        files=len(listing.urls),
        total_bytes=total,
        mean_file_bytes=mean_bytes,
        mean_width_px=mean_w,
        mean_height_px=mean_h,
        bits_per_pixel=bits_per_pixel(mean_bytes, mean_w, mean_h),
        fs_type=OBJECT_STORE_FS_TYPE,
        mount_source=objects.endpoint(),
        classes=len(listing.classes) if nested else None,
        fs_kind="network",
        keeps_pages=False,  # nothing on this host keeps an object's bytes between GETs
    )
    images = ImageList(
        url, listing.urls, listing.labels, listing.classes, "imagefolder" if nested else "flat", listing.sizes
    )
    return Dataset(info, images, FilesystemInfo(OBJECT_STORE_FS_TYPE, url, objects.endpoint()))


def _header(url: str) -> IO[bytes]:
    """An object's first bytes, enough for its image header (a ranged GET)."""
    return io.BytesIO(objects.read_object(url, STORE_HEADER_BYTES))


def shard_dataset(data: str, *, progress: Callable[[str], None]) -> Dataset:
    """Tar shards named by a URL pattern or held under an ``s3://`` prefix, described from their
    sizes (a listing, or HTTP HEAD) and the first samples of the first shard: the samples it holds
    are estimated from the bytes a sample takes in the stream."""
    if data.startswith("s3://"):
        prefixed, listed, requests = shards.listed_sizes(data)
        urls = prefixed or shards.expand(data)
        sizes = shards.sizes_of(urls, listed)
        asked = f"{requests} LIST request(s)"
    else:
        urls = shards.expand(data)
        sizes = shards.sizes_of(urls)
        asked = f"{min(len(urls), shards.MAX_SIZED)} HEAD request(s)"
    first = shards.first_samples(
        urls, max_samples=shards.DESCRIBE_SAMPLES, max_bytes=shards.DESCRIBE_MAX_BYTES
    )
    total = sum(sizes)
    per_sample = first.bytes_per_sample
    samples = max(1, round(total / per_sample))
    mean_w, mean_h = mean_resolution(shards.header_opener(i) for i in first.images)
    source = shards.where(urls[0])
    progress(
        f"{data}: {len(urls):,} shard(s), {total / 1e6:,.1f} MB, about {samples:,} samples "
        f"(estimated: {per_sample / 1e3:,.1f} kB a sample in the first {len(first.images)} read), sized by {asked} at {source}"
    )
    fs_type = shards.fs_type(urls[0])
    info = DatasetInfo(
        label=data,
        path=data,
        generated=False,
        files=len(urls),
        total_bytes=total,
        mean_file_bytes=per_sample,
        mean_width_px=mean_w,
        mean_height_px=mean_h,
        bits_per_pixel=bits_per_pixel(per_sample, mean_w, mean_h),
        fs_type=fs_type,
        mount_source=source,
        classes=None,  # the classes of the first samples only: unknown for the dataset
        fs_kind="network",
        keeps_pages=False,  # nothing on this host keeps a GET's bytes
        samples=samples,
        sharded=True,
    )
    # the model's head: a class per label a shard may carry (labels past it are folded into it)
    classes = tuple(str(i) for i in range(shards.SHARD_CLASSES))
    images = ImageList(data, tuple(urls), tuple(0 for _ in urls), classes, "shards", sizes)
    return Dataset(info, images, FilesystemInfo(fs_type, data, source))
