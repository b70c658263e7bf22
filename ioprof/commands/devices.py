"""``ioprof devices``: does a GPU, and a second one, pay off for my model? Each model trained on
synthetic input on the CPU, one GPU and N GPUs with DDP."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ioprof.commands import args, prepare_out_dir, save_and_say
from ioprof.commands.values import (
    parse_device_models,
    parse_positive_int_list,
    positive_int,
)
from ioprof.core.config import DevicesConfig
from ioprof.core.errors import IoprofError

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "devices"
HELP = "CPU vs one GPU vs N GPUs (DDP) for MLP, LeNet-5, LSTM, ResNet-50, ResNet-152: does another device pay off"


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = DevicesConfig()
    p.add_argument(
        "--models",
        type=args.typed(parse_device_models, "models"),
        default=argparse.SUPPRESS,
        help=f"models to train (default {','.join(d.models)})",
    )
    p.add_argument(
        "--batch-sizes",
        type=args.typed(parse_positive_int_list, "batch-sizes"),
        default=argparse.SUPPRESS,
        help=f"batch sizes per device (default {','.join(map(str, d.batch_sizes))})",
    )
    p.add_argument(
        "--gpus",
        type=args.typed(positive_int, "gpus"),
        default=argparse.SUPPRESS,
        help="GPUs for the DDP row (default: every visible GPU, when there are 2 or more)",
    )
    args.add_seconds(
        p,
        f"the most one cell measures; a cell whose steps would take longer is skipped (default {d.seconds:g})",
    )
    args.add_seed(p, f"seed for weights and input (default {d.seed})")
    args.add_out(p)


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return devices(args.config_from(DevicesConfig, ns), command_line, progress)


def devices(config: DevicesConfig, command_line: str, progress: Progress) -> int:
    import torch

    from ioprof.core.config import RunLength
    from ioprof.measure.session import open_session
    from ioprof.runners.devices import MAX_STEPS, MIN_STEPS, WARMUP_STEPS, run_devices

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if config.gpus is not None and config.gpus > gpus:
        have = f"has {gpus} GPU(s); use --gpus {gpus} or fewer" if gpus else "has no GPU; leave --gpus out"
        raise IoprofError(f"--gpus {config.gpus}: this machine {have} to measure what is here")
    out = prepare_out_dir(config.out_dir, NAME)
    device = torch.device("cuda:0") if gpus else torch.device("cpu")
    run = RunLength(
        batch_size=max(config.batch_sizes),
        warmup_steps=WARMUP_STEPS,
        min_steps=MIN_STEPS,
        max_steps=MAX_STEPS,
        max_seconds=config.seconds,
    )
    reason = f"{gpus} CUDA device(s)" if gpus else "no CUDA device: the CPU rows only"
    session = open_session(command_line, device, reason, run, None)
    progress(
        f"{len(config.models)} model(s) × {len(config.batch_sizes)} batch size(s); {reason}; writing to {out}/"
    )
    return save_and_say(run_devices(config, session, out, progress), out)
