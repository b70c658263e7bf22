"""A user's own input pipeline, measured alone, and their observed run turned into a result.

``probe_pipeline`` runs inside the user's process after the first training window (``watch``):
their DataLoader's dataset, transforms, collate and batch size, iterated with no model at their
worker count and at more, for a bounded time — the files as the page cache held them — and
the storage under the files the dataset lists, read cold (a sample). ``build_result`` turns the
observations of every process (each rank under torch.distributed) into a ``SweepResult`` of kind
``run``: one cell per DataLoader window, its own step rate as its compute ceiling, the probes as
its ceilings — so the verdict, advice and report are the sweep's own.
"""

from __future__ import annotations

import os
import random
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from ioprof import __version__
from ioprof.config import LoaderSetting
from ioprof.results import (
    SCHEMA_VERSION,
    CacheInfo,
    CellResult,
    ComputeCeiling,
    DatasetCeilings,
    DatasetInfo,
    DecodeCeiling,
    GpuTelemetry,
    IoCounts,
    ObservedLoader,
    RunInfo,
    ScriptInfo,
    StorageCeiling,
    SweepResult,
)
from ioprof.stats import data_wait_share

# The storage probe after a window reads at most this many of the dataset's files, cold.
PROBE_STORAGE_FILES = 200
PROBE_STORAGE_MAX_S = 10.0


def probe_workers(num_workers: int, cores: int) -> list[int]:
    """The worker counts the user's loader is measured alone at: theirs, and more (twice theirs,
    at least 2, at most two per usable core)."""
    more = min(max(2, 2 * num_workers), 2 * cores)
    return sorted({num_workers, more})


def _loader_alone(loader: Any, workers: int, seconds: float) -> DecodeCeiling:
    """The user's dataset, collate and batch size in a fresh DataLoader, no model: img/s."""
    from torch.utils.data import DataLoader, RandomSampler

    from ioprof.observer import batch_images

    ds = loader.dataset
    kwargs: dict[str, Any] = {"num_workers": workers, "collate_fn": loader.collate_fn, "pin_memory": False,
                              "worker_init_fn": loader.worker_init_fn}  # fmt: skip
    if workers:
        kwargs["multiprocessing_context"] = loader.multiprocessing_context
        kwargs["prefetch_factor"] = loader.prefetch_factor
    if loader.batch_size is not None and hasattr(ds, "__getitem__") and hasattr(ds, "__len__"):
        kwargs |= {"batch_size": loader.batch_size, "drop_last": loader.drop_last,
                   "sampler": RandomSampler(ds, num_samples=10**7)}  # fmt: skip
    else:
        kwargs["batch_sampler" if loader.batch_size is None else "batch_size"] = (
            loader.batch_sampler if loader.batch_size is None else loader.batch_size
        )
    images: list[int] = []
    spans: list[float] = []
    with (
        warnings.catch_warnings()
    ):  # torch's warnings about more workers than cores: ioprof's choice, not the user's
        warnings.simplefilter("ignore", UserWarning)
        probe = DataLoader(ds, **kwargs)
        probe._ioprof_probe = True  # not one of the user's loaders
        it = iter(probe)
    try:
        for _ in range(max(1, workers)):  # the start-up burst
            next(it)
        started = last = time.perf_counter()
        for batch in it:
            now = time.perf_counter()
            images.append(batch_images(batch, loader.batch_size or 1))
            spans.append(now - last)
            last = now
            if now - started >= seconds:
                break
    finally:
        del it
    elapsed = max(sum(spans), 1e-9)
    setting = LoaderSetting.multiprocess(workers) if workers else LoaderSetting.serial()
    return DecodeCeiling(
        loader=setting.kind, workers=setting.workers, img_per_s=sum(images) / elapsed, images=sum(images),
        elapsed_s=elapsed, cache=CacheInfo("as-is", 0.0, True, "", "your loader alone: files as the page cache held them"),
        batch_images=tuple(images), batch_s=tuple(spans), stopped_by="seconds",
    )  # fmt: skip


