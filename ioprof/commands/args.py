"""The command-line options, declared once each, in groups a subcommand picks from.

Every option's destination is the name of the config field it sets, and its default is left to
the config dataclass (``argparse.SUPPRESS``): a default is stated in one place only, and the help
text reads it from there. ``config_from`` turns a parsed Namespace into a config; it is the one
place a Namespace is unpacked, and the Namespace travels no further.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ioprof.commands.values import (
    non_negative_int,
    parse_compute,
    parse_device,
    parse_loaders,
    parse_positive_int_list,
    parse_resolutions,
    parse_storage_profile,
    positive_float,
    positive_int,
    share,
)
from ioprof.core.config import (
    AUTO,
    CACHE_REGIMES,
    CPU_RUN_LENGTH,
    CPU_SIM_RUN_LENGTH,
    CUDA_RUN_LENGTH,
    DECIDED_REL_HALF_WIDTH,
    DEFAULT_RESOLUTIONS,
    MAX_DEFAULT_IMAGES_PER_DATASET,
    MODELS,
    PRECISIONS,
    START_METHODS,
    TARGET_REL_HALF_WIDTH,
    RunLength,
    SweepConfig,
)
from ioprof.core.presets import GPU_PRESETS, STORAGE_PROFILES

T = TypeVar("T")
S = argparse.SUPPRESS
_DEFAULTS = SweepConfig()


def typed(fn: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """Turn a parser's ValueError into argparse's usage error (exit 2), keeping its message."""

    def parse(text: str) -> Any:
        try:
            return fn(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = name
    return parse


def _res(res: tuple[tuple[int, int], ...]) -> str:
    return ",".join(f"{w}x{h}" for w, h in res)


DATA_HELP = (
    "your own data, only read: an ImageFolder tree or flat folder of images; for sweep, probe, place and "
    "whatif also an s3://BUCKET/PREFIX of images in class folders or of .tar shards, or WebDataset shards "
    "by URL ('https://host/train-{000000..000099}.tar')"
)


def add_data(p: argparse.ArgumentParser, *, generated: bool = True) -> None:
    """Which images: the user's folder, or generated sets."""
    if generated:
        src = p.add_mutually_exclusive_group()
        src.add_argument(
            "--data",
            dest="data_path",
            metavar="PATH",
            default=S,
            help=DATA_HELP,
        )
        add_resolutions(src, f"generated datasets, WIDTHxHEIGHT list (default {_res(DEFAULT_RESOLUTIONS)})")
        add_images(
            p,
            f"images per generated dataset (default: about what a cell reads, at most "
            f"{MAX_DEFAULT_IMAGES_PER_DATASET})",
            dest="images_per_dataset",
        )
        p.add_argument(
            "--cache-dir",
            metavar="DIR",
            default=S,
            help="where generated datasets are kept (default ~/.cache/ioprof)",
        )
    else:
        p.add_argument(
            "--data",
            dest="data_path",
            metavar="PATH",
            default=S,
            help=DATA_HELP,
        )
    add_seed(p, f"seed for data, sampling and shuffling (default {_DEFAULTS.seed})")


def add_loader(p: argparse.ArgumentParser, *, loaders: bool = True) -> None:
    """Which loader settings, and how their workers start."""
    p.add_argument(
        "--workers",
        type=typed(parse_positive_int_list, "workers"),
        default=S,
        help=f"worker counts for the multiprocess loader (default {','.join(map(str, _DEFAULTS.workers))})",
    )
    if loaders:
        p.add_argument(
            "--loaders",
            type=typed(parse_loaders, "loaders"),
            default=S,
            help="serial (num_workers=0, in-process) and/or multiprocess (default both)",
        )
    add_start_method(p)


def add_inside(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-inside",
        dest="inside",
        action="store_false",
        default=S,
        help="do not time each stage inside the loader's workers, nor read their memory and threads",
    )


def add_start_method(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--start-method",
        choices=START_METHODS,
        default=S,
        help="how loader workers start (default: Python's default on this platform)",
    )


def add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device",
        type=typed(parse_device, "device"),
        default=S,
        help="auto (CUDA when available, else CPU), cpu, cuda or cuda:INDEX (default auto)",
    )


def add_batch(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--batch-size",
        type=typed(positive_int, "batch-size"),
        default=S,
        help=f"images per batch (default {CPU_RUN_LENGTH.batch_size} on the CPU with real compute, "
        f"{CPU_SIM_RUN_LENGTH.batch_size} with simulated, {CUDA_RUN_LENGTH.batch_size} on CUDA)",
    )
    p.add_argument(
        "--crop-px",
        type=typed(positive_int, "crop-px"),
        default=S,
        help=f"RandomResizedCrop output size (default {_DEFAULTS.crop_px})",
    )


def add_training(p: argparse.ArgumentParser, *, compute_default: str = "real", tuning: bool = True) -> None:
    """The training step the loader feeds: model, real or simulated, and (``tuning``) precision and layout."""
    p.add_argument("--model", choices=MODELS, default=S, help=f"model trained (default {_DEFAULTS.model})")
    p.add_argument(
        "--compute",
        type=typed(parse_compute, "compute"),
        default=S,
        help=f"real, sim:IMG_PER_S or sim:PRESET ({', '.join(GPU_PRESETS)}) to simulate a GPU "
        f"(default {compute_default})",
    )
    if not tuning:
        return
    p.add_argument(
        "--precision",
        choices=(AUTO, *PRECISIONS),
        default=S,
        help="fp32, tf32 (CUDA), bf16, or fp16 (CUDA, with a gradient scaler) autocast; "
        "default auto: bf16 on CUDA (fp16 where the GPU lacks bf16), fp32 on the CPU",
    )
    p.add_argument(
        "--channels-last",
        action=argparse.BooleanOptionalAction,
        default=S,
        help="NHWC memory format for model and inputs (default on: the fast path of cuDNN and oneDNN)",
    )


