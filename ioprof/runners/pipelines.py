"""The input pipelines ``ioprof whatif`` measures beside the one the user has.

Each is a real pipeline a user could switch to, built from what they would use:

- a thread pool instead of worker processes: torchdata's ``ParallelMapper(method="thread")``;
- ``torchvision.io.decode_jpeg`` on the CPU instead of PIL, with the v2 transforms on tensors;
- a pre-resized copy of the files (short side N px), re-encoded offline;
- packed shards: tar files of the samples (``key.jpg`` + ``key.cls``, WebDataset's layout) read
  sequentially, a shuffle buffer in each worker. The reader is a few lines of ``tarfile``
  rather than WebDataset's own, because the cold regime needs each shard's pages dropped once it
  has been read (``drop_after_read``), which WebDataset's opener cannot do; the report shows the
  WebDataset code a user would write.

Every factory returns the batches as ``loader.Batch``, so ``measure.cell.run_cell`` times them all alike.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, RandomSampler

from ioprof.core.counts import CacheInfo
from ioprof.measure.cell import CellPlan
from ioprof.measure.loader import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Batch,
    ImageFiles,
    Sample,
    collate,
    shard_batches,
    train_transform,
)


def torchdata_missing() -> str:
    """Why torchdata's thread loader cannot run here, or "" when it can."""
    try:
        import torchdata.nodes  # noqa: F401
    except ImportError:
        return "torchdata"
    return ""


def _files(
    plan: CellPlan,
    paths: Sequence[str],
    labels: Sequence[int],
    blobs: Sequence[bytes] | None,
    cache: CacheInfo,
) -> ImageFiles:
    """The baseline's dataset (same files, transform, emulation and eviction) for another loader."""
    return ImageFiles(
        paths,
        labels,
        train_transform(plan.crop_px),
        blobs=blobs,
        emulated=plan.emulated,
        evict_after_read=cache.evict_after_read,
    )


def _shuffled(ds: ImageFiles | TensorImageFiles, plan: CellPlan) -> RandomSampler:
    """The baseline's shuffling: one long pass, so one iterator serves the whole measurement."""
    return RandomSampler(ds, num_samples=10**7, generator=torch.Generator().manual_seed(plan.seed))


def thread_loader(
    plan: CellPlan,
    paths: Sequence[str],
    labels: Sequence[int],
    blobs: Sequence[bytes] | None,
    cache: CacheInfo,
) -> Iterable[Batch]:
    """The same dataset and collate, fetched by a pool of threads in the training process."""
    from torchdata.nodes import Batcher, Loader, Mapper, ParallelMapper, SamplerWrapper

    ds = _files(plan, paths, labels, blobs, cache)
    node: Any = ParallelMapper(
        SamplerWrapper(_shuffled(ds, plan)),
        map_fn=ds.__getitem__,
        num_workers=plan.setting.workers,
        method="thread",
    )
    node = Mapper(Batcher(node, batch_size=plan.run.batch_size, drop_last=True), collate)
    return Loader(node)


class TensorImageFiles(Dataset):
    """Files decoded by ``torchvision.io.decode_jpeg`` (other formats: ``decode_image``), then the
    ImageNet training transform on uint8 tensors (torchvision's v2 transforms)."""

    def __init__(self, files: ImageFiles, crop_px: int) -> None:
        from torchvision.transforms import v2

        self.files = files
        self.transform = v2.Compose(
            [
                v2.RandomResizedCrop(crop_px, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(IMAGENET_MEAN, IMAGENET_STD),
            ]
        )

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Sample:
        from torchvision.io import ImageReadMode, decode_image, decode_jpeg

        path, label = self.files.paths[index], self.files.labels[index]
        try:
            data = self.files._read(index)
        except OSError as e:
            return Sample(None, label, path, f"{type(e).__name__}: {e}"[:300], False, 0, 0)
        try:
            raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            decode = decode_jpeg if data[:2] == b"\xff\xd8" else decode_image
            image = decode(raw, mode=ImageReadMode.RGB)
            return Sample(self.transform(image), label, path, "", False, len(data), 0)
        except Exception as e:  # an undecodable file is counted and skipped, as with PIL
            return Sample(None, label, path, f"{type(e).__name__}: {e}"[:300], False, len(data), 0)


def decode_jpeg_loader(
    plan: CellPlan,
    paths: Sequence[str],
    labels: Sequence[int],
    blobs: Sequence[bytes] | None,
    cache: CacheInfo,
) -> Iterable[Batch]:
    ds = TensorImageFiles(_files(plan, paths, labels, blobs, cache), plan.crop_px)
    return DataLoader(
        ds,
        batch_size=plan.run.batch_size,
        sampler=_shuffled(ds, plan),
        num_workers=plan.setting.workers,
        collate_fn=collate,
        drop_last=True,
    )


# -- offline copies: pre-resized files and packed shards --------------------------------------


def write_resized(
    paths: Sequence[str], out: Path, short_side: int, quality: int = 90
) -> tuple[list[str], float, int]:
    """Each file re-encoded with its short side at most ``short_side`` px: (new paths, seconds, bytes)."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    total = 0
    t0 = time.perf_counter()
    for i, src in enumerate(paths):
        with Image.open(src) as im:
            rgb = im.convert("RGB")
        scale = short_side / min(rgb.size)
        if scale < 1:
            rgb = rgb.resize(
                (max(1, round(rgb.width * scale)), max(1, round(rgb.height * scale))),
                Image.Resampling.BICUBIC,
            )
        dst = out / f"{i:06d}.jpg"
        rgb.save(dst, quality=quality)
        written.append(str(dst))
        total += dst.stat().st_size
    return written, time.perf_counter() - t0, total


def write_shards(
    paths: Sequence[str], labels: Sequence[int], out: Path, shard_bytes: int
) -> tuple[list[str], float, int]:
    """The files packed into tar shards of about ``shard_bytes`` (``key.jpg`` + ``key.cls`` each)."""
    out.mkdir(parents=True, exist_ok=True)
    groups: list[list[int]] = [[]]
    size = 0
    for i, src in enumerate(paths):
        if size >= shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += os.path.getsize(src)
    shards = [str(out / f"shard-{n:05d}.tar") for n in range(len(groups))]
    t0 = time.perf_counter()
    for shard, members in zip(shards, groups, strict=True):
        with tarfile.open(shard, "w") as tar:
            for i in members:
                data = Path(paths[i]).read_bytes()
                for name, payload in ((f"{i:08d}.jpg", data), (f"{i:08d}.cls", str(labels[i]).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
    return shards, time.perf_counter() - t0, sum(os.path.getsize(s) for s in shards)


def shard_loader(shards: Sequence[str], shard_blobs: Sequence[bytes] | None) -> Any:
    """A LoaderFactory reading ``shards`` (or their in-memory copies through emulated storage)."""

    def make(
        plan: CellPlan,
        paths: Sequence[str],
        labels: Sequence[int],
        blobs: Sequence[bytes] | None,
        cache: CacheInfo,
    ) -> Iterable[Batch]:
        return shard_batches(plan, shards, shard_blobs, cache)

    return make
