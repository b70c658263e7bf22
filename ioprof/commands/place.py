"""``ioprof place``: which location keeps the accelerator busy, and does copying pay?"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ioprof.commands import args, one_dataset, save_and_say, start_measuring
from ioprof.commands.values import (
    gigabytes,
    parse_compute,
    parse_paths,
    parse_storage_profiles,
    positive_float,
    positive_int,
)
from ioprof.core.config import PlaceConfig, run_length_for
from ioprof.core.errors import IoprofError
from ioprof.core.presets import STORAGE_PROFILES

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "place"
HELP = "which storage location keeps training fed, and does copying the dataset there pay"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--candidates",
        type=args.typed(parse_paths, "candidates"),
        default=argparse.SUPPRESS,
        help="folders to compare with the dataset's current location, e.g. /mnt/nvme,/dev/shm",
    )
    args.add_data(p, generated=False)
    p.add_argument(
        "--storage-profile",
        dest="storage_profiles",
        type=args.typed(parse_storage_profiles, "storage-profile"),
        default=argparse.SUPPRESS,
        help=f"hypothetical locations, emulated: {', '.join(STORAGE_PROFILES)} or custom:MB_PER_S[:MS]",
    )
    p.add_argument(
        "--target-rate",
        type=args.typed(positive_float, "target-rate"),
        help="img/s the training consumes (the same as --compute sim:IMG_PER_S)",
    )
    p.add_argument(
        "--epochs",
        type=args.typed(positive_int, "epochs"),
        default=argparse.SUPPRESS,
        help=f"epochs of training, for whether copying pays off (default {PlaceConfig().epochs})",
    )
    p.add_argument(
        "--ram",
        dest="ram_bytes",
        type=args.typed(gigabytes, "ram"),
        default=argparse.SUPPRESS,
        metavar="GB",
        help="RAM the page cache can use on the machine that will train (default: what this process may use "
        "here, a container's memory limit included); decides whether later epochs read the storage",
    )
    args.add_loader(p, loaders=False)
    args.add_device(p)
    args.add_batch(p)
    args.add_training(p)
    args.add_out(p)


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    config = args.config_from(PlaceConfig, ns)
    if ns.target_rate:
        if config.compute.kind != "real":
            raise IoprofError("--target-rate: not allowed with --compute; give one of them")
        config = args.config_from(PlaceConfig, ns, compute=parse_compute(f"sim:{ns.target_rate}"))
    return place(config, command_line, progress)


def place(config: PlaceConfig, command_line: str, progress: Progress) -> int:
    # torch and the measuring rooms load only when something is measured: usage errors stay instant
    from ioprof.measure.compute import check_precision, resolve_device, tune
    from ioprof.render import kinds
    from ioprof.runners.place import run_place

    if not config.candidates and not config.storage_profiles:
        raise IoprofError("--candidates: name at least one folder to compare with (or --storage-profile)")
    device, device_reason = resolve_device(config.device)
    config = tune(config, device)
    if config.compute.kind == "real":
        check_precision(config.precision, device)
    dataset = one_dataset(config.data_path, config.seed, config.cache_dir, progress, stores=True)
    run = run_length_for(device.type, config.compute, batch_size=config.batch_size)
    out, session = start_measuring(
        NAME, config.out_dir, command_line, device, device_reason, run, config.start_method, progress
    )
    return save_and_say(kinds.conclude(run_place(config, session, dataset, progress)), out)
