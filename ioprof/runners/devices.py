"""``ioprof devices``: each model × batch size trained on synthetic input on the CPU, one GPU, and
N GPUs with DDP under torchrun. Config and session in, result out.

A cell runs a short probe first (two steps at batch 2, doubling while it can afford to:
``predicted_step_s``) and is not measured when its warm-up and minimum steps would take longer
than ``--seconds``; it says so, with the time it would take.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from ioprof.core.config import TARGET_REL_HALF_WIDTH, DevicesConfig
from ioprof.core.resultfile import to_jsonable
from ioprof.core.results import SCHEMA_VERSION
from ioprof.core.results_devices import DeviceCell, DevicesResult
from ioprof.core.stats import LOOKS, Looks, ratio_interval
from ioprof.measure.models import Trainer, device_model, gradient_bytes, parameter_count
from ioprof.measure.session import Progress, Session
from ioprof.runners.torchrun import launch

WARMUP_STEPS = 2
MIN_STEPS = 5
# Millisecond steps: a window at least this long, so that a few lucky steps do not decide a cell.
MIN_WINDOW_S = 1.0
MAX_STEPS = 500
PROBE_BATCH = 2
DDP_LOG_DIR = "logs"


def _setup(device: torch.device, n: int = 1) -> str:
    if device.type == "cpu":
        return "cpu"
    return "1 gpu" if n == 1 else f"{n} gpus"


def predicted_step_s(step_at: Callable[[int], float], batch: int, seconds: float) -> float:
    """A step at ``batch``, from probes at batches doubling from PROBE_BATCH: each probe's time per
    sample scaled to ``batch``. A step has a fixed cost (kernel launches, the optimizer) that a small
    batch's time per sample carries many times over — on a GPU a batch of 2 costs nearly what 256
    does — so the probe doubles while its scaled figure says the cell would not fit ``seconds`` and
    the probes so far and the next (three steps at twice the batch, about six of this one) fit in
    ``seconds``: the figure it stops at is the closest upper bound it could afford."""
    per_step_s = seconds / (WARMUP_STEPS + MIN_STEPS)
    b, spent = min(PROBE_BATCH, batch), 0.0
    while True:
        t = step_at(b)
        spent += 3 * t
        predicted = t / b * batch
        if b >= batch or predicted <= per_step_s or spent + 6 * t > seconds:
            return predicted
        b = min(batch, 2 * b)


def _probe_step(model: torch.nn.Module, spec: Any, device: torch.device, seed: int, batch: int) -> float:
    """One step's time at ``batch`` (the faster of two, after one more to warm up)."""
    probe = Trainer(model, spec, batch, device, seed)
    probe.steps(1)
    return min(probe.steps(1))


def measure_one(model_name: str, batch: int, device: torch.device, seconds: float, seed: int) -> DeviceCell:
    """One model at one batch size on one device."""
    spec = device_model(model_name)
    setup = _setup(device)
    torch.manual_seed(seed)
    model = spec.build().to(device)
    params, grad = parameter_count(model), gradient_bytes(model)
    try:
        step_s = predicted_step_s(partial(_probe_step, model, spec, device, seed), batch, seconds)
        need_s = (WARMUP_STEPS + MIN_STEPS) * step_s
        if need_s > seconds:
            return DeviceCell(
                model_name,
                setup,
                1,
                batch,
                False,
                f"{WARMUP_STEPS + MIN_STEPS} steps would take about {need_s:,.0f} s; raise --seconds to "
                f"{need_s * 1.2:,.0f} to measure it",
                params=params,
                gradient_bytes=grad,
            )
        trainer = Trainer(model, spec, batch, device, seed)
        trainer.steps(WARMUP_STEPS)
        steps: list[float] = []
        t0 = time.perf_counter()
        looks = Looks(MIN_STEPS, min(MIN_WINDOW_S, seconds))
        while len(steps) < MAX_STEPS:
            steps.append(trainer.step())
            if looks.due(len(steps), time.perf_counter() - t0) or time.perf_counter() - t0 > seconds:
                i = ratio_interval([float(batch)] * len(steps), steps, 1, LOOKS)
                took = time.perf_counter() - t0
                if (
                    i.rel_half_width <= TARGET_REL_HALF_WIDTH and took >= min(MIN_WINDOW_S, seconds)
                ) or took > seconds:
                    break
    except torch.OutOfMemoryError:
        return DeviceCell(
            model_name,
            setup,
            1,
            batch,
            False,
            f"out of device memory at batch {batch}",
            params=params,
            gradient_bytes=grad,
        )
    return DeviceCell(model_name, setup, 1, batch, True, "", tuple(steps), batch, params, grad, looks=LOOKS)


