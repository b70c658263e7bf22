"""The input pipeline under test: torchvision transforms in a PyTorch DataLoader.

Samples come from the dataset's files (through the one read path of ``storage``, which in the
cold regime drops each file's pages once read), or from an in-memory sample (decode ceilings,
emulated storage). A sample that cannot be decoded is skipped, not allowed to kill a worker: it
travels back with its batch as a (path, reason) pair, so the run can count and report it. A
read that fails because the storage itself went away is reported apart, so that the run can
stop with one clear line instead of counting every file as broken.
"""

from __future__ import annotations

import io
import itertools
import os
import random
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, get_worker_info
from torch.utils.data._utils.collate import default_collate
from torchvision import transforms

from ioprof.core.config import PREFETCH_FACTOR, LoaderSetting
from ioprof.datasets import objects, shards
from ioprof.host.interrupts import kept_interrupts
from ioprof.measure import stages
from ioprof.measure.shm import check_shm
from ioprof.measure.storage import STORAGE_LOST_ERRNOS, EmulatedStorage, read_blob, read_file

# torch warns when num_workers exceeds the cores; a sweep asks for that on purpose, and the
# report says so itself (analysis: "more workers than usable cores").
warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)

# Shards: each worker shuffles the samples it streams within a buffer of this many (WebDataset's
# pattern); labels beyond the model's head are folded into it (a throughput run, not a trained model).
SHUFFLE_BUFFER = 256

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


class Sample(NamedTuple):
    image: torch.Tensor | None  # None when the file could not be read or decoded
    label: int
    path: str
    error: str  # "" when decoded
    converted: bool  # decoded in another mode (CMYK, L, P, RGBA…) and converted to RGB
    nbytes: int  # bytes read from the file
    lost_errno: int  # a read error that may mean the storage went away, else 0
    retries: int = 0  # requests the client repeated for it (an object store: throttling, 5xx)


class Batch(NamedTuple):
    images: torch.Tensor | None  # None when every sample of the batch failed
    labels: torch.Tensor | None
    failures: list[tuple[str, str]]  # (path, reason) of samples that could not be read or decoded
    converted: int
    bytes_read: int  # bytes the batch's samples read from their files
    paths: list[str]  # the files read for it
    lost: tuple[str, int] | None  # (path, errno) of a read that may mean the storage went away
    retries: int = 0  # requests the client repeated for its samples (an object store)
    made_s: float = 0.0  # time.monotonic() when it was collated (in its worker, or this process)


class ImageFiles(Dataset):
    """Images read through ioprof's read path (files or an in-memory sample), decoded by PIL.
    Its read and its decode are timed apart while its loader's stages are (``stages``)."""

    ioprof_stages = True  # times its own read and decode

    def __init__(
        self,
        paths: Sequence[str],
        labels: Sequence[int],
        transform: Callable[[Image.Image], torch.Tensor],
        *,
        blobs: Sequence[bytes] | None = None,
        emulated: EmulatedStorage | None = None,
        evict_after_read: bool = False,
        keep_warm: frozenset[str] = frozenset(),
    ) -> None:
        self.keep_warm = keep_warm  # in the cold regime, files left resident (the share RAM would hold)
        self.paths = list(paths)
        self.labels = list(labels)
        self.transform = transform
        self.blobs = blobs
        self.emulated = emulated
        self.evict_after_read = evict_after_read

    def __len__(self) -> int:
        return len(self.paths)

    def _read(self, index: int) -> bytes:
        if self.blobs is not None:
            return read_blob(self.blobs[index], self.emulated)
        path = self.paths[index]
        return read_file(path, self.emulated, self.evict_after_read and path not in self.keep_warm)

    def __getitem__(self, index: int) -> Sample:
        return self._decoded(index, *self._fetched(index))

    def _fetched(self, index: int) -> tuple[bytes | OSError, int, float]:
        """(the sample's bytes, or the read's error; the requests its client repeated; seconds)."""
        r0 = objects.retries_here()
        t0 = stages.mark()
        try:
            data: bytes | OSError = self._read(index)
        except OSError as e:
            data = e
        return data, objects.retries_here() - r0, stages.since(t0)

    def _decoded(self, index: int, data: bytes | OSError, retried: int, read_s: float | None) -> Sample:
        """The sample from its bytes (``read_s``: its read's time for the stages; None: timed apart)."""
        path, label = self.paths[index], self.labels[index]
        if isinstance(data, OSError):
            lost = data.errno if data.errno in STORAGE_LOST_ERRNOS else 0
            return Sample(
                None, label, path, f"{type(data).__name__}: {data}"[:300], False, 0, lost or 0, retried
            )
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                t1 = stages.mark()
                with Image.open(io.BytesIO(data)) as im:
                    converted = im.mode != "RGB"
                    rgb = im.convert("RGB")  # what torchvision's ImageFolder loader does
                clock = stages.current()
                if clock is not None:
                    if read_s is not None:
                        clock.add(stages.READ, read_s)
                    clock.add(stages.DECODE, stages.since(t1))
            return Sample(self.transform(rgb), label, path, "", converted, len(data), 0, retried)
        except Exception as e:  # any undecodable file is counted and skipped, by design
            return Sample(None, label, path, f"{type(e).__name__}: {e}"[:300], False, len(data), 0, retried)


