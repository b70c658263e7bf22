"""Where should the dataset live? Measure each candidate location and predict training there.

The dataset's own location is measured read-only where it is. Every candidate folder gets a
shuffled sample of the dataset copied into a temporary folder inside it (timed: the write
rate gives the cost of copying the whole dataset), read back cold at the loader's
concurrency, and the temporary folder is removed afterwards — also on Ctrl-C or an error.
The candidate's free space is checked against the whole dataset, not only the sample.
Compute and decode ceilings come from the same steps as the sweep's (``ceilings``).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from ioprof.core.config import LoaderSetting, PlaceConfig
from ioprof.core.presets import StorageProfile
from ioprof.core.resultfile import to_jsonable
from ioprof.core.results import SCHEMA_VERSION
from ioprof.core.results_place import CandidateResult, PlaceResult
from ioprof.core.thresholds import SPACE_HEADROOM
from ioprof.datasets import objects
from ioprof.datasets.dataset import Dataset
from ioprof.host.machine import memory_for_cache
from ioprof.host.pagecache import FilesystemInfo, filesystem_of, keeps_pages
from ioprof.measure.ceilings import compute_ceiling, decode_ceilings, store_ceilings
from ioprof.measure.compute import make_step
from ioprof.measure.sample import load_sample
from ioprof.measure.session import Progress, Session, put_back
from ioprof.measure.storage import EmulatedStorage, copy_to, per_sample, probe_storage

# The sample copied to each candidate: at least this many files and bytes (or the whole dataset).
SAMPLE_MIN_FILES = 200
SAMPLE_MIN_BYTES = 64 * 10**6
TEMP_PREFIX = "ioprof-place-"


def pick_sample(
    paths: Sequence[str], seed: int, sizes: Sequence[int] = (), min_files: int = SAMPLE_MIN_FILES
) -> tuple[list[str], int]:
    """A shuffled sample of at least ``min_files`` files and SAMPLE_MIN_BYTES bytes, and its size.
    ``sizes``: each path's bytes where a listing gave them (an object store's), else stat'ed."""
    known = dict(zip(paths, sizes, strict=True)) if sizes else {}
    order = list(paths)
    random.Random(seed).shuffle(order)
    out: list[str] = []
    total = 0
    for p in order:
        if len(out) >= min_files and total >= SAMPLE_MIN_BYTES:
            break
        try:
            size = known[p] if known else os.path.getsize(p)
        except OSError:  # a broken link or a vanished file is no part of a sample
            continue
        out.append(p)
        total += size
    return out, total


def _unusable(
    label: str, path: str, status: str, reason: str, fs: FilesystemInfo | None, free: int | None = None
) -> CandidateResult:
    return CandidateResult(
        label=label,
        path=path,
        kind="candidate",
        status=status,
        reason=reason,
        fs_type=fs.fs_type if fs else "",
        mount_source=fs.source if fs else "",
        ram_backed=fs.ram_backed if fs else False,
        sample_files=0,
        sample_bytes=0,
        write_mb_per_s=None,
        storage=(),
        free_bytes=free,
    )


def measure_current(
    paths: Sequence[str],
    sample_bytes: int,
    root: str,
    concurrencies: Sequence[int],
    seed: int,
    *,
    dataset: Dataset | None = None,
    progress: Progress | None = None,
) -> CandidateResult:
    """The dataset where it is: read-only, cold. Objects in a store (``dataset`` given, on one):
    read by GETs at each concurrency, each level on objects no earlier level read."""
    if dataset is not None and dataset.fs.object_store and progress is not None:
        fs = dataset.fs
        storage = store_ceilings(dataset, concurrencies, seed=seed, progress=progress)
        kept: bool | None = False  # nothing on this host keeps an object between GETs
    else:
        fs = filesystem_of(root)
        found = dataset.evicted if dataset is not None else None
        storage = tuple(probe_storage(paths, c, fs, seed=seed, root=root, found=found) for c in concurrencies)
        kept = keeps_pages(paths, fs)
    return CandidateResult(
        label="current location",
        path=root,
        kind="current",
        status="ok",
        reason="",
        fs_type=fs.fs_type,
        mount_source=fs.source,
        ram_backed=fs.ram_backed,
        sample_files=len(paths),
        sample_bytes=sample_bytes,
        write_mb_per_s=None,
        storage=storage,
        keeps_pages=kept,
    )


def measure_emulated(
    dataset: Dataset, profile: StorageProfile, concurrencies: Sequence[int], seed: int
) -> CandidateResult:
    """A hypothetical location: an in-memory sample of the dataset read through an emulated device."""
    sample = load_sample(dataset.images, dataset.fs, seed=seed)
    emulated = EmulatedStorage(profile)
    storage = tuple(
        probe_storage(sample.paths, c, dataset.fs, emulated=emulated, blobs=sample.blobs, seed=seed)
        for c in concurrencies
    )
    return CandidateResult(
        label=f"{profile.name} (emulated)",
        path="",
        kind="emulated",
        status="ok",
        reason=profile.source,
        fs_type="emulated",
        mount_source="",
        ram_backed=False,
        sample_files=sample.files,
        sample_bytes=sample.bytes,
        write_mb_per_s=None,
        storage=storage,
    )


