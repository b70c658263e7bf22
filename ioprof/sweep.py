"""The sweep: stage ceilings, then every dataset × loader × worker count end to end.

Config in, result out. The caller gets a checkpoint after every finished cell (to write
``results.json`` atomically), so an interrupted or crashed sweep keeps what it measured.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from ioprof import __version__
from ioprof.compute import (
    IMAGENET_CLASSES,
    TrainStep,
    make_step,
    probe_compute,
    probe_transfer,
    resolve_device,
    tune,
)
from ioprof.config import ComputeSpec, RunLength, SweepConfig, worker_count
from ioprof.datasets.cache import ensure_datasets
from ioprof.datasets.discover import ImageList, describe, find_images
from ioprof.datasets.synth import DatasetSpec
from ioprof.errors import IoprofError
from ioprof.loader import probe_decode
from ioprof.machine import machine_info
from ioprof.pagecache import FilesystemInfo, filesystem_of
from ioprof.results import (
    SCHEMA_VERSION,
    CacheInfo,
    CellResult,
    ComputeCeiling,
    DatasetCeilings,
    DatasetInfo,
    DecodeCeiling,
    RunInfo,
    SweepResult,
    to_jsonable,
)
from ioprof.storage import EmulatedStorage, probe_storage
from ioprof.telemetry import nvml_for_device, open_gpu_sampler
from ioprof.training import Failures, failed_cell, run_cell

Progress = Callable[[str], None]
# Storage probe: at most this many files per concurrency level (shuffled sample of the dataset).
STORAGE_PROBE_MAX_FILES = 2000
# Decode probe: at least / at most this long per loader setting.
DECODE_PROBE_MIN_S = 1.5
DECODE_PROBE_MAX_S = 20.0


@dataclass(frozen=True)
class Dataset:
    info: DatasetInfo
    images: ImageList
    fs: FilesystemInfo


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def load_datasets(
    data_path: str | None,
    resolutions: Sequence[tuple[int, int]],
    images_per_dataset: int,
    seed: int,
    cache_dir: str | None,
    progress: Progress,
) -> list[Dataset]:
    """The user's dataset (``--data``) or the generated ones at ``resolutions``, described."""
    if data_path:
        images = find_images(data_path)
        info = describe(images, data_path, generated=False, seed=seed)
        return [Dataset(info, images, filesystem_of(images.root))]
    specs = [DatasetSpec(w, h, images_per_dataset, seed=seed) for w, h in resolutions]
    roots = ensure_datasets(specs, Path(cache_dir) if cache_dir else None, progress)
    out = []
    for spec, root in zip(specs, roots, strict=True):
        images = find_images(root)
        out.append(
            Dataset(describe(images, spec.label, generated=True, seed=seed), images, filesystem_of(root))
        )
    return out


def compute_ceiling(
    step: TrainStep, spec: ComputeSpec, model: str, device: torch.device, run: RunLength, crop_px: int
) -> ComputeCeiling:
    """The compute ceiling at the run's batch size, at least two measured steps."""
    return probe_compute(
        step, spec, model, device, run.batch_size, crop_px, run.warmup_steps, max(2, run.steps)
    )


def decode_ceiling(
    paths: Sequence[str],
    labels: Sequence[int],
    crop_px: int,
    loader: str,
    workers: int,
    batch_size: int,
    fs: FilesystemInfo,
    seed: int,
) -> DecodeCeiling:
    """The decode ceiling of one loader setting, within the decode probe's time budget."""
    return probe_decode(
        paths, labels, crop_px, loader, workers, batch_size, fs,
        measured_batches=max(4, 2 * max(1, workers)),
        min_seconds=DECODE_PROBE_MIN_S,
        max_seconds=DECODE_PROBE_MAX_S,
        seed=seed,
    )  # fmt: skip


def _setting(loader: str, workers: int) -> str:
    return "serial loader" if loader == "serial" else worker_count(workers)


def _cell_line(cell: CellResult) -> str:
    setting = _setting(cell.loader, cell.workers)
    if cell.status != "ok":
        return f"{cell.dataset} {setting}: FAILED — {cell.error}"
    return (
        f"{cell.dataset} {setting}: {cell.img_per_s:,.1f} img/s, data wait {cell.data_wait_share:.1%}, "
        f"{cell.steps} steps, start-up {cell.startup_s:.2f} s"
    )


