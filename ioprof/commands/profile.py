"""``ioprof profile``: where the time goes inside a step, and how long an epoch will take."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ioprof.commands import args, one_dataset, save_and_say, start_measuring
from ioprof.commands.values import positive_int
from ioprof.core.config import MODELS, ProfileConfig, run_length_for

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "profile"
HELP = "per phase and per layer: where a training step's time goes, and the epoch time it predicts"


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = ProfileConfig()
    args.add_data(p, generated=False)
    p.add_argument(
        "--model", choices=MODELS, default=argparse.SUPPRESS, help=f"model trained (default {d.model})"
    )
    args.add_worker_count(p, f"loader worker processes (default {d.workers})")
    args.add_step_count(p, f"measured steps per regime and with the layer hooks (default {d.steps})")
    p.add_argument(
        "--epoch-images",
        type=args.typed(positive_int, "epoch-images"),
        default=argparse.SUPPRESS,
        help="images in the epoch to predict (default: the dataset's size)",
    )
    p.add_argument(
        "--check-epoch",
        action="store_true",
        default=argparse.SUPPRESS,
        help="then run one real epoch over the dataset and compare it with the prediction",
    )
    args.add_device(p)
    args.add_batch(p)
    args.add_out(p)


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return profile(args.config_from(ProfileConfig, ns), command_line, progress)


def profile(config: ProfileConfig, command_line: str, progress: Progress) -> int:
    # torch and the measuring rooms load only when something is measured: usage errors stay instant
    from ioprof.core.config import ComputeSpec
    from ioprof.measure.compute import resolve_device
    from ioprof.render import kinds
    from ioprof.runners.profile import run_profile

    device, reason = resolve_device(config.device)
    dataset = one_dataset(config.data_path, config.seed, config.cache_dir, progress)
    run = run_length_for(device.type, ComputeSpec("real"), batch_size=config.batch_size)
    out, session = start_measuring(
        NAME, config.out_dir, command_line, device, reason, run, config.start_method, progress
    )
    return save_and_say(kinds.conclude(run_profile(config, session, dataset, out, progress)), out)