def _warmup(length: RunLength) -> str:
    return f"{length.warmup_steps} plus {length.burst_per_worker} a worker"


def add_run(p: argparse.ArgumentParser) -> None:
    """How long cells run, their cache regime, emulated storage and the host-to-device path."""
    p.add_argument(
        "--steps",
        type=typed(positive_int, "steps"),
        default=S,
        help="measure exactly this many steps per cell (default: until the throughput's 95\N{NO-BREAK SPACE}%% "
        f"interval is within ±\N{NO-BREAK SPACE}{TARGET_REL_HALF_WIDTH * 100:.0f}\N{NO-BREAK SPACE}%%, or "
        f"±\N{NO-BREAK SPACE}{DECIDED_REL_HALF_WIDTH * 100:.0f}\N{NO-BREAK SPACE}%% once the "
        "cell's class and bottleneck are decided, or the cap)",
    )
    p.add_argument(
        "--warmup-steps",
        type=typed(non_negative_int, "warmup-steps"),
        default=S,
        help="steps run and excluded before measuring, plus each loader worker's start-up burst "
        f"(default {_warmup(CPU_RUN_LENGTH)} on the CPU, {_warmup(CPU_SIM_RUN_LENGTH)} with simulated "
        f"compute, {_warmup(CUDA_RUN_LENGTH)} on CUDA: every batch it prefetches)",
    )
    p.add_argument(
        "--seconds",
        type=typed(positive_float, "seconds"),
        default=S,
        help=f"stop a cell's measurement after this long (default {CPU_RUN_LENGTH.max_seconds:g} on the "
        f"CPU, {CPU_SIM_RUN_LENGTH.max_seconds:g} with simulated compute, {CUDA_RUN_LENGTH.max_seconds:g} "
        "on CUDA)",
    )
    add_cache(
        p,
        "page-cache regime of the end-to-end cells (default cold: evicted before each cell and "
        "after each read, verified)",
    )
    add_storage_profile(
        p, f"emulate storage: {', '.join(STORAGE_PROFILES)} or custom:READ_MB_PER_S[:LATENCY_MS]"
    )
    p.add_argument(
        "--pin-memory",
        action=argparse.BooleanOptionalAction,
        default=S,
        help="DataLoader(pin_memory=True) (default: on for CUDA, off on the CPU)",
    )
    p.add_argument(
        "--non-blocking",
        action=argparse.BooleanOptionalAction,
        default=S,
        help="copy batches to the device with non_blocking=True (default: as --pin-memory)",
    )
    p.add_argument(
        "--max-failed-share",
        type=typed(share, "max-failed-share"),
        default=S,
        help=f"stop when more than this share of samples cannot be decoded (default "
        f"{_DEFAULTS.max_failed_share})",
    )


def add_out(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        dest="out_dir",
        metavar="DIR",
        default=S,
        help="output folder (default: a new folder under ./reports/)",
    )


def config_from(cls: type[T], ns: argparse.Namespace, **fixed: Any) -> T:
    """The config of type ``cls`` from the options given; the rest keep the dataclass's defaults."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = {k: v for k, v in vars(ns).items() if k in names}
    return cls(**{**given, **fixed})


def add_worker_count(p: argparse.ArgumentParser, help: str) -> None:
    """``--workers N``: one worker count (a sweep's is a list: ``add_loader``), in the words of the
    command that takes it."""
    p.add_argument("--workers", type=typed(non_negative_int, "workers"), default=S, help=help)


def add_step_count(p: argparse.ArgumentParser, help: str) -> None:
    """``--steps N``: how many measured steps (or batches), in the words of the command."""
    p.add_argument("--steps", type=typed(positive_int, "steps"), default=S, help=help)


def add_seconds(p: argparse.ArgumentParser, help: str) -> None:
    """``--seconds S``: the most a measurement runs, in the words of the command."""
    p.add_argument("--seconds", type=typed(positive_float, "seconds"), default=S, help=help)


def add_seed(p: argparse.ArgumentParser, help: str, *, default: Any = S) -> None:
    """``--seed N``, in the words of the command that takes it."""
    p.add_argument("--seed", type=typed(non_negative_int, "seed"), default=default, help=help)


def add_cache(p: argparse.ArgumentParser, help: str) -> None:
    """``--cache REGIME``: one page-cache regime for every run of the command."""
    p.add_argument("--cache", choices=CACHE_REGIMES, default=S, help=help)


def add_storage_profile(p: argparse.ArgumentParser, help: str) -> None:
    """``--storage-profile P``: one emulated device to read through."""
    p.add_argument(
        "--storage-profile", type=typed(parse_storage_profile, "storage-profile"), default=S, help=help
    )


class Options(Protocol):
    """Where options are declared: a parser, or a group of its options (argparse's groups)."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action: ...


def add_resolutions(p: Options, help: str, *, default: Any = S) -> None:
    """``--resolutions WxH,…``: generated datasets, one each."""
    p.add_argument("--resolutions", type=typed(parse_resolutions, "resolutions"), default=default, help=help)


def add_images(p: argparse.ArgumentParser, help: str, *, default: Any = S, dest: str = "images") -> None:
    """``--images N``: how many images a generated dataset holds."""
    p.add_argument(
        "--images", dest=dest, metavar="N", type=typed(positive_int, "images"), default=default, help=help
    )
