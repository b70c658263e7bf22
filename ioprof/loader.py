"""The input pipeline under test — torchvision transforms in a PyTorch DataLoader — and the
decode ceiling: that same loader over files verified to be in RAM, with no training step.

A sample that cannot be decoded is skipped, not allowed to kill a worker: it travels
back with its batch as a (path, reason) pair, so the run can count and report it.
"""

from __future__ import annotations

import io
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, RandomSampler
from torch.utils.data._utils.collate import default_collate
from torchvision import transforms

from ioprof.pagecache import FilesystemInfo, prepare
from ioprof.results import DecodeCeiling
from ioprof.storage import EmulatedStorage, read_file

# torch warns when num_workers exceeds the cores; a sweep asks for that on purpose, and the
# report says so itself (analysis: "more workers than usable cores").
warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)

# ImageNet channel statistics, as in torchvision's reference training scripts.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def train_transform(crop_px: int) -> Callable[[Image.Image], torch.Tensor]:
    """The standard ImageNet training transform."""
    return transforms.Compose(
        [
            transforms.RandomResizedCrop(crop_px),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


class Batch(NamedTuple):
    images: torch.Tensor | None  # None when every sample of the batch failed
    labels: torch.Tensor | None
    failures: list[tuple[str, str]]  # (path, reason) of samples that could not be decoded
    converted: int  # samples decoded in another mode (CMYK, L, P, RGBA…) and converted to RGB


class ImageFiles(Dataset):
    """Images read through ioprof's read path (real or emulated storage), decoded by PIL."""

    def __init__(
        self,
        paths: Sequence[str],
        labels: Sequence[int],
        transform: Callable[[Image.Image], torch.Tensor],
        emulated: EmulatedStorage | None = None,
    ) -> None:
        self.paths = list(paths)
        self.labels = list(labels)
        self.transform = transform
        self.emulated = emulated

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[Any, int, str, str, bool]:
        """(image tensor or None, label, path, error or "", converted to RGB)."""
        path = self.paths[index]
        label = self.labels[index]
        try:
            data = read_file(path, self.emulated)
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(io.BytesIO(data)) as im:
                    converted = im.mode != "RGB"
                    rgb = im.convert("RGB")  # what torchvision's ImageFolder loader does
            return self.transform(rgb), label, path, "", converted
        except Exception as e:  # any undecodable file is counted and skipped, by design
            return None, label, path, f"{type(e).__name__}: {e}"[:300], False


def collate(samples: list[tuple[Any, int, str, str, bool]]) -> Batch:
    """Collate the decoded samples; carry the failed ones back as (path, reason)."""
    ok = [(img, label) for img, label, _, err, _ in samples if not err]
    failures = [(path, err) for _, _, path, err, _ in samples if err]
    converted = sum(1 for *_, conv in samples if conv)
    if not ok:
        return Batch(None, None, failures, converted)
    images, labels = default_collate(ok)
    return Batch(images, labels, failures, converted)


def make_loader(
    paths: Sequence[str],
    labels: Sequence[int],
    crop_px: int,
    loader: str,
    workers: int,
    batch_size: int,
    num_samples: int,
    seed: int,
    pin_memory: bool = False,
    emulated: EmulatedStorage | None = None,
) -> DataLoader:
    """A DataLoader as a training script builds it: shuffled, the standard transform, drop_last.

    ``num_samples`` may exceed the dataset: the sampler then shuffles again for each pass,
    so one iterator (one set of worker processes) serves the whole measurement.
    """
    dataset = ImageFiles(paths, labels, train_transform(crop_px), emulated)
    generator = torch.Generator().manual_seed(seed)
    sampler = RandomSampler(dataset, replacement=False, num_samples=num_samples, generator=generator)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=0 if loader == "serial" else workers,
        collate_fn=collate,
        pin_memory=pin_memory,
        drop_last=True,
        persistent_workers=False,
    )


def warmup_batches(loader: str, workers: int) -> int:
    """Batches to discard before the loader is in steady state.

    A multiprocess loader's first batches arrive together, one per worker, after start-up;
    timing from the first of them would count work done before the window opened.
    """
    return 1 if loader == "serial" else max(1, workers)


def probe_decode(
    paths: Sequence[str],
    labels: Sequence[int],
    crop_px: int,
    loader: str,
    workers: int,
    batch_size: int,
    fs: FilesystemInfo,
    measured_batches: int,
    min_seconds: float,
    max_seconds: float,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> DecodeCeiling:
    """Images per second the loader can produce from RAM: decode + augment + collate only.

    Runs at least ``measured_batches`` batches and at least ``min_seconds``, at most ``max_seconds``.
    """
    cache = prepare(paths, "warm", fs)
    warm = warmup_batches(loader, workers)
    # The sampler draws indices lazily, one permutation per pass: a generous count costs nothing.
    dl = make_loader(
        paths, labels, crop_px, loader, workers, batch_size, (warm + 1_000_000) * batch_size, seed
    )
    batches = 0
    images = 0
    it: Iterator[Batch] = iter(dl)
    try:
        for _ in range(warm):
            next(it)
        started = clock()
        for batch in it:
            images += 0 if batch.images is None else int(batch.images.shape[0])
            batches += 1
            spent = clock() - started
            if spent >= max_seconds or (batches >= measured_batches and spent >= min_seconds):
                break
        elapsed = max(clock() - started, 1e-9)
    finally:
        del it
    return DecodeCeiling(
        loader=loader,
        workers=0 if loader == "serial" else workers,
        img_per_s=images / elapsed,
        images=images,
        elapsed_s=elapsed,
        cache=cache,
    )
