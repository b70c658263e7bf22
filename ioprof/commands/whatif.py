"""``ioprof whatif``: the fixes people are told to try, run end to end on a sample of your data."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from ioprof.commands import args, one_dataset, save_and_say, start_measuring
from ioprof.commands.values import positive_int
from ioprof.core.config import WHATIF_ALTERNATIVES, WhatifConfig, run_length_for, whatif_wants
from ioprof.core.errors import IoprofError
from ioprof.datasets import objects

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "whatif"
HELP = "what would make it faster: threads, decode_jpeg, pre-resized copies, shards, loader knobs — measured"


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = WhatifConfig()
    args.add_data(p, generated=False)
    args.add_worker_count(p, "your loader's num_workers, the current setting (default: the usable cores)")
    args.add_storage_profile(p, "read everything through an emulated device (see ioprof sweep --help)")
    args.add_cache(p, f"page-cache regime of every run (default {d.cache})")
    p.add_argument(
        "--sample-images",
        type=args.typed(positive_int, "sample-images"),
        default=argparse.SUPPRESS,
        help=f"files in the sample every alternative runs on (default {d.sample_images})",
    )
    args.add_seconds(p, f"the most each alternative runs (default {d.seconds:g})")
    p.add_argument(
        "--scratch",
        dest="scratch_dir",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="where copies and shards are made, then removed (default: the system's temporary folder; "
        "a folder on your data's storage measures shards there)",
    )
    p.add_argument(
        "--only",
        metavar="NAMES",
        type=args.typed(parse_only, "only"),
        default=argparse.SUPPRESS,
        help="try only these alternatives, comma-separated, besides your pipeline as it is (e.g. "
        "shards,resized,prefetch; a copy's control comes with it): " + ", ".join(WHATIF_ALTERNATIVES),
    )
    args.add_device(p)
    args.add_batch(p)
    args.add_training(p)
    args.add_start_method(p)
    args.add_out(p)


def parse_only(text: str) -> tuple[str, ...]:
    """``--only``'s names: each one of ``WHATIF_ALTERNATIVES`` or the start of some (``resized``)."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError("name at least one alternative")
    for n in names:
        if not any(whatif_wants((n,), a) for a in WHATIF_ALTERNATIVES):
            raise ValueError(f"{n!r} is no alternative; choose among {', '.join(WHATIF_ALTERNATIVES)}")
    return names


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return whatif(args.config_from(WhatifConfig, ns), command_line, progress)


def whatif(config: WhatifConfig, command_line: str, progress: Progress) -> int:
    # torch and the measuring rooms load only when something is measured: usage errors stay instant
    from ioprof.measure.compute import check_precision, resolve_device, resolve_tuning
    from ioprof.render import kinds
    from ioprof.runners.whatif import run_whatif

    device, reason = resolve_device(config.device)
    precision, channels_last = resolve_tuning(config.precision, config.channels_last, device)
    config = replace(config, precision=precision, channels_last=channels_last)
    if config.compute.kind == "real":
        check_precision(config.precision, device)
    if config.scratch_dir is not None and objects.is_store_url(config.scratch_dir):
        check_store_scratch(config.scratch_dir, config.data_path)
    elif config.scratch_dir is not None and not os.path.isdir(config.scratch_dir):
        raise IoprofError(
            f"--scratch {config.scratch_dir}: no such folder; give an existing folder for the copies"
        )
    dataset = one_dataset(config.data_path, config.seed, config.cache_dir, progress, stores=True)
    run = run_length_for(device.type, config.compute, batch_size=config.batch_size, seconds=config.seconds)
    out, session = start_measuring(
        NAME, config.out_dir, command_line, device, reason, run, config.start_method, progress
    )
    return save_and_say(kinds.conclude(run_whatif(config, session, dataset, progress)), out)


def check_store_scratch(scratch: str, data: str | None) -> None:
    """A scratch prefix in a store: for shards of objects in the same store, never inside the data."""
    bucket, prefix = objects.split(scratch)
    if not prefix:
        raise IoprofError(
            f"--scratch {scratch}: name a prefix ioprof may write (s3://BUCKET/tmp/), not a whole bucket"
        )
    if data is None or not objects.is_store_url(data):
        raise IoprofError(
            f"--scratch {scratch}: a scratch prefix in a store is for data in that store (--data s3://…); "
            "give a local folder"
        )
    d_bucket, d_prefix = objects.split(data)
    inside = (prefix.rstrip("/") + "/").startswith(d_prefix.rstrip("/") + "/") if d_prefix else True
    if bucket == d_bucket and inside:
        raise IoprofError(
            f"--scratch {scratch}: is inside --data {data}; nothing is written to your data's prefix — name another"
        )
