"""Where should the dataset live? Measure each candidate location and predict training there.

The dataset's own location is measured read-only where it is. Every candidate folder gets a
shuffled sample of the dataset copied into a temporary folder inside it (timed: the write
rate gives the cost of copying the whole dataset), read back cold at the loader's
concurrency, and the temporary folder is removed afterwards — also on Ctrl-C or an error.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import psutil

from ioprof import __version__
from ioprof.compute import make_step, resolve_device, tune
from ioprof.config import PlaceConfig, SweepConfig, worker_count
from ioprof.machine import machine_info
from ioprof.pagecache import FilesystemInfo, filesystem_of
from ioprof.placement import decide
from ioprof.presets import StorageProfile
from ioprof.results import SCHEMA_VERSION, CandidateResult, PlaceResult, RunInfo, to_jsonable
from ioprof.storage import EmulatedStorage, probe_storage
from ioprof.sweep import Dataset, compute_ceiling, decode_ceiling
from ioprof.telemetry import nvml_for_device

# The sample copied to each candidate: at least this many files and bytes (or the whole dataset).
SAMPLE_MIN_FILES = 200
SAMPLE_MIN_BYTES = 64 * 10**6
TEMP_PREFIX = "ioprof-place-"


def pick_sample(paths: Sequence[str], seed: int) -> tuple[list[str], int]:
    """A shuffled sample of at least SAMPLE_MIN_FILES files and SAMPLE_MIN_BYTES bytes, and its size."""
    order = list(paths)
    random.Random(seed).shuffle(order)
    out: list[str] = []
    total = 0
    for p in order:
        if len(out) >= SAMPLE_MIN_FILES and total >= SAMPLE_MIN_BYTES:
            break
        try:
            size = os.path.getsize(p)
        except OSError:  # a broken link or a vanished file is no part of a sample
            continue
        out.append(p)
        total += size
    return out, total


def _unusable(
    kind: str, label: str, path: str, status: str, reason: str, fs: FilesystemInfo | None
) -> CandidateResult:
    return CandidateResult(
        label=label,
        path=path,
        kind=kind,
        status=status,
        reason=reason,
        fs_type=fs.fs_type if fs else "",
        mount_source=fs.source if fs else "",
        ram_backed=fs.ram_backed if fs else False,
        sample_files=0,
        sample_bytes=0,
        write_mb_per_s=None,
        storage=(),
    )


def measure_current(
    paths: Sequence[str], sample_bytes: int, root: str, concurrencies: Sequence[int], seed: int
) -> CandidateResult:
    """The dataset where it is: read-only, cold."""
    fs = filesystem_of(root)
    storage = tuple(probe_storage(paths, c, fs, "cold", None, None, seed) for c in concurrencies)
    return CandidateResult(
        label="current location", path=root, kind="current", status="ok", reason="", fs_type=fs.fs_type,
        mount_source=fs.source, ram_backed=fs.ram_backed, sample_files=len(paths),
        sample_bytes=sample_bytes, write_mb_per_s=None, storage=storage,
    )  # fmt: skip


def measure_emulated(
    paths: Sequence[str],
    sample_bytes: int,
    root: str,
    profile: StorageProfile,
    concurrencies: Sequence[int],
    seed: int,
) -> CandidateResult:
    """A hypothetical location: the dataset's files read through an emulated device."""
    fs = filesystem_of(root)
    emulated = EmulatedStorage(profile)
    storage = tuple(probe_storage(paths, c, fs, "warm", emulated, None, seed) for c in concurrencies)
    return CandidateResult(
        label=f"{profile.name} (emulated)", path="", kind="emulated", status="ok", reason=profile.source,
        fs_type="emulated", mount_source="", ram_backed=False, sample_files=len(paths),
        sample_bytes=sample_bytes, write_mb_per_s=None, storage=storage,
    )  # fmt: skip