def measure_candidate(
    sample: Sequence[str],
    sample_bytes: int,
    folder: str,
    concurrencies: Sequence[int],
    *,
    dataset_bytes: int,
    seed: int,
    progress: Callable[[str], None],
    clock: Callable[[], float] = time.perf_counter,
    bytes_per_sample: float | None = None,
) -> CandidateResult:
    """Copy ``sample`` into a temporary folder inside ``folder``, measure it cold, remove it."""
    target = Path(folder)
    if not target.exists():
        return _unusable(folder, folder, "missing", "does not exist", None)
    if not target.is_dir():
        return _unusable(folder, folder, "missing", "is a file, not a folder", None)
    fs = filesystem_of(folder)
    free = shutil.disk_usage(folder).free
    if free < sample_bytes * 1.1:
        reason = f"{free / 1e6:,.0f} MB free; even the sample needs {sample_bytes / 1e6:,.0f} MB"
        return _unusable(folder, folder, "full", reason, fs, free)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=folder))
    except OSError as e:
        return _unusable(folder, folder, "not writable", e.strerror or str(e), fs, free)
    try:
        progress(f"{folder}: copying a sample of {len(sample)} files ({sample_bytes / 1e6:,.1f} MB)…")
        t0 = clock()
        targets = [tmp / f"{i:06d}{Path(src).suffix}" for i, src in enumerate(sample)]
        # from a store, by as many GETs in flight as the most workers asked for (as a sync tool
        # copies); files one by one
        with ThreadPoolExecutor(max(concurrencies) if objects.is_store_url(sample[0]) else 1) as pool:
            copies = list(pool.map(copy_to, sample, targets))
        write_s = max(clock() - t0, 1e-9)
        progress(f"{folder}: reading the sample back cold…")
        storage = tuple(
            per_sample(probe_storage(copies, c, fs, seed=seed, root=str(tmp)), bytes_per_sample)
            for c in concurrencies
        )
        kept = keeps_pages(copies, fs)
        reasons = ["RAM-backed (tmpfs): fast, but it holds the data in memory"] if fs.ram_backed else []
        if free < dataset_bytes * SPACE_HEADROOM:
            reasons.append(
                f"the whole dataset does not fit: {free / 1e9:,.2f} GB free, it needs {dataset_bytes / 1e9:,.2f} GB"
            )
        return CandidateResult(
            label=folder,
            path=folder,
            kind="candidate",
            status="ok",
            reason="; ".join(reasons),
            fs_type=fs.fs_type,
            mount_source=fs.source,
            ram_backed=fs.ram_backed,
            sample_files=len(copies),
            sample_bytes=sample_bytes,
            write_mb_per_s=sample_bytes / 1e6 / write_s,
            storage=storage,
            free_bytes=free,
            keeps_pages=kept,
        )
    except OSError as e:
        status = "full" if e.errno == errno.ENOSPC else "failed"
        return _unusable(folder, folder, status, e.strerror or str(e), fs, free)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_place(config: PlaceConfig, session: Session, dataset: Dataset, progress: Progress) -> PlaceResult:
    """Measure the ceilings once, then every location; predict training at each."""
    since = time.perf_counter()
    step = make_step(
        config.compute,
        session.device,
        model=config.model,
        num_classes=len(dataset.images.classes),
        non_blocking=False,
        precision=config.precision,
        channels_last=bool(config.channels_last),
    )
    compute = compute_ceiling(
        session, step, config.compute, model=config.model, crop_px=config.crop_px, progress=progress
    )
    memory = load_sample(dataset.images, dataset.fs, seed=config.seed)
    decode, _failed = decode_ceilings(
        dataset,
        memory,
        [LoaderSetting.multiprocess(w) for w in config.workers],
        crop_px=config.crop_px,
        batch_size=session.run.batch_size,
        seed=config.seed,
        start_method=config.start_method,
        progress=progress,
        compute=compute,
    )
    sharded = dataset.info.sharded
    # shards: as few as give every reader of the most workers a few, and the bytes
    least = SAMPLE_MIN_FILES if not sharded else min(len(dataset.images.paths), 4 * max(config.workers))
    sample, sample_bytes = pick_sample(dataset.images.paths, config.seed, dataset.images.sizes, least)
    progress(f"current location {dataset.info.path}: reading cold, read-only…")
    candidates = [
        measure_current(
            sample,
            sample_bytes,
            dataset.info.path,
            config.workers,
            config.seed,
            dataset=dataset,
            progress=progress,
        )
    ]
    for folder in config.candidates:
        c = measure_candidate(
            sample,
            sample_bytes,
            folder,
            config.workers,
            dataset_bytes=dataset.info.listed_bytes,
            seed=config.seed,
            progress=progress,
            bytes_per_sample=dataset.info.mean_file_bytes if sharded else None,
        )
        if c.status != "ok":
            progress(f"{folder}: {c.status} — {c.reason}")
        candidates.append(c)
    for profile in config.storage_profiles:
        progress(f"{profile.name} (emulated): reading through the emulated device…")
        candidates.append(measure_emulated(dataset, profile, config.workers, config.seed))
    ram, ram_source = (config.ram_bytes, "--ram") if config.ram_bytes is not None else memory_for_cache()
    back = put_back(dataset.evicted, since, progress)
    return PlaceResult(
        schema_version=SCHEMA_VERSION,
        kind="place",
        run=session.run_info(read_back=back),
        machine=session.machine,
        config=to_jsonable(asdict(config)),
        dataset=dataset.info,
        ram_available_bytes=ram,
        epochs=config.epochs,
        compute=compute,
        decode=decode,
        candidates=tuple(candidates),
        ram_source=ram_source,
    )