class ThreadedFetch(ImageFiles):
    """The same files, a batch's reads made by ``threads`` threads in each worker (more requests in
    flight than there are workers, as ``s3torchconnector`` and Mosaic's streaming do), then decoded
    in turn in the worker. DataLoader hands a worker its batch's indices through ``__getitems__``.
    The pool is made in the process that reads (after the fork), never inherited."""

    def __init__(self, *args: Any, threads: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads = threads
        self._pool: tuple[int, Any] | None = None

    def __getitems__(self, indices: list[int]) -> list[Sample]:
        from concurrent.futures import ThreadPoolExecutor

        if self._pool is None or self._pool[0] != os.getpid():
            self._pool = (os.getpid(), ThreadPoolExecutor(self.threads, thread_name_prefix="ioprof-fetch"))
        t0 = stages.mark()
        fetched = list(self._pool[1].map(self._fetched, indices))
        clock = stages.current()
        if clock is not None:  # the batch's reads overlapped: their wall time is the worker's
            clock.add(stages.READ, stages.since(t0))
        return [
            self._decoded(i, data, retried, None)
            for i, (data, retried, _) in zip(indices, fetched, strict=True)
        ]


class TarShards(IterableDataset):
    """Samples streamed from tar shards (``datasets.shards``): each worker reads its own shards in
    turn, as streams — an HTTP or S3 GET, or a local file, or an in-memory copy through emulated
    storage — and shuffles within a buffer (WebDataset's pattern). A sample's bytes are what it
    took in the stream, tar headers included: what crossed the network for it. Its read (pulling it
    from the stream) and its decode are timed apart while its loader's stages are (``stages``)."""

    ioprof_stages = True

    def __init__(
        self,
        urls: Sequence[str],
        crop_px: int,
        *,
        blobs: Sequence[bytes] | None = None,
        emulated: EmulatedStorage | None = None,
        evict: bool = False,
        seed: int = 0,
        samples_per_pass: int | None = None,
    ) -> None:
        self.urls, self.blobs, self.emulated, self.evict, self.seed = list(urls), blobs, emulated, evict, seed
        self.transform = train_transform(crop_px)
        # None: epoch after epoch, the cell deciding when it has seen enough; else a pass ends after
        # each worker's this many samples (its streams closed), and iterating again starts the next
        self.samples_per_pass = samples_per_pass

    def _stream(self, i: int) -> Iterator[shards.ShardSample]:
        url = self.urls[i]
        if self.blobs is not None or not shards.is_shard_url(url):  # a local copy: read whole
            data = (
                read_blob(self.blobs[i], self.emulated)
                if self.blobs is not None
                else read_file(url, None, self.evict)
            )
            yield from shards.samples(io.BytesIO(data), url)
            return
        with shards.opened(url) as stream:
            yield from shards.samples(stream, url)

    def _read(self, i: int) -> Iterator[tuple[shards.ShardSample, float] | Sample]:
        """Shard ``i``'s samples as read (undecoded), each with the seconds its read took; a
        shard that broke off (or is no tar) ends with a failed Sample, and the worker goes on."""
        url = self.urls[i]
        stream = self._stream(i)
        while True:
            t0 = stages.mark()
            try:
                s = next(stream, None)
            except OSError as e:
                lost = e.errno if e.errno in STORAGE_LOST_ERRNOS else 0
                yield Sample(None, 0, url, f"{type(e).__name__}: {e}"[:300], False, 0, lost or 0)
                return
            if s is None:
                return
            yield s, stages.since(t0)

    def _decode(self, url: str, s: shards.ShardSample, read_s: float) -> Sample:
        """A sample decoded; its path is its shard's (what was read, for the cache's check)."""
        label = s.label % shards.SHARD_CLASSES if s.label >= 0 else 0
        try:
            t1 = stages.mark()
            with Image.open(io.BytesIO(s.image)) as im:
                converted = im.mode != "RGB"
                rgb = im.convert("RGB")
            clock = stages.current()
            if clock is not None:
                clock.add(stages.READ, read_s)
                clock.add(stages.DECODE, stages.since(t1))
            return Sample(self.transform(rgb), label, url, "", converted, s.stream_bytes, 0)
        except Exception as e:  # any undecodable sample is counted and skipped, by design
            why = f"{s.key}: {type(e).__name__}: {e}"[:300]
            return Sample(None, label, url, why, False, s.stream_bytes, 0)

    def __iter__(self) -> Iterator[Sample]:
        samples = self._samples()
        return samples if self.samples_per_pass is None else itertools.islice(samples, self.samples_per_pass)

    def _samples(self) -> Iterator[Sample]:
        info = get_worker_info()
        mine = (
            list(range(len(self.urls)))[info.id :: info.num_workers] if info else list(range(len(self.urls)))
        )
        rng = random.Random(self.seed + (info.id if info else 0))
        # the buffer holds samples as read and each is decoded on its way out, as a WebDataset
        # pipeline shuffles before it decodes. Decoded 224-px tensors in the buffer (256 × 602 kB)
        # grew a reader by 284 MB, against 52 MB, and its first sample waited for 256 decodes
        # (500×375 JPEGs on a local disk: 0.89 s, against 0.06 s)
        buffer: list[tuple[str, shards.ShardSample, float]] = []
        fill = SHUFFLE_BUFFER  # a worker whose shards hold fewer samples: one pass of them
        while mine:  # epoch after epoch: the cell decides when it has seen enough
            rng.shuffle(mine)
            for i in mine:
                for read in self._read(i):
                    if isinstance(
                        read, Sample
                    ):  # a shard that broke off travels at once: the run counts it, or stops
                        yield read
                        continue
                    buffer.append((self.urls[i], *read))
                    if len(buffer) >= fill:
                        yield self._decode(*buffer.pop(rng.randrange(len(buffer))))
            # (a buffer filled by reading its shards over and over held copies, and each pass
            # crossed the network again before the first batch: 60 samples over 2 workers from a
            # store at 5 MB/s started in 4.4 s)
            fill = max(1, min(fill, len(buffer)))


def shard_batches(
    plan: Any,
    urls: Sequence[str],
    blobs: Sequence[bytes] | None,
    cache: Any,
    worker_init_fn: Any = None,
    *,
    samples_per_pass: int | None = None,
    persistent_workers: bool = False,
) -> DataLoader:
    """A DataLoader over tar shards, as a WebDataset training loop builds it (``plan``: a
    ``cell.CellPlan``; ``blobs``: the shards' in-memory copies, read through emulated storage);
    ``samples_per_pass``: passes that end (``TarShards``), for workers kept between them or not."""
    if plan.setting.workers:
        check_shm(
            batch_bytes_of(plan.run.batch_size, plan.crop_px),
            plan.prefetch_factor or PREFETCH_FACTOR,
            plan.setting.workers,
        )
    ds = TarShards(
        urls,
        plan.crop_px,
        blobs=blobs,
        emulated=plan.emulated,
        evict=cache.evict_after_read,
        seed=plan.seed,
        samples_per_pass=samples_per_pass,
    )
    kwargs = _worker_options(plan.setting.workers, plan.start_method, plan.prefetch_factor, plan.in_order)
    if persistent_workers and plan.setting.workers:
        kwargs["persistent_workers"] = True
    return DataLoader(
        ds,
        batch_size=plan.run.batch_size,
        num_workers=plan.setting.workers,
        collate_fn=collate,
        pin_memory=plan.pin_memory,
        drop_last=True,
        worker_init_fn=worker_init_fn if plan.setting.workers else None,
        **kwargs,
    )


def _worker_options(
    workers: int, start_method: str | None, prefetch_factor: int | None, in_order: bool
) -> dict[str, Any]:
    """The DataLoader options that only a loader with workers takes (torch refuses them without):
    how they start, how many batches each keeps ahead, and whether batches come in order."""
    if not workers:
        return {}
    kwargs: dict[str, Any] = {}
    if start_method:
        kwargs["multiprocessing_context"] = start_method
    if prefetch_factor:
        kwargs["prefetch_factor"] = prefetch_factor
    if not in_order:
        kwargs["in_order"] = False
    return kwargs


def collate(samples: list[Sample]) -> Batch:
    """Collate the decoded samples; carry the failed ones back as (path, reason)."""
    ok = [(s.image, s.label) for s in samples if not s.error]
    failures = [(s.path, s.error) for s in samples if s.error]
    lost = next(((s.path, s.lost_errno) for s in samples if s.lost_errno), None)
    converted = sum(1 for s in samples if s.converted)
    nbytes = sum(s.nbytes for s in samples)
    paths = [s.path for s in samples if s.nbytes]
    retries = sum(s.retries for s in samples)
    if not ok:
        return Batch(None, None, failures, converted, nbytes, paths, lost, retries, time.monotonic())
    images, labels = default_collate(ok)
    return Batch(images, labels, failures, converted, nbytes, paths, lost, retries, time.monotonic())


def make_loader(
    paths: Sequence[str],
    labels: Sequence[int],
    *,
    setting: LoaderSetting,
    crop_px: int,
    batch_size: int,
    num_samples: int,
    seed: int,
    pin_memory: bool = False,
    blobs: Sequence[bytes] | None = None,
    emulated: EmulatedStorage | None = None,
    evict_after_read: bool = False,
    start_method: str | None = None,
    prefetch_factor: int | None = None,
    keep_warm: frozenset[str] = frozenset(),
    persistent_workers: bool = False,
    worker_init_fn: Callable[[int], None] | None = None,
    fetch_threads: int = 0,
    in_order: bool = True,
) -> DataLoader:
    """A DataLoader as a training script builds it: shuffled, the standard transform, drop_last.

    ``num_samples`` may exceed the dataset: the sampler then shuffles again for each pass,
    so one iterator (one set of worker processes) serves the whole measurement.
    ``start_method``: how workers start (fork, spawn, forkserver; None: Python's default).
    ``fetch_threads``: a batch's reads made by this many threads in each worker (``ThreadedFetch``).
    ``in_order``: False hands batches over as the workers make them (a slow batch holds none back).
    """
    dataset = (ThreadedFetch if fetch_threads else ImageFiles)(
        paths,
        labels,
        train_transform(crop_px),
        blobs=blobs,
        emulated=emulated,
        evict_after_read=evict_after_read,
        keep_warm=keep_warm,
        **({"threads": fetch_threads} if fetch_threads else {}),
    )
    if setting.workers:  # refused before any worker starts, with the reason, where /dev/shm is too small
        check_shm(batch_bytes_of(batch_size, crop_px), prefetch_factor or PREFETCH_FACTOR, setting.workers)
    generator = torch.Generator().manual_seed(seed)
    sampler = RandomSampler(dataset, replacement=False, num_samples=num_samples, generator=generator)
    kwargs = _worker_options(setting.workers, start_method, prefetch_factor, in_order)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=setting.workers,
        collate_fn=collate,
        pin_memory=pin_memory,
        drop_last=True,
        persistent_workers=persistent_workers and setting.workers > 0,
        worker_init_fn=worker_init_fn if setting.workers else None,
        **kwargs,
    )


def batch_bytes_of(batch_size: int, crop_px: int) -> int:
    """One batch of ioprof's pipeline in /dev/shm: float32 images at the crop, int64 labels."""
    return batch_size * (3 * crop_px * crop_px * 4 + 8)


def worker_pids(iterator: Any) -> list[int]:
    """The pids of a DataLoader iterator's worker processes, whatever their start method.

    Under ``forkserver`` (Python 3.14's default) the workers are children of the fork server,
    not of this process, so they are read from the iterator itself.
    """
    workers = getattr(iterator, "_workers", None) or []
    return [w.pid for w in workers if getattr(w, "pid", None)]


def start_loader(dl: Iterable[Any]) -> Iterator[Any]:
    """``iter(dl)``, where a multiprocess loader forks its workers: a Ctrl-C meanwhile is kept and
    raised once they are forked (``host.interrupts``), not lost in an at-fork callback."""
    with kept_interrupts():
        return iter(dl)