def measure_candidate(
    sample: Sequence[str],
    sample_bytes: int,
    folder: str,
    concurrencies: Sequence[int],
    seed: int,
    progress: Callable[[str], None],
    clock: Callable[[], float] = time.perf_counter,
) -> CandidateResult:
    """Copy ``sample`` into a temporary folder inside ``folder``, measure it cold, remove it."""
    label = folder
    target = Path(folder)
    if not target.exists():
        return _unusable("candidate", label, folder, "missing", "does not exist", None)
    if not target.is_dir():
        return _unusable("candidate", label, folder, "missing", "is a file, not a folder", None)
    fs = filesystem_of(folder)
    need = sample_bytes
    free = shutil.disk_usage(folder).free
    if free < need * 1.1:
        return _unusable(
            "candidate",
            label,
            folder,
            "full",
            f"{free / 1e6:,.0f} MB free, the sample needs {need / 1e6:,.0f} MB",
            fs,
        )
    try:
        tmp = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=folder))
    except OSError as e:
        return _unusable("candidate", label, folder, "not writable", e.strerror or str(e), fs)
    try:
        progress(f"{folder}: copying a sample of {len(sample)} files ({need / 1e6:,.1f} MB)…")
        copies = []
        t0 = clock()
        for i, src in enumerate(sample):
            dst = tmp / f"{i:06d}{Path(src).suffix}"
            with open(src, "rb") as fin, open(dst, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
                fout.flush()
                os.fsync(fout.fileno())
            copies.append(str(dst))
        write_s = max(clock() - t0, 1e-9)
        progress(f"{folder}: reading the sample back cold…")
        storage = tuple(probe_storage(copies, c, fs, "cold", None, None, seed) for c in concurrencies)
        return CandidateResult(
            label=label, path=folder, kind="candidate", status="ok",
            reason="RAM-backed (tmpfs): fast, but it holds the data in memory" if fs.ram_backed else "",
            fs_type=fs.fs_type, mount_source=fs.source, ram_backed=fs.ram_backed, sample_files=len(copies),
            sample_bytes=need, write_mb_per_s=need / 1e6 / write_s, storage=storage,
        )  # fmt: skip
    except OSError as e:
        status = "full" if e.errno == errno.ENOSPC else "failed"
        return _unusable("candidate", label, folder, status, e.strerror or str(e), fs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_place(
    config: PlaceConfig,
    dataset: Dataset,
    command: str,
    progress: Callable[[str], None],
) -> PlaceResult:
    """Measure the ceilings once, then every location; predict training at each."""
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    device, device_reason = resolve_device(config.device)
    config = tune(config, device)
    run = SweepConfig(batch_size=config.batch_size).run_length(device.type)
    progress(f"compute device: {device} ({device_reason})")
    step = make_step(
        config.compute,
        config.model,
        device,
        len(dataset.images.classes),
        False,
        config.precision,
        bool(config.channels_last),
    )
    compute = compute_ceiling(step, config.compute, config.model, device, run, config.crop_px)
    progress(f"compute ceiling: {compute.img_per_s:,.1f} img/s ({compute.label})")
    paths = list(dataset.images.paths)
    labels = list(dataset.images.labels)
    decode = []
    for w in config.workers:
        d = decode_ceiling(
            paths, labels, config.crop_px, "multiprocess", w, run.batch_size, dataset.fs, config.seed
        )
        decode.append(d)
        progress(f"decode ceiling, {worker_count(w)}: {d.img_per_s:,.1f} img/s")
    sample, sample_bytes = pick_sample(paths, config.seed)
    candidates = []
    progress(f"current location {dataset.info.path}: reading cold, read-only…")
    candidates.append(measure_current(sample, sample_bytes, dataset.info.path, config.workers, config.seed))
    for folder in config.candidates:
        c = measure_candidate(sample, sample_bytes, folder, config.workers, config.seed, progress)
        if c.status != "ok":
            progress(f"{folder}: {c.status} — {c.reason}")
        candidates.append(c)
    for profile in config.storage_profiles:
        progress(f"{profile.name} (emulated): reading through the emulated device…")
        candidates.append(
            measure_emulated(sample, sample_bytes, dataset.info.path, profile, config.workers, config.seed)
        )
    gpu, nvml = nvml_for_device(device)
    result = PlaceResult(
        schema_version=SCHEMA_VERSION,
        kind="place",
        run=RunInfo(
            command=command, started_at=started, finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            interrupted=False, device=str(device), device_reason=device_reason, batch_size=run.batch_size,
            warmup_steps=run.warmup_steps, steps=run.steps, seconds=None,
            start_method=multiprocessing.get_start_method(), ioprof_version=__version__,
        ),
        machine=machine_info(gpu, nvml.driver or None, nvml.reason or None),
        config=to_jsonable(asdict(config)),
        dataset=dataset.info,
        ram_available_bytes=psutil.virtual_memory().available,
        epochs=config.epochs,
        compute=compute,
        decode=tuple(decode),
        candidates=tuple(candidates),
    )  # fmt: skip
    return decide(result)