def run_sweep(
    config: SweepConfig,
    datasets: list[Dataset],
    command: str,
    progress: Progress,
    checkpoint: Callable[[SweepResult], None],
    previous: SweepResult | None = None,
) -> SweepResult:
    """Measure everything the config asks for; ``checkpoint`` is called after every cell.

    ``previous``: an interrupted run of the same config, whose finished cells and ceilings are kept.
    """
    extra_warnings: list[str] = []
    started_at = _now()
    device, device_reason = resolve_device(config.device)
    config = tune(config, device)
    run = config.run_length(device.type)
    progress(
        f"compute device: {device} ({device_reason}); batch {run.batch_size}, "
        f"{run.warmup_steps} warm-up + up to {run.steps} measured steps per cell"
    )

    gpu_name, nvml = nvml_for_device(device)
    machine = machine_info(gpu_name, nvml.driver or None, nvml.reason or None)
    if nvml.reason:
        progress(f"GPU telemetry unavailable: {nvml.reason}")

    num_classes = max((len(d.images.classes) for d in datasets), default=IMAGENET_CLASSES)
    needs_step = bool({"compute", "end-to-end"} & set(config.stages))
    step = (
        make_step(
            config.compute,
            config.model,
            device,
            num_classes,
            bool(config.non_blocking),
            config.precision,
            bool(config.channels_last),
        )
        if needs_step
        else None
    )
    emulated = EmulatedStorage(config.storage_profile) if config.storage_profile else None

    config_dict = asdict(config)
    run_info = RunInfo(
        command=command,
        started_at=started_at,
        finished_at="",
        interrupted=False,
        device=str(device),
        device_reason=device_reason,
        batch_size=run.batch_size,
        warmup_steps=run.warmup_steps,
        steps=run.steps,
        seconds=run.seconds,
        start_method=multiprocessing.get_start_method(),
        ioprof_version=__version__,
    )
    result = SweepResult(
        schema_version=SCHEMA_VERSION,
        run=run_info,
        machine=machine,
        config=to_jsonable(config_dict),
        datasets=tuple(d.info for d in datasets),
        compute=None,
        transfer=(),
        ceilings=(),
        cells=(),
    )
    failures = Failures()
    # --resume: what a previous run of the same config already measured is kept, not redone
    done_cells = {c.key: c for c in previous.cells if c.status == "ok"} if previous else {}
    old_ceilings = {c.dataset: c for c in previous.ceilings} if previous else {}
    cells: list[CellResult] = []
    ceilings: list[DatasetCeilings] = []
    compute: ComputeCeiling | None = previous.compute if previous else None
    interrupted = False
    loader_settings = [("serial", 0)] if "serial" in config.loaders else []
    if "multiprocess" in config.loaders:
        loader_settings += [("multiprocess", w) for w in config.workers]
    total = len(datasets) * len(loader_settings) if "end-to-end" in config.stages else 0
    if previous:
        progress(f"resuming: {len(done_cells)} finished cell(s) kept from the interrupted run")
    try:
        if step is not None and "compute" in config.stages and compute is None:
            progress("measuring the compute ceiling (synthetic batches on the device)…")
            compute = compute_ceiling(step, config.compute, config.model, device, run, config.crop_px)
            progress(f"compute ceiling: {compute.img_per_s:,.1f} img/s ({compute.label})")
        transfer = (
            tuple(probe_transfer(device, run.batch_size, config.crop_px))
            if "transfer" in config.stages
            else ()
        )
        result = replace(result, compute=compute, transfer=transfer)
        checkpoint(result)
        done = 0
        for ds in datasets:
            paths = list(ds.images.paths)
            labels = list(ds.images.labels)
            kept = old_ceilings.get(ds.info.label)
            storage = list(kept.storage) if kept else []
            decode = list(kept.decode) if kept else []
            if "storage" in config.stages and not storage:
                for conc in sorted({1, *[w for _, w in loader_settings if w > 0]}):
                    s = probe_storage(
                        paths, conc, ds.fs, "cold", emulated, STORAGE_PROBE_MAX_FILES, config.seed
                    )
                    storage.append(s)
                    label = f" (emulated {s.emulated})" if s.emulated else ""
                    progress(
                        f"{ds.info.label} storage{label}, {conc} reader(s): {s.read_mb_per_s:,.1f} MB/s, "
                        f"{s.files_per_s:,.0f} files/s, cold {'verified' if s.cache.verified else 'NOT verified'}"
                    )
            if "decode" in config.stages and not decode:
                for loader, w in loader_settings:
                    setting = _setting(loader, w)
                    try:
                        d = decode_ceiling(
                            paths, labels, config.crop_px, loader, w, run.batch_size, ds.fs, config.seed
                        )
                    except RuntimeError as e:  # a loader worker died: no ceiling for this setting
                        extra_warnings.append(
                            f"{ds.info.label} decode ceiling, {setting}: failed — {_first_line(e)}"
                        )
                        progress(extra_warnings[-1])
                        continue
                    decode.append(d)
                    progress(
                        f"{ds.info.label} decode ceiling, {setting}: {d.img_per_s:,.1f} img/s (from RAM)"
                    )
            if storage or decode:
                ceilings.append(DatasetCeilings(ds.info.label, tuple(decode), tuple(storage)))
                result = replace(result, ceilings=tuple(ceilings))
            for loader, w in loader_settings if "end-to-end" in config.stages else []:
                assert step is not None  # built whenever end-to-end cells are asked for
                done += 1
                setting = _setting(loader, w)
                key = (ds.info.label, loader, 0 if loader == "serial" else w)
                if key in done_cells:
                    cells.append(done_cells[key])
                    progress(f"[{done}/{total}] {_cell_line(done_cells[key])} (kept from the earlier run)")
                    continue
                progress(f"[{done}/{total}] {ds.info.label} {setting}: measuring…")
                t0 = time.perf_counter()
                try:
                    cell = run_cell(
                        ds.info.label,
                        paths,
                        labels,
                        loader,
                        w,
                        run,
                        step,
                        config.crop_px,
                        config.cache,
                        ds.fs,
                        open_gpu_sampler(nvml),
                        failures,
                        emulated,
                        bool(config.pin_memory),
                        config.seed,
                    )
                except torch.cuda.OutOfMemoryError:
                    cell = failed_cell(
                        ds.info.label,
                        loader,
                        w,
                        run,
                        _no_cache(config.cache),
                        f"CUDA out of memory at batch size {run.batch_size}; "
                        f"try --batch-size {max(1, run.batch_size // 2)}",
                    )
                except RuntimeError as e:  # a loader worker died (killed, segfault, out of memory)
                    cell = failed_cell(ds.info.label, loader, w, run, _no_cache(config.cache), _first_line(e))
                cells.append(cell)
                progress(f"[{done}/{total}] {_cell_line(cell)} ({time.perf_counter() - t0:.1f} s)")
                result = replace(result, cells=tuple(cells), warnings=_warnings(failures, extra_warnings))
                checkpoint(result)
                _check_failures(failures, cells, config.max_failed_share, config.data_path)
    except KeyboardInterrupt:
        interrupted = True
        progress("interrupted: keeping the cells that finished")
    return replace(
        result,
        run=replace(result.run, finished_at=_now(), interrupted=interrupted),
        cells=tuple(cells),
        ceilings=tuple(ceilings),
        warnings=_warnings(failures, extra_warnings),
    )


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _no_cache(regime: str) -> CacheInfo:
    return CacheInfo(regime, 0.0, False, "", "cell failed before the cache was prepared")


def _warnings(failures: Failures, extra: list[str]) -> tuple[str, ...]:
    out = list(extra)
    if failures.count:
        shown = "; ".join(f"{p}: {r}" for p, r in failures.first[:5])
        out.append(f"{failures.count} sample(s) could not be decoded and were skipped (first: {shown})")
    if failures.converted:
        out.append(
            f"{failures.converted} sample(s) were not RGB (CMYK, grayscale, palette…) and were converted"
        )
    return tuple(out)


def _check_failures(
    failures: Failures, cells: list[CellResult], max_share: float, data_path: str | None
) -> None:
    read = sum(c.images for c in cells) + failures.count
    if read and failures.count / read > max_share:
        raise IoprofError(
            f"{failures.count} of {read} samples could not be decoded, more than --max-failed-share "
            f"{max_share:g}; fix or remove the files listed in the report of {data_path or 'the dataset'}, "
            "or raise --max-failed-share"
        )
