"""The training step under test: real (torchvision model, SGD, cross-entropy) or simulated,
and the compute ceiling: steps on synthetic batches that already sit on the device."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol, overload

import torch
from torch import nn
from torchvision import models

from ioprof.core.config import AUTO, PRECISIONS, TARGET_REL_HALF_WIDTH, ComputeSpec, PlaceConfig, SweepConfig
from ioprof.core.errors import IoprofError
from ioprof.core.results import ComputeCeiling, TransferCeiling
from ioprof.core.stats import MIN_BATCHES, Looks, ratio_interval, transient_start
from ioprof.measure.steptiming import StepEvents, resolve

IMAGENET_CLASSES = 1000
OVERSHOOT_LEARNING_RATE = 0.2
# A fresh model's first steps are slow (allocator growth, oneDNN primitive caches, cuDNN autotuning):
# seen here, ResNet-50 on the CPU takes 2.0 s, then 1.9 s, then settles near 1.2 s per batch of 8.
COMPUTE_MIN_WARMUP_STEPS = 3


def build_model(name: str, num_classes: int) -> nn.Module:
    """torchvision's ResNets, untrained; ``tiny`` is a few-layer CNN for tests on small CPUs."""
    if name == "resnet50":
        return models.resnet50(weights=None, num_classes=num_classes)
    if name == "resnet18":
        return models.resnet18(weights=None, num_classes=num_classes)
    if name == "tiny":
        return nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, num_classes),
        )
    raise IoprofError(f"--model {name}: unknown; use resnet50, resnet18 or tiny")


class TrainStep(Protocol):
    simulated: bool
    label: str

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> StepEvents | None:
        """Run one step. On CUDA the work is only enqueued (no synchronization, as in a real
        training loop) and the step's CUDA events are returned; elsewhere it runs to the end."""

    def mark(self) -> Any | None:
        """An event recorded on the step's stream now (CUDA), else None."""

    def drain(self) -> None:
        """Wait until every step enqueued so far has finished (CUDA); a no-op elsewhere."""


def resolve_tuning(precision: str, channels_last: bool | None, device: torch.device) -> tuple[str, bool]:
    """Precision and memory format, with "auto" (and None) decided for the device.

    On CUDA a tuned trainer: mixed precision (bf16 where the GPU has it, else fp16 with a
    gradient scaler) and channels-last, as in the published ResNet-50 figures the compute
    ceiling is held against (NVIDIA DeepLearningExamples resnet50v1.5: AMP, NHWC). A verdict of
    "input-bound" against a naive fp32 trainer would blame the loader for a slow model.
    On the CPU: fp32 and channels-last too — oneDNN's own path for convolutions (Intel's
    guidance: NHWC "much better performance than NCHW" on CPUs); ResNet-50 trains 14 % faster in
    it on the project's 2-core CPUs (benchmarks/bench_cpu_memory_format.py, rounds alternated).
    """
    cuda = device.type == "cuda"
    if precision == AUTO:
        # bf16 runs natively from compute capability 8.0 (Ampere); is_bf16_supported() also counts
        # emulation (a V100 would "support" it, slowly)
        precision = (
            ("bf16" if torch.cuda.get_device_capability(device)[0] >= 8 else "fp16") if cuda else "fp32"
        )
    return precision, True if channels_last is None else channels_last


@overload
def tune(config: SweepConfig, device: torch.device) -> SweepConfig: ...
@overload
def tune(config: PlaceConfig, device: torch.device) -> PlaceConfig: ...
def tune(config: SweepConfig | PlaceConfig, device: torch.device) -> SweepConfig | PlaceConfig:
    """``config`` with its "auto" training settings decided for ``device`` (see resolve_tuning)."""
    precision, channels_last = resolve_tuning(config.precision, config.channels_last, device)
    if isinstance(config, SweepConfig):
        return config.tuned(precision, channels_last, device.type == "cuda")
    return replace(config, precision=precision, channels_last=channels_last)


def check_precision(precision: str, device: torch.device) -> None:
    """Refuse a precision the device cannot run, naming what to use instead."""
    if precision not in PRECISIONS:
        raise IoprofError(f"--precision {precision}: use one of {', '.join(PRECISIONS)}")
    if precision in ("tf32", "fp16") and device.type != "cuda":
        raise IoprofError(f"--precision {precision} needs a CUDA device; on the CPU use fp32 or bf16")


