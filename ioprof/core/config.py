"""Frozen configuration objects, built once by the CLI and handed to the runners.

Parsing helpers here raise ``ValueError`` with a message that says what is allowed;
argparse turns that into a usage error (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ioprof.core.presets import GPU_PRESETS, StorageProfile
from ioprof.core.vocab import LoaderKind

LOADERS = ("serial", "multiprocess")
# Loader kinds a result may hold: the two above, and a thread pool (``ioprof whatif``'s alternative).
LOADER_KINDS = (*LOADERS, "threads")


@dataclass(frozen=True, order=True)
class LoaderSetting:
    """One way of feeding the training: the serial loader, or the multiprocess one with N workers.

    The one definition of a setting's key (in results and on the command line) and its label (in
    every output). ``workers`` is ``num_workers``: 0 for the serial loader.
    """

    kind: LoaderKind
    workers: int

    def __post_init__(self) -> None:
        if self.kind not in LOADER_KINDS:
            raise ValueError(f"loader must be one of {', '.join(LOADER_KINDS)}; got {self.kind!r}")
        if (self.kind == "serial") != (self.workers == 0):
            raise ValueError(f"the serial loader has 0 workers, a multiprocess one at least 1; got {self}")

    @classmethod
    def serial(cls) -> LoaderSetting:
        return cls("serial", 0)

    @classmethod
    def multiprocess(cls, workers: int) -> LoaderSetting:
        return cls("multiprocess", workers)

    @property
    def key(self) -> str:
        if self.kind == "threads":
            return f"{self.workers}t"
        return "serial" if self.kind == "serial" else f"{self.workers}w"

    @property
    def label(self) -> str:
        if self.kind == "threads":
            return f"{self.workers} thread{'s' if self.workers != 1 else ''}"
        return "serial (in-process)" if self.kind == "serial" else worker_count(self.workers)

    @property
    def processes(self) -> int:
        """Worker processes it starts (a thread pool runs in the training process)."""
        return self.workers if self.kind == "multiprocess" else 0

    @property
    def concurrency(self) -> int:
        """Processes reading files at once: the training process itself, or the workers."""
        return max(1, self.workers)


def worker_count(workers: int) -> str:
    """How every output names a multiprocess loader's size: "1 worker", "4 workers"."""
    return f"{workers} worker{'s' if workers != 1 else ''}"


def loader_settings(loaders: tuple[str, ...], workers: tuple[int, ...]) -> tuple[LoaderSetting, ...]:
    """The settings a run measures, in the order it measures them: serial first, then by workers."""
    out = [LoaderSetting.serial()] if "serial" in loaders else []
    if "multiprocess" in loaders:
        out += [LoaderSetting.multiprocess(w) for w in workers]
    return tuple(out)


CACHE_REGIMES = ("cold", "warm", "as-is")
START_METHODS = ("fork", "spawn", "forkserver")
MODELS = ("resnet50", "resnet18", "tiny")
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
# "auto": what a tuned trainer uses on the device (see compute.resolve_tuning)
AUTO = "auto"
# What a sweep measures: the stage ceilings, then the end-to-end cells.
STAGES = ("compute", "transfer", "storage", "decode", "end-to-end")
# Stages that read a dataset; the compute and transfer ceilings run on synthetic batches.
DATA_STAGES = ("storage", "decode", "end-to-end")


@dataclass(frozen=True)
class ComputeSpec:
    """Real training on the device, or a simulated step that holds ``sim_img_per_s``."""

    kind: str  # "real" | "sim"
    sim_img_per_s: float | None = None
    preset: str | None = None  # name of the GPU preset the rate came from
    source: str | None = None  # where that figure was published

    @property
    def label(self) -> str:
        if self.kind == "real":
            return "real"
        name = f" ({self.preset})" if self.preset else ""
        rate = self.sim_img_per_s or 0.0
        shown = f"{rate:,.0f}" if rate >= 100 else f"{rate:g}"  # as the reports print a rate
        return f"simulated {shown} img/s{name}"