def measure_ddp(
    model_name: str,
    batch: int,
    ranks: int,
    *,
    backend: str,
    steps: int,
    workdir: Path,
    seed: int,
    timeout_s: float,
    threads_per_rank: int | None = None,
) -> DeviceCell:
    """The model under DDP on ``ranks`` devices (one rank each, started by torchrun): per step,
    the slowest rank's time, as every rank waits for it in the all-reduce."""
    spec = device_model(model_name)
    model = spec.build()
    params, grad = parameter_count(model), gradient_bytes(model)
    setup = f"{ranks} gpus" if backend == "nccl" else f"cpu × {ranks} ranks"
    cfg = {
        "job": "devices",
        "backend": backend,
        "model": model_name,
        "batch_size": batch,
        "seed": seed,
        "warmup_steps": WARMUP_STEPS,
        "steps": steps,
        "threads_per_rank": threads_per_rank,
        "collective_timeout_s": timeout_s,
    }
    launched = launch(ranks, cfg, workdir, f"{model_name}-b{batch}-{ranks}", timeout_s)
    if not launched.ok:
        return DeviceCell(
            model_name,
            setup,
            ranks,
            batch,
            False,
            f"failed: {launched.reason}",
            params=params,
            gradient_bytes=grad,
        )
    per_step = [max(step) for step in zip(*(r["step_s"] for r in launched.gathered), strict=True)]
    return DeviceCell(model_name, setup, ranks, batch, True, "", tuple(per_step), batch * ranks, params, grad)


def run_devices(config: DevicesConfig, session: Session, out: Path, progress: Progress) -> DevicesResult:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    n = config.gpus if config.gpus is not None else gpus
    cells: list[DeviceCell] = []
    for model_name in config.models:
        for batch in config.batch_sizes:
            cpu = measure_one(model_name, batch, torch.device("cpu"), config.seconds, config.seed)
            cells.append(cpu)
            progress.measured(cpu)
            if gpus == 0:
                cells.append(
                    DeviceCell(model_name, "1 gpu", 1, batch, False, "no CUDA device on this machine")
                )
                cells.append(
                    DeviceCell(
                        model_name,
                        f"{max(n, 2)} gpus",
                        max(n, 2),
                        batch,
                        False,
                        "no CUDA device on this machine",
                    )
                )
                continue
            one = measure_one(model_name, batch, torch.device("cuda:0"), config.seconds, config.seed)
            cells.append(one)
            progress.measured(one)
            if n < 2:
                cells.append(
                    DeviceCell(
                        model_name,
                        "2 gpus",
                        2,
                        batch,
                        False,
                        f"{gpus} GPU on this machine; DDP needs 2 or more",
                    )
                )
                continue
            if not one.measured:
                cells.append(
                    DeviceCell(model_name, f"{n} gpus", n, batch, False, f"as on one GPU: {one.why_not}")
                )
                continue
            mean_s = sum(one.step_s) / len(one.step_s)
            steps = max(MIN_STEPS, min(MAX_STEPS, int(config.seconds / mean_s)))
            multi = measure_ddp(
                model_name,
                batch,
                n,
                backend="nccl",
                steps=steps,
                workdir=out / DDP_LOG_DIR,
                seed=config.seed,
                timeout_s=max(120.0, 4 * config.seconds),
            )
            cells.append(multi)
            progress.measured(multi)
    return DevicesResult(
        SCHEMA_VERSION,
        "devices",
        session.run_info(),
        session.machine,
        to_jsonable(config),
        gpus,
        tuple(cells),
    )