class RealTrainStep:
    """SGD with momentum on cross-entropy, as in torchvision's ImageNet reference script.

    ``precision``: fp32; tf32 (fp32 with TF32 matmuls and convolutions, CUDA only); bf16 or fp16
    autocast (fp16 with a gradient scaler, CUDA only). ``channels_last``: NHWC memory format.
    """

    simulated = False

    def __init__(
        self,
        model_name: str,
        device: torch.device,
        num_classes: int,
        non_blocking: bool,
        precision: str = "fp32",
        channels_last: bool = False,
    ) -> None:
        check_precision(precision, device)
        self.device = device
        self.non_blocking = non_blocking
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.model = (
            build_model(model_name, num_classes).to(device).to(memory_format=self.memory_format).train()
        )
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        self.loss_fn = nn.CrossEntropyLoss()
        self.autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
        if device.type == "cuda":
            tf32 = precision == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cudnn.benchmark = True
        layout = ", channels-last" if channels_last else ""
        self.label = f"real {model_name} on {device}, {precision}{layout}"

    def mark(self) -> Any | None:
        if self.device.type != "cuda":
            return None
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def drain(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> StepEvents | None:
        copy_start = self.mark()
        x = images.to(self.device, non_blocking=self.non_blocking, memory_format=self.memory_format)
        y = labels.to(self.device, non_blocking=self.non_blocking)
        copy_end = self.mark()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(
            self.device.type, dtype=self.autocast_dtype, enabled=self.autocast_dtype is not None
        ):
            loss = self.loss_fn(self.model(x), y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        step_end = self.mark()
        if copy_start is None or copy_end is None or step_end is None:
            return None
        return StepEvents(copy_start, copy_end, step_end)


class SimulatedStep:
    """A step that takes exactly as long as a GPU at ``img_per_s`` would (DLIO, MLPerf Storage)."""

    simulated = True

    def __init__(
        self,
        spec: ComputeSpec,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        assert spec.kind == "sim" and spec.sim_img_per_s
        self.img_per_s = spec.sim_img_per_s
        self.clock = clock
        self.sleep = sleep
        self.label = spec.label
        self._overshoot_s = self._calibrate()

    def _calibrate(self, sleeps: int = 20, sleep_s: float = 0.001) -> float:
        """Median lateness of ``sleep`` here, so that the first steps already hold the rate."""
        late = []
        for _ in range(sleeps):
            t0 = self.clock()
            self.sleep(sleep_s)
            late.append(self.clock() - t0 - sleep_s)
        return max(0.0, sorted(late)[len(late) // 2])

    def mark(self) -> None:
        return None

    def drain(self) -> None:
        return None

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        # time.sleep wakes late (≈ 50 µs here, 2 % of a 2.9 ms H100 step) and spinning would
        # steal a core from the loader: learn the overshoot as it runs and sleep that much less,
        # so that the rate holds on average.
        target = images.shape[0] / self.img_per_s
        start = self.clock()
        wait = target - self._overshoot_s
        if wait > 0:
            self.sleep(wait)
        took = self.clock() - start
        self._overshoot_s += OVERSHOOT_LEARNING_RATE * (took - target)
        self._overshoot_s = min(max(self._overshoot_s, 0.0), target / 2)


def make_step(
    spec: ComputeSpec,
    device: torch.device,
    *,
    model: str,
    num_classes: int,
    non_blocking: bool,
    precision: str = "fp32",
    channels_last: bool = False,
) -> TrainStep:
    """The training step a run measures: simulated at ``spec``'s rate, or the real model."""
    if spec.kind == "sim":
        return SimulatedStep(spec)
    return RealTrainStep(
        model, device, max(num_classes, IMAGENET_CLASSES), non_blocking, precision, channels_last
    )


# The compute ceiling: at least this many measured steps, then until its interval is within ±5 %
# or this long; on CUDA (steps only enqueued, timed afterwards by events) a fixed count.
COMPUTE_MIN_STEPS = 5
COMPUTE_MIN_S = 0.5  # the first look comes after this long (and COMPUTE_MIN_STEPS)
COMPUTE_MAX_S = 20.0
COMPUTE_CUDA_STEPS = 50


def probe_compute(
    step: TrainStep,
    spec: ComputeSpec,
    model_name: str,
    device: torch.device,
    *,
    batch_size: int,
    crop_px: int,
    warmup_steps: int,
    min_steps: int = COMPUTE_MIN_STEPS,
    max_seconds: float = COMPUTE_MAX_S,
    clock: Callable[[], float] = time.perf_counter,
    target: float = TARGET_REL_HALF_WIDTH,
) -> ComputeCeiling:
    """Img/s of the step alone, on a synthetic batch already on the device, until its interval is
    within ± ``target`` (or its cap).

    On CUDA the steps run back to back with no synchronization between them, as a tuned trainer
    runs them, and are timed by CUDA events. At least ``COMPUTE_MIN_WARMUP_STEPS`` warm-up steps
    run first, whatever is asked. The batch is already in the step's memory format.
    """
    warmup_steps = max(warmup_steps, COMPUTE_MIN_WARMUP_STEPS)
    gen = torch.Generator(device="cpu").manual_seed(0)
    memory_format = getattr(step, "memory_format", torch.contiguous_format)
    images = torch.randn(batch_size, 3, crop_px, crop_px, generator=gen).to(
        device, memory_format=memory_format
    )
    labels = torch.randint(0, IMAGENET_CLASSES, (batch_size,), generator=gen).to(device)
    times: list[float] = []
    events: list[StepEvents] = []
    looks = Looks(min_steps, COMPUTE_MIN_S, cap_s=max_seconds)
    start = None
    try:
        for _ in range(warmup_steps):
            step(images, labels)
        step.drain()
        start = step.mark()
        began = clock()
        while True:
            t0 = clock()
            marks = step(images, labels)
            times.append(clock() - t0)
            if marks is not None:
                events.append(marks)
            if _compute_done(
                times, marks is not None, looks, clock() - began, max_seconds, batch_size, target
            ):
                break
        step.drain()
    except torch.cuda.OutOfMemoryError:
        del images, labels
        fits = largest_fitting_batch(step, batch_size, crop_px, device)
        hint = f"batch size {fits} fits: use --batch-size {fits}" if fits else "not even batch size 1 fits"
        raise IoprofError(f"--batch-size {batch_size}: CUDA out of memory on {device}; {hint}") from None
    if start is not None and len(events) == len(times):
        # on CUDA the host only enqueued the steps: their times are on the GPU's clock, step end
        # to step end (the data are already on the device, so nothing else can stall it)
        times = resolve(start, events, [0.0] * len(events)).slot_s()
    cut = _startup(times, batch_size)
    times = times[cut:]
    total = sum(times)
    return ComputeCeiling(
        img_per_s=batch_size * len(times) / total if total > 0 else float("inf"),
        simulated=step.simulated,
        device=str(device),
        model=model_name if not step.simulated else "simulated",
        batch_size=batch_size,
        step_s=tuple(times),
        label=step.label,
        source=spec.source or "",
        looks=1 if step.simulated or events else looks.count,
        startup_steps=cut,
    )


def _startup(times: list[float], batch_size: int) -> int:
    """How many of the first measured steps still ran at a fresh model's start-up pace, past the
    warm-up steps: MSER-5's cut, where they differ from the rest beyond chance
    (``stats.transient_start``). On a CPU ResNet-50's steps settle over
    its first several seconds (its allocator, oneDNN's caches, pages first touched), however many
    a fixed warm-up took; a ceiling over them sits below the pace every later step keeps."""
    return transient_start([float(batch_size)] * len(times), times)


def _compute_done(
    times: list[float],
    queued: bool,
    looks: Looks,
    spent_s: float,
    max_seconds: float,
    batch_size: int,
    target: float = TARGET_REL_HALF_WIDTH,
) -> bool:
    """Whether the compute ceiling has steps enough: a fixed count when steps are only enqueued
    (CUDA), else an interval within ± ``target`` at one of its looks, or the time cap."""
    n = len(times)
    if queued:
        return n >= COMPUTE_CUDA_STEPS
    if spent_s >= max_seconds:
        return True
    if not looks.due(n, spent_s):
        return False
    steady = times[_startup(times, batch_size) :]
    interval = ratio_interval([float(batch_size)] * len(steady), steady, 1, looks.count)
    return interval.batches >= MIN_BATCHES and interval.rel_half_width <= target


def largest_fitting_batch(step: TrainStep, batch_size: int, crop_px: int, device: torch.device) -> int | None:
    """Halve the batch size until one training step fits in device memory; None if none does."""
    b = batch_size // 2
    while b >= 1:
        if device.type == "cuda":
            torch.cuda.empty_cache()
        try:
            step(
                torch.randn(b, 3, crop_px, crop_px, device=device),
                torch.zeros(b, dtype=torch.long, device=device),
            )
            return b
        except torch.cuda.OutOfMemoryError:
            b //= 2
    return None


def resolve_device(requested: str) -> tuple[torch.device, str]:
    """The device to train on, and why it was chosen (said plainly in the output)."""
    available = torch.cuda.is_available()
    if requested == "auto":
        if available:
            torch.cuda.set_device(0)
            return torch.device("cuda:0"), "--device auto: CUDA is available"
        return torch.device("cpu"), "--device auto: torch sees no CUDA device"
    if requested == "cpu":
        return torch.device("cpu"), "--device cpu"
    if not available:
        raise IoprofError(
            f"--device {requested}: torch sees no CUDA device on this machine; use --device cpu or auto"
        )
    dev = torch.device(requested if ":" in requested else "cuda:0")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise IoprofError(
            f"--device {requested}: only {torch.cuda.device_count()} CUDA device(s) visible; use an index below that"
        )
    # torch's current device from here on: default streams, CUDA events and the loader's pinned
    # memory all follow it, so --device cuda:1 times cuda:1's work, not cuda:0's
    torch.cuda.set_device(dev)
    return dev, f"--device {requested}"


def probe_transfer(
    device: torch.device, batch_size: int, crop_px: int, repeats: int = 10
) -> list[TransferCeiling]:
    """Host-to-device copy of one float32 batch, pinned and not (CUDA only), timed with CUDA events."""
    if device.type != "cuda":
        return []
    out = []
    host = torch.randn(batch_size, 3, crop_px, crop_px)
    for pinned in (False, True):
        src = host.pin_memory() if pinned else host
        dst = torch.empty_like(src, device=device)
        dst.copy_(src, non_blocking=pinned)  # warm-up
        torch.cuda.synchronize(device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            dst.copy_(src, non_blocking=pinned)
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / repeats
        out.append(
            TransferCeiling(
                pinned=pinned,
                gb_per_s=src.numel() * src.element_size() / 1e9 / seconds,
                img_per_s=batch_size / seconds,
                batch_size=batch_size,
            )
        )
    return out
