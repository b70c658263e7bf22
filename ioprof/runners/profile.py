"""``ioprof profile``: one training step taken apart, on the real loader and model, and an epoch
predicted from it (and, when asked, checked against a real epoch).

Config and session in, result out; ``measure`` takes any model, so a test can plant a slow layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ioprof.core.config import LoaderSetting, ProfileConfig
from ioprof.core.resultfile import to_jsonable
from ioprof.core.results import SCHEMA_VERSION
from ioprof.core.results_profile import MeasuredEpoch, ProfileResult
from ioprof.datasets.dataset import Dataset
from ioprof.host.machine import memory_for_cache
from ioprof.host.pagecache import prepare
from ioprof.measure.layers import LayerHooks, StepRunner, phase_times, trace
from ioprof.measure.loader import make_loader, start_loader
from ioprof.measure.session import Progress, Session, put_back

TRACE_FILE = "trace.json"
# Plain and hooked steps alternate in blocks of this many.
BLOCK = 2
TRACE_STEPS = 3
# Later epochs are predicted warm when the dataset takes at most this share of free RAM.
WARM_RAM_SHARE = 0.8


@dataclass(frozen=True)
class Measured:
    """What ``measure`` returns: everything of a ProfileResult but the run and machine records."""

    startup_s: float
    cold: Any
    warm: Any
    hooked: Any
    layers: Any
    operators: Any
    measured_epoch: MeasuredEpoch | None


def _steps(
    runner: StepRunner, it: Any, n: int, hooks: LayerHooks | None = None
) -> list[tuple[dict[str, float], int]]:
    out: list[tuple[dict[str, float], int]] = []
    while len(out) < n:
        got = runner.step(it, hooks)
        if got is not None:
            out.append(got)
    return out


def _loader(
    dataset: Dataset,
    setting: LoaderSetting,
    crop: int,
    batch: int,
    samples: int,
    regime: str,
    seed: int,
    start_method: str | None,
) -> Any:
    cache = prepare(dataset.images.paths, regime, dataset.fs, dataset.evicted)
    return make_loader(
        dataset.images.paths,
        dataset.images.labels,
        setting=setting,
        crop_px=crop,
        batch_size=batch,
        num_samples=samples,
        seed=seed,
        evict_after_read=cache.evict_after_read,
        start_method=start_method,
    )


def _epoch(
    runner: StepRunner,
    dataset: Dataset,
    setting: LoaderSetting,
    crop: int,
    batch: int,
    seed: int,
    start_method: str | None,
) -> MeasuredEpoch:
    """One real epoch from cold: every file once, the whole training loop, timed end to end."""
    files = len(dataset.images.paths)
    dl = _loader(dataset, setting, crop, batch, files, "cold", seed + 1, start_method)
    t0 = time.perf_counter()
    steps = images = 0
    it = start_loader(dl)
    while True:
        try:
            got = runner.step(it)
        except StopIteration:
            break
        if got is not None:
            steps, images = steps + 1, images + got[1]
    return MeasuredEpoch(images=images, steps=steps, seconds=time.perf_counter() - t0, regime="cold")


def measure(
    model: nn.Module,
    dataset: Dataset,
    *,
    device: torch.device,
    setting: LoaderSetting,
    batch_size: int,
    crop_px: int,
    steps: int,
    trace_path: Path,
    check_epoch: bool = False,
    seed: int = 0,
    start_method: str | None = None,
    progress: Callable[[str], None] = print,
) -> Measured:
    """Phases cold, with the layer hooks, and warm; a torch.profiler trace; optionally a real epoch."""
    runner = StepRunner(model.to(device).train(), device, non_blocking=device.type == "cuda")
    big = 10**7
    progress(f"profiling {steps} steps from cold storage, then {steps} with per-layer hooks…")
    it = start_loader(_loader(dataset, setting, crop_px, batch_size, big, "cold", seed, start_method))
    first = _steps(runner, it, 1)[0]
    _steps(runner, it, max(2, setting.workers))  # past the start-up burst
    # plain and hooked steps in turn, so that the hooks' cost is not confused with the machine's drift
    plain: list[tuple[dict[str, float], int]] = []
    timed: list[tuple[dict[str, float], int]] = []
    hooks = LayerHooks(runner.model, runner.clock)
    hooks.remove()
    while len(plain) < steps:
        plain += _steps(runner, it, BLOCK)
        hooks.attach()
        timed += _steps(runner, it, BLOCK, hooks)
        hooks.remove()
    cold, hooked = phase_times(plain), phase_times(timed)
    del it
    warm = None
    # later epochs come from RAM only where the page cache can hold the data and the filesystem keeps
    # read pages (sshfs drops them at every open: every epoch reads the storage there)
    if (
        dataset.info.keeps_pages is not False
        and dataset.info.listed_bytes <= WARM_RAM_SHARE * memory_for_cache()[0]
    ):
        progress(f"profiling {steps} steps with the files in RAM (later epochs)…")
        it = start_loader(_loader(dataset, setting, crop_px, batch_size, big, "warm", seed, start_method))
        _steps(runner, it, max(2, setting.workers) + 1)
        warm = phase_times(_steps(runner, it, steps))
        ops = trace(lambda n: _steps(runner, it, n), TRACE_STEPS, trace_path, device.type == "cuda")
        del it
    else:
        it = start_loader(_loader(dataset, setting, crop_px, batch_size, big, "cold", seed, start_method))
        ops = trace(lambda n: _steps(runner, it, n), TRACE_STEPS, trace_path, device.type == "cuda")
        del it
    compute = sum(hooked.compute_s()) / max(1, len(hooked.compute_s()))
    epoch = None
    if check_epoch:
        progress(
            f"running one real epoch ({len(dataset.images.paths)} images, cold) to check the prediction…"
        )
        epoch = _epoch(runner, dataset, setting, crop_px, batch_size, seed, start_method)
    return Measured(first[0]["data_wait"], cold, warm, hooked, hooks.results(compute), ops, epoch)


def precision_words(device: torch.device) -> str:
    """The arithmetic the profiled step ran in, as PyTorch's flags left it (no autocast here): on
    an H100 its compute was 1,870 img/s against the sweep's tuned 3,982 and strict fp32's 990, and
    the report did not say why."""
    if device.type != "cuda":
        return "fp32, no autocast, NCHW (the sweep's compute ceiling, by default, trains channels-last)"
    conv = "on" if torch.backends.cudnn.allow_tf32 else "off"
    matmul = "on" if torch.backends.cuda.matmul.allow_tf32 else "off"
    return (
        f"fp32, no autocast: PyTorch's defaults — TF32 convolutions {conv}, TF32 matmuls {matmul} "
        "(the sweep's compute ceiling, by default, trains as a tuned trainer does: autocast, channels-last)"
    )


def run_profile(
    config: ProfileConfig, session: Session, dataset: Dataset, out: Path, progress: Progress
) -> ProfileResult:
    from ioprof.measure.compute import build_model

    setting = LoaderSetting.multiprocess(config.workers) if config.workers else LoaderSetting.serial()
    model = build_model(config.model, max(len(dataset.images.classes), 2))
    since = time.perf_counter()
    m = measure(
        model,
        dataset,
        device=session.device,
        setting=setting,
        batch_size=session.run.batch_size,
        crop_px=config.crop_px,
        steps=config.steps,
        trace_path=out / TRACE_FILE,
        check_epoch=config.check_epoch,
        seed=config.seed,
        start_method=config.start_method,
        progress=progress,
    )
    back = put_back(dataset.evicted, since, progress)
    return ProfileResult(
        schema_version=SCHEMA_VERSION,
        kind="profile",
        run=session.run_info(read_back=back),
        machine=session.machine,
        config={**to_jsonable(asdict(config)), "precision": precision_words(session.device)},
        dataset=dataset.info,
        setting=setting.label,
        batch_size=session.run.batch_size,
        epoch_images=config.epoch_images or dataset.info.listed_files,
        startup_s=m.startup_s,
        cold=m.cold,
        warm=m.warm,
        hooked=m.hooked,
        layers=m.layers,
        operators=m.operators,
        trace_file=TRACE_FILE,
        measured_epoch=m.measured_epoch,
    )