def probe_pipeline(loader: Any, settings: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The user's loader alone at its worker count and at more, and the storage under its files."""
    from ioprof.machine import usable_cores
    from ioprof.pagecache import filesystem_of, residency
    from ioprof.storage import probe_storage

    files: list[str] = settings["files"]
    sample = random.Random(0).sample(files, min(len(files), PROBE_STORAGE_FILES)) if files else []
    resident = residency(sample) if sample else None
    decode: list[DecodeCeiling] = []
    for w in probe_workers(settings["num_workers"], usable_cores()):
        try:
            d = _loader_alone(loader, w, seconds)
        except Exception as e:  # the user's dataset may not survive a second loader: say so, go on
            return {"decode": decode, "storage": [], "error": f"{type(e).__name__}: {e}"[:300]}
        if resident is not None:
            d = replace(
                d, cache=replace(d.cache, resident_fraction=resident.fraction, method=resident.method)
            )
        decode.append(d)
    storage = []
    if sample:
        fs = filesystem_of(sample[0])
        storage.append(
            probe_storage(
                sample,
                max(1, settings["num_workers"]),
                fs,
                max_seconds=PROBE_STORAGE_MAX_S,
                root=settings["dataset_root"] or os.path.dirname(sample[0]),
            )
        )
    return {"decode": decode, "storage": storage, "error": ""}


# -- observations → result ---------------------------------------------------------------------


def _key(obs: dict[str, Any], loader: dict[str, Any]) -> str:
    base = f"loader {loader['index']}"
    return f"rank {obs['rank']} · {base}" if obs.get("world_size", 1) > 1 else base


def _cell(key: str, loader: dict[str, Any], config: Any) -> CellResult:
    from ioprof.fetched import FetchSnapshot, decide
    from ioprof.pagecache import filesystem_of
    from ioprof.resultfile import from_jsonable

    s = loader["settings"]
    waits, steps, images = loader["waits"], loader["steps"], loader["images"]
    elapsed = sum(waits) + sum(steps)  # pauses left out (evaluation, checkpoints) are not in it
    io = from_jsonable(IoCounts, loader["io"]) if loader.get("io") else IoCounts(0, 0, 0, elapsed)
    cache = CacheInfo("as-is", 0.0, True, "", "the page cache as your script left it")
    fetched = None
    if s["dataset_root"] and loader.get("mount_before") and loader.get("mount_after"):
        fetched = decide(filesystem_of(s["dataset_root"]), cache, read_bytes=io.read_bytes, requested_bytes=io.read_chars,
                         before=from_jsonable(FetchSnapshot, loader["mount_before"]),
                         after=from_jsonable(FetchSnapshot, loader["mount_after"]))  # fmt: skip
    setting = LoaderSetting.multiprocess(s["num_workers"]) if s["num_workers"] else LoaderSetting.serial()
    gpu = (
        from_jsonable(GpuTelemetry, loader["gpu"])
        if loader.get("gpu")
        else GpuTelemetry(False, loader.get("gpu_reason", ""))
    )
    cell = CellResult(
        dataset=key, loader=setting.kind, workers=setting.workers, batch_size=s["batch_size"] or 0,
        warmup_steps=config.warmup_steps + setting.workers, steps=len(steps), images=sum(images), elapsed_s=elapsed,
        img_per_s=sum(images) / elapsed if elapsed > 0 else 0.0, wait_s=tuple(waits), step_s=tuple(steps),
        data_wait_share=data_wait_share(waits, steps), startup_s=0.0, io=io, cache=cache, gpu=gpu,
        stopped_by={"complete": "steps", "partial": "script"}.get(loader["window"], "script"),
        images_per_step=tuple(images), start_method=s["start_method"] if setting.workers else "",
    )  # fmt: skip
    return replace(cell, fetched=fetched) if fetched is not None else cell


def _observed(key: str, obs: dict[str, Any], loader: dict[str, Any]) -> ObservedLoader:
    s = loader["settings"]
    return ObservedLoader(
        key=key, rank=obs["rank"], role=loader["role"], dataset_class=s["dataset_class"], dataset_len=s["dataset_len"],
        dataset_root=s["dataset_root"], num_workers=s["num_workers"], batch_size=s["batch_size"],
        pin_memory=s["pin_memory"], prefetch_factor=s["prefetch_factor"], persistent_workers=s["persistent_workers"],
        drop_last=s["drop_last"], sampler=s["sampler"], start_method=s["start_method"], batches=loader["batches"],
        passes=loader["passes"], window=loader["window"], gaps_left_out=loader["gaps_left_out"],
        optimizer_steps_in_window=loader["optimizer_steps_in_window"], files_known=loader["files_known"],
    )  # fmt: skip


def _step_ceiling(cell: CellResult, device: str) -> ComputeCeiling:
    """The loader's own consumer: the user's step, timed between batches."""
    total = sum(cell.step_s)
    return ComputeCeiling(
        img_per_s=cell.images / total if total > 0 else float("inf"), simulated=False, device=device,
        model="your model", batch_size=cell.batch_size, step_s=cell.step_s,
        label="your training step (the time between batches)",
    )  # fmt: skip


def build_result(
    observations: Sequence[dict[str, Any]],
    *,
    command: str,
    exit_code: int | None,
    ended: str,
    config: Any,
    started: float,
) -> SweepResult:
    """One result from every process's observations (ranks sorted, loaders in first-use order)."""
    from ioprof.machine import machine_info
    from ioprof.resultfile import from_jsonable

    cells, loaders, ceilings, datasets = [], [], [], []
    compute: ComputeCeiling | None = None
    device = next((o.get("device", "") for o in observations if o.get("device")), "")
    for obs in sorted(observations, key=lambda o: o["rank"]):
        for loader in obs["loaders"]:
            if loader["window"] == "none":
                continue
            key = _key(obs, loader)
            cell = _cell(key, loader, config)
            cells.append(cell)
            loaders.append(_observed(key, obs, loader))
            datasets.append(_dataset_info(key, loader))
            step = _step_ceiling(cell, device or "unknown")
            if compute is None and loader["role"] == "training":
                compute = step
            probes = (obs.get("probes") or {}) if obs.get("probed_index") == loader["index"] else {}
            decode = tuple(from_jsonable(DecodeCeiling, d) for d in probes.get("decode", []))
            storage = tuple(from_jsonable(StorageCeiling, s) for s in probes.get("storage", []))
            ceilings.append(DatasetCeilings(key, decode, storage, compute=step))
    ranks = max((o.get("world_size", 1) for o in observations), default=1)
    steps = next(
        (o["optimizer_steps"] for o in sorted(observations, key=lambda o: o["rank"]) if o["loaders"]), 0
    )
    pause = max((o.get("probe_pause_s", 0.0) for o in observations), default=0.0)
    started_at = datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds")
    return SweepResult(
        schema_version=SCHEMA_VERSION,
        run=RunInfo(
            command=command, started_at=started_at, finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            interrupted=ended == "interrupted", device=device or "unknown", device_reason="your script's choice",
            batch_size=cells[0].batch_size if cells else 0, warmup_steps=config.warmup_steps, steps=config.steps,
            seconds=config.seconds, start_method=cells[0].start_method if cells else "", ioprof_version=__version__,
            min_steps=config.steps,
        ),
        machine=machine_info(None, None, "ioprof run samples the GPU only inside your script's window"),
        config={"stages": ["end-to-end"], "cache": "as-is", "warmup_steps": config.warmup_steps, "steps": config.steps,
                "seconds": config.seconds, "probe": config.probe},
        datasets=tuple(datasets), compute=compute, transfer=(), ceilings=tuple(ceilings), cells=tuple(cells),
        kind="run", loaders=tuple(loaders),
        script=ScriptInfo(
            command=command, exit_code=exit_code, ended=ended, ranks=ranks, optimizer_steps=steps,
            warmup_steps=config.warmup_steps, window_steps=config.steps, window_seconds=config.seconds,
            stop_after=getattr(config, "stop_after", False), probed=any(c.decode for c in ceilings), probe_pause_s=pause,
        ),
    )  # fmt: skip


def _dataset_info(key: str, loader: dict[str, Any]) -> DatasetInfo:
    info = loader.get("dataset_info")
    if info:
        return DatasetInfo(**{**info, "label": key})
    s = loader["settings"]
    return DatasetInfo(
        label=key, path=s["dataset_root"], generated=False, files=s["dataset_len"] or 0, total_bytes=0,
        mean_file_bytes=0.0, mean_width_px=0.0, mean_height_px=0.0, bits_per_pixel=0.0, fs_type="", mount_source="",
        classes=0, fs_kind="",
    )  # fmt: skip
