"""A user's own input pipeline measured alone, in a pause of their training (``observer``), and
split by difference (DS-Analyzer's method):

- **decode and augment**: their DataLoader's dataset, transforms and collate, with no model,
  over a sample of their files copied into memory (``inmemory``) — never over the storage, so
  the storage cannot hide inside this ceiling — at their worker count and at more;
- **storage**: the same files read cold from their storage, at the loader's concurrency; under
  torchrun once per host (by local rank 0) at all its ranks' readers together, each rank
  getting its share;
- **compute**: the step the script itself showed between batches (``result``).
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from ioprof.core.config import TARGET_REL_HALF_WIDTH, LoaderSetting
from ioprof.core.results import (
    CacheInfo,
    DecodeCeiling,
    StorageCeiling,
)
from ioprof.core.stats import LOOKS

# The storage probe reads at least this many of the dataset's files cold (more at more readers).
PROBE_STORAGE_FILES = 200
PROBE_STORAGE_FILES_PER_READER = 50
PROBE_STORAGE_MAX_S = 10.0
# The loader alone runs at least ``probe_seconds``, then until its interval is narrow or this
# many times as long.
PROBE_DECODE_STRETCH = 3.0


def probe_workers(num_workers: int, cores: int) -> list[int]:
    """The worker counts the user's loader is measured alone at: theirs, and more (twice theirs,
    at least 2, at most two per usable core)."""
    more = min(max(2, 2 * num_workers), 2 * cores)
    return sorted({num_workers, more})


class _Choices:
    """Positions drawn at random, with replacement, for as long as the probe asks."""

    def __init__(self, positions: Sequence[int], seed: int = 0) -> None:
        self.positions = list(positions)
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        rng = random.Random(self.seed)
        while True:
            yield rng.choice(self.positions)

    def __len__(self) -> int:
        return 10**9


def _loader_alone(loader: Any, view: Any, workers: int, seconds: float, batch: int) -> DecodeCeiling:
    """The user's dataset (its in-memory view), collate and batch size in a fresh DataLoader, no model."""
    from torch.utils.data import DataLoader

    kwargs: dict[str, Any] = {
        "num_workers": workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": False,  # decode and augment only: pinning is the main process's copy
        "worker_init_fn": getattr(loader.worker_init_fn, "own", loader.worker_init_fn),  # not ioprof's timers
        "batch_size": loader.batch_size or batch or 1,
        "drop_last": loader.drop_last,
        "sampler": _Choices(view.positions),
    }
    if workers:
        kwargs["multiprocessing_context"] = loader.multiprocessing_context
        kwargs["prefetch_factor"] = loader.prefetch_factor or 2
    with warnings.catch_warnings():  # torch's warning about more workers than cores: ioprof's choice
        warnings.simplefilter("ignore", UserWarning)
        probe = DataLoader(view.dataset, **kwargs)
        probe._ioprof_probe = True  # not one of the user's loaders
        it = iter(probe)
    try:
        images, spans, stopped_by = _time_batches(it, workers, seconds, kwargs["batch_size"])
    finally:
        del it
    elapsed = max(sum(spans), 1e-9)
    setting = LoaderSetting.multiprocess(workers) if workers else LoaderSetting.serial()
    cache = CacheInfo(
        "memory",
        1.0,
        True,
        "memfd",
        f"in memory: {view.files} of your files ({view.bytes / 1e6:,.1f} MB) copied into RAM",
    )
    return DecodeCeiling(
        loader=setting.kind,
        workers=setting.workers,
        img_per_s=sum(images) / elapsed,
        images=sum(images),
        elapsed_s=elapsed,
        cache=cache,
        batch_images=tuple(images),
        batch_s=tuple(spans),
        sample_files=view.files,
        sample_bytes=view.bytes,
        stopped_by=stopped_by,
        looks=LOOKS,
    )


def _time_batches(it: Any, workers: int, seconds: float, batch: int) -> tuple[list[int], list[float], str]:
    """Batches after the start-up burst: at least ``seconds``, then until ±5 % at a fixed look
    (``stats.is_look``), or the stretch."""
    from ioprof.core.stats import Looks, ratio_interval
    from ioprof.observe.userdata import batch_images

    for _ in range(max(1, workers)):  # the start-up burst
        next(it)
    images: list[int] = []
    spans: list[float] = []
    looks = Looks(4 * max(1, workers), seconds)
    started = last = time.perf_counter()
    for b in it:
        now = time.perf_counter()
        images.append(batch_images(b, batch))
        spans.append(now - last)
        last = now
        if now - started >= seconds * PROBE_DECODE_STRETCH:
            return images, spans, "seconds"
        if looks.due(len(spans), now - started):
            interval = ratio_interval([float(n) for n in images], spans, max(1, workers), LOOKS)
            if interval.known and interval.rel_half_width <= TARGET_REL_HALF_WIDTH:
                return images, spans, "interval"
    return images, spans, "batches"


def probe_pipeline(
    loader: Any,
    settings: dict[str, Any],
    seconds: float,
    *,
    batch_images: int = 0,
    local_rank: int = 0,
    local_world_size: int = 1,
) -> dict[str, Any]:
    """The user's loader alone over an in-memory sample, and the storage under its files, cold."""
    decode, decode_note, error = _probe_decode(loader, settings, seconds, batch_images)
    storage, storage_note = _probe_storage(settings, local_rank, local_world_size)
    return {
        "decode": decode,
        "storage": storage,
        "decode_note": decode_note,
        "storage_note": storage_note,
        "error": error,
    }


def _probe_decode(
    loader: Any, settings: dict[str, Any], seconds: float, batch: int
) -> tuple[list[DecodeCeiling], str, str]:
    from ioprof.host.machine import usable_cores
    from ioprof.observe.inmemory import memory_view

    if getattr(loader, "batch_size", None) is None and not batch:
        return [], "your loader has no batch size ioprof could read (a batch sampler)", ""
    view = memory_view(loader.dataset)
    if isinstance(view, str):
        return [], f"decode alone not measured: {view}", ""
    decode: list[DecodeCeiling] = []
    try:
        for w in probe_workers(settings["num_workers"], usable_cores()):
            decode.append(_loader_alone(loader, view, w, seconds, batch))
    except Exception as e:  # the user's dataset may not survive a second loader: say so, go on
        return decode, "", f"{type(e).__name__}: {e}"[:300]
    finally:
        view.close()
    return decode, "", ""


def _probe_storage(
    settings: dict[str, Any], local_rank: int, local_world_size: int
) -> tuple[list[StorageCeiling], str]:
    """The files read cold, once per host, at every local rank's readers together."""
    from ioprof.host.pagecache import filesystem_of
    from ioprof.measure.storage import probe_storage

    files: list[str] = settings["files"]
    if not files:
        return [], "your dataset does not list its files, so the storage under them could not be read alone"
    if local_rank != 0:
        return [], "the storage is read alone once per host, by local rank 0, for all its ranks"
    readers = max(1, settings["num_workers"]) * local_world_size
    count = min(len(files), max(PROBE_STORAGE_FILES, PROBE_STORAGE_FILES_PER_READER * readers))
    sample = random.Random(0).sample(files, count)
    root = settings["dataset_root"] or sample[0]
    ceiling = probe_storage(
        sample, readers, filesystem_of(sample[0]), max_seconds=PROBE_STORAGE_MAX_S, root=root
    )
    return [replace(ceiling, shared_by=local_world_size)], ""
