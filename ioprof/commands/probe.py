"""``ioprof probe STAGE``: one stage ceiling alone — storage, decode, compute or transfer (CUDA).

Each stage offers only the options that apply to it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ioprof.commands import args
from ioprof.commands.sweep import measure
from ioprof.core.config import SweepConfig

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "probe"
HELP = "measure one stage ceiling alone: storage, decode, compute or transfer (CUDA)"
STAGES = {
    "storage": "raw cold reads of the dataset's files at each concurrency: MB/s, files/s, latency",
    "decode": "the loader over an in-memory sample at each setting: decode + augment + collate img/s",
    "compute": "training steps on synthetic batches already on the device: img/s",
    "transfer": "host-to-device copy of a batch, pinned and pageable (CUDA): GB/s",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    stages = p.add_subparsers(dest="stage", required=True, metavar="STAGE")
    for stage, text in STAGES.items():
        s = stages.add_parser(stage, help=text, description=text)
        if stage in ("storage", "decode"):
            args.add_data(s)
            args.add_loader(s, loaders=stage == "decode")
        if stage == "storage":
            args.add_storage_profile(s, "read through an emulated device instead (see ioprof sweep --help)")
        if stage in ("decode", "compute", "transfer"):
            args.add_batch(s)
        if stage in ("compute", "transfer"):
            args.add_device(s)
        if stage == "compute":
            args.add_training(s)
        args.add_out(s)


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    config = args.config_from(SweepConfig, ns, stages=(ns.stage,))
    return measure(config, command_line, progress, name=f"probe-{ns.stage}")