# Default generated datasets: small, ImageNet-like and large, spanning 4x in side length.
DEFAULT_RESOLUTIONS: tuple[tuple[int, int], ...] = ((256, 192), (500, 375), (1024, 768))
DEFAULT_IMAGES_PER_DATASET = 200
# Cold cells evict each file after reading it, so a small set re-read many times is still read
# cold; the cap keeps first-time generation short on any machine.
MAX_DEFAULT_IMAGES_PER_DATASET = 2000
# DataLoader's default prefetch_factor: batches each worker loads ahead of the training loop.
PREFETCH_FACTOR = 2
# A run stops when more than this share of the samples read could not be decoded.
DEFAULT_MAX_FAILED_SHARE = 0.05
# A measurement runs until its 95 % interval is within ± this share of its value (or its cap).
TARGET_REL_HALF_WIDTH = 0.05
# ... a cell whose input-bound class is decided may stop within ± this: its class and bottleneck
# are what the report's answer rests on, and a rate within ± 10 % changes neither.
DECIDED_REL_HALF_WIDTH = 0.10
# ... but no shorter than this: a window of half a second catches one state of a shared machine
# (repeats of such cells differed by 7.5 % beyond their intervals); seconds average over its moods.
MIN_WINDOW_S = 3.0


@dataclass(frozen=True)
class RunLength:
    """How long each end-to-end cell runs.

    Warm-up steps are run and excluded: ``warmup_steps``, plus ``burst_per_worker`` per loader
    worker, because a multiprocess loader's first batches arrive together after start-up (one per
    worker; on a GPU, whose step takes the second round as fast, every batch they prefetch). Then
    steps are measured until the throughput's 95 % interval is within ± ``target_rel_half_width``
    (after at least ``min_steps``), or ``max_steps`` / ``max_seconds`` is reached. ``fixed``: the
    user asked for exactly ``max_steps`` steps (``--steps``), so the interval does not stop it early.
    """

    batch_size: int
    warmup_steps: int
    min_steps: int
    max_steps: int
    max_seconds: float | None
    target_rel_half_width: float = TARGET_REL_HALF_WIDTH
    decided_rel_half_width: float = DECIDED_REL_HALF_WIDTH
    fixed: bool = False
    min_seconds: float = 0.0  # the interval may stop a window only after this long
    burst_per_worker: int = 1  # batches each worker has ready together at start-up
    drain_warmup: bool = True  # warm-up batches taken without a step (``drained_for``)

    def warmup_for(self, setting: LoaderSetting) -> int:
        """Warm-up steps of one loader setting: the base plus its start-up burst, rounded up to whole
        turns of the workers (one batch each), so that the window starts where a turn does: the loop
        receives a turn's batches together when the step is fast, and a window cut inside a turn
        would count batches that were made before it began."""
        turn = setting.concurrency
        return -(-(self.warmup_steps + self.burst_per_worker * setting.workers) // turn) * turn

    def drained_for(self, setting: LoaderSetting) -> int:
        """The warm-up's leading batches taken without a step, where a step costs real time that
        tells nothing (``drain_warmup``: a CPU's ResNet-50 step, a second or so): all but the base's
        last steps, during which the workers, far faster than the step, fill their prefetch again.
        Where a step costs milliseconds (a GPU's, a simulated one) every batch is stepped: a drained
        warm-up would leave the prefetch empty just as the window opens, and a loader that keeps
        up would wait at its first steps."""
        return self.warmup_for(setting) - self.warmup_steps if setting.workers and self.drain_warmup else 0


# On a CPU ResNet-50 trains at a few img/s: batches of 4 (about 1 s a step on 2 cores) keep the
# warm-up short, and cells are capped. On a GPU, batches of 256; the warm-up is every batch the
# workers prefetch (a GPU step takes the second round as fast as the first) and 3 steps past it
# (cuDNN chose its kernels at the compute ceiling, in the same process; see reports/examples/h200-*).
# A cell stops once its answer is decided: the cap binds only the slowest settings, where 30 s
# holds 8 or more batches of 256 (the serial cells of reports/examples/h200-sweep-resumed).
CPU_RUN_LENGTH = RunLength(batch_size=4, warmup_steps=1, min_steps=5, max_steps=100, max_seconds=10.0)
CUDA_RUN_LENGTH = RunLength(
    batch_size=256,
    warmup_steps=3,
    min_steps=5,
    max_steps=5000,
    max_seconds=30.0,
    min_seconds=MIN_WINDOW_S,
    burst_per_worker=PREFETCH_FACTOR,
    drain_warmup=False,
)
# Simulated compute: a step is a wait, with nothing of its own to warm up, so the warm-up is the
# workers' start-up burst alone (rounded to whole turns, stepped); millisecond steps make the window's
# minimum seconds, not its minimum steps, what holds a cell to a few of the machine's moods.
CPU_SIM_RUN_LENGTH = RunLength(
    batch_size=8,
    warmup_steps=0,
    min_steps=5,
    max_steps=5000,
    max_seconds=15.0,
    min_seconds=MIN_WINDOW_S,
    drain_warmup=False,
)


@dataclass(frozen=True)
class SweepConfig:
    """Everything a sweep needs, decided before anything is measured."""

    workers: tuple[int, ...] = (1, 4, 8)
    loaders: tuple[str, ...] = LOADERS
    resolutions: tuple[tuple[int, int], ...] = DEFAULT_RESOLUTIONS
    data_path: str | None = None
    images_per_dataset: int | None = None  # None: what one cell consumes (see dataset_images)
    batch_size: int | None = None  # None: the device's default (RunLength)
    warmup_steps: int | None = None
    steps: int | None = None
    seconds: float | None = None
    device: str = "auto"
    model: str = "resnet50"
    compute: ComputeSpec = ComputeSpec("real")
    cache: str = "cold"
    storage_profile: StorageProfile | None = None
    crop_px: int = 224
    precision: str = AUTO
    channels_last: bool | None = None  # None: as a tuned trainer on the device (compute.resolve_tuning)
    pin_memory: bool | None = None  # None: pinned on CUDA (torchvision's reference script), not on the CPU
    non_blocking: bool | None = None  # None: as pin_memory (a copy from pageable memory blocks anyway)
    stages: tuple[str, ...] = STAGES  # what to measure; ``probe`` narrows it to one ceiling
    seed: int = 0
    max_failed_share: float = DEFAULT_MAX_FAILED_SHARE
    out_dir: str | None = None
    cache_dir: str | None = None  # where generated datasets are kept; None: the user cache folder
    start_method: str | None = None  # loader workers: fork | spawn | forkserver; None: Python's default
    inside: bool = True  # time each stage inside the loader's workers; read their memory and threads

    @property
    def needs_data(self) -> bool:
        return any(s in DATA_STAGES for s in self.stages)

    def tuned(self, precision: str, channels_last: bool, cuda: bool) -> SweepConfig:
        """This configuration with its "auto" settings decided for the device."""
        pin = cuda if self.pin_memory is None else self.pin_memory
        return replace(
            self,
            precision=precision,
            channels_last=channels_last,
            pin_memory=pin,
            non_blocking=pin if self.non_blocking is None else self.non_blocking,
        )

    def settings(self) -> tuple[LoaderSetting, ...]:
        """The loader settings this run measures."""
        return loader_settings(self.loaders, self.workers)

    def dataset_images(self, device_type: str) -> int:
        """Images per generated dataset: as asked, else about what the longest cell's minimum reads."""
        if self.images_per_dataset is not None:
            return self.images_per_dataset
        run = self.run_length(device_type)
        batches = run.warmup_steps + max(self.workers) + run.min_steps + PREFETCH_FACTOR * max(self.workers)
        return min(max(DEFAULT_IMAGES_PER_DATASET, batches * run.batch_size), MAX_DEFAULT_IMAGES_PER_DATASET)

    def run_length(self, device_type: str) -> RunLength:
        """The run length on ``device_type``, the user's choices over the device's defaults."""
        return run_length_for(
            device_type,
            self.compute,
            batch_size=self.batch_size,
            warmup_steps=self.warmup_steps,
            steps=self.steps,
            seconds=self.seconds,
        )


def run_length_for(
    device_type: str,
    compute: ComputeSpec,
    *,
    batch_size: int | None = None,
    warmup_steps: int | None = None,
    steps: int | None = None,
    seconds: float | None = None,
) -> RunLength:
    """The device's default run length, with what the user set (``--steps N``: exactly N steps)."""
    if device_type == "cuda":
        base = CUDA_RUN_LENGTH
    else:
        base = CPU_SIM_RUN_LENGTH if compute.kind == "sim" else CPU_RUN_LENGTH
    cap = seconds if seconds is not None else (None if steps else base.max_seconds)
    return RunLength(
        batch_size=batch_size or base.batch_size,
        warmup_steps=base.warmup_steps if warmup_steps is None else warmup_steps,
        min_steps=steps or base.min_steps,
        max_steps=steps or base.max_steps,
        max_seconds=cap,
        fixed=steps is not None,
        min_seconds=min(base.min_seconds, cap) if cap is not None else base.min_seconds,
        burst_per_worker=base.burst_per_worker,
        drain_warmup=base.drain_warmup,
    )


# Settings that may differ between an interrupted run and its --resume: they change where
# results go or how long cells run at most, not what a finished cell measured.
RESUMABLE_DIFFERENCES = frozenset({"out_dir", "seconds", "max_failed_share", "cache_dir"})


@dataclass(frozen=True)
class PlaceConfig:
    """``ioprof place``: which locations to measure, and the training they must feed."""

    candidates: tuple[str, ...] = ()
    storage_profiles: tuple[StorageProfile, ...] = ()
    data_path: str | None = None
    workers: tuple[int, ...] = (1, 4, 8)
    epochs: int = 90  # torchvision's ResNet-50 ImageNet recipe
    compute: ComputeSpec = ComputeSpec("real")
    device: str = "auto"
    model: str = "resnet50"
    batch_size: int | None = None
    crop_px: int = 224
    precision: str = AUTO
    channels_last: bool | None = None
    seed: int = 0
    out_dir: str | None = None
    cache_dir: str | None = None
    start_method: str | None = None
    ram_bytes: int | None = None  # RAM the page cache can use on the training machine (None: measured here)


@dataclass(frozen=True)
class RunConfig:
    """``ioprof run``: the user's command, and how long to watch it."""

    command: tuple[str, ...] = ()
    warmup_steps: int = 5
    steps: int = 100
    seconds: float | None = 60.0
    probe: bool = True
    probe_seconds: float = 10.0
    stop_after: bool = False
    out_dir: str | None = None
    inside: bool = True  # time each stage inside the loader's workers; read their memory and threads


# What ``ioprof whatif`` can try, in the order it tries them (``--only`` picks among them; a name
# without its number picks each: ``resized`` is resized-256 and resized-320, ``prefetch`` all three).
WHATIF_ALTERNATIVES = (
    "threads",
    "decode_jpeg",
    "gpu_decode",
    "loose-on-scratch",
    "resized-256",
    "resized-320",
    "shards",
    "more-workers",
    "threads-per-worker-4",
    "prefetch-1",
    "prefetch-4",
    "prefetch-8",
    "in_order",
    "persistent_workers",
    "pin_memory",
    "cache",
)


def whatif_wants(only: tuple[str, ...] | None, name: str) -> bool:
    """Whether ``--only`` asks for the alternative ``name`` (None: every one)."""
    return only is None or any(
        name == o or (name.startswith(f"{o}-") and name[len(o) + 1 :].isdigit()) for o in only
    )


@dataclass(frozen=True)
class WhatifConfig:
    """``ioprof whatif``: the user's pipeline (data, workers, step) and how to try the alternatives."""

    data_path: str | None = None
    workers: int | None = None  # the current multiprocess worker count; None: the usable cores
    batch_size: int | None = None
    device: str = "auto"
    model: str = "resnet50"
    compute: ComputeSpec = ComputeSpec("real")
    crop_px: int = 224
    precision: str = AUTO
    channels_last: bool | None = None
    cache: str = "cold"
    storage_profile: StorageProfile | None = None
    sample_images: int = 240
    seconds: float = 8.0  # per alternative, at most
    scratch_dir: str | None = None  # where copies and shards go (default: the system's temporary folder)
    only: tuple[str, ...] | None = None  # the alternatives to try (``WHATIF_ALTERNATIVES``); None: all
    seed: int = 0
    out_dir: str | None = None
    cache_dir: str | None = None
    start_method: str | None = None


@dataclass(frozen=True)
class ProfileConfig:
    """``ioprof profile``: the model and loader to take apart, and the epoch to predict."""

    data_path: str | None = None
    model: str = "resnet50"
    batch_size: int | None = None
    device: str = "auto"
    crop_px: int = 224
    workers: int = 2
    steps: int = 10  # measured steps per regime (and with the layer hooks)
    epoch_images: int | None = None  # None: the dataset's size
    check_epoch: bool = False  # run one real epoch and compare it with the prediction
    seed: int = 0
    out_dir: str | None = None
    cache_dir: str | None = None
    start_method: str | None = None


# ``ioprof scale``: the page-cache regimes each rank count runs in.
SCALE_REGIMES = ("cold", "warm")


@dataclass(frozen=True)
class ScaleConfig:
    """``ioprof scale``: how many ranks, each with its own loader, one storage under them all.

    The default compute is emulated H100s (MLPerf Storage's question: how many accelerators can
    this host and storage feed); ``--compute real`` trains the model with DDP on one GPU per rank.
    """

    data_path: str | None = None
    ranks: tuple[int, ...] = (1, 2)
    workers: int = 1  # loader workers per rank (0: each rank loads in its own process)
    compute: ComputeSpec = ComputeSpec(
        "sim", GPU_PRESETS["h100"].img_per_s, "h100", GPU_PRESETS["h100"].source
    )
    cache: tuple[str, ...] = SCALE_REGIMES
    device: str = "auto"
    model: str = "resnet50"
    batch_size: int | None = None
    crop_px: int = 224
    steps: int = 30  # measured steps per rank (every rank runs the same count: DDP needs it)
    warmup_steps: int | None = None
    rank_timeout_s: float = 600.0  # the most one rank count may take, start-up included
    seed: int = 0
    out_dir: str | None = None
    cache_dir: str | None = None
    start_method: str | None = None


# ``ioprof devices``: the models of the seed that compared a CPU, one GPU and two GPUs.
DEVICE_MODELS = ("mlp", "lenet5", "lstm", "resnet50", "resnet152")


@dataclass(frozen=True)
class DevicesConfig:
    """``ioprof devices``: models × batch sizes, trained on synthetic input on each device."""

    models: tuple[str, ...] = DEVICE_MODELS
    batch_sizes: tuple[int, ...] = (32, 256)  # per device (per GPU under DDP)
    gpus: int | None = None  # GPUs for the DDP row; None: every visible GPU (when there are 2 or more)
    seconds: float = 30.0  # the most one cell measures; a cell whose steps would take longer is skipped
    seed: int = 0
    out_dir: str | None = None
