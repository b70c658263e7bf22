"""``ioprof scale``: how many accelerators this host and its storage keep at least 90 % busy —
N ranks under torchrun, each with its own loader, all reading one storage."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from ioprof.commands import args, one_dataset, prepare_out_dir, writing_into
from ioprof.commands.values import (
    parse_positive_int_list,
    parse_regimes,
    positive_float,
)
from ioprof.core import resultfile
from ioprof.core.config import ScaleConfig
from ioprof.core.errors import IoprofError

if TYPE_CHECKING:
    from ioprof.core.results_scale import ScaleResult
    from ioprof.measure.session import Progress

NAME = "scale"
HELP = "how many accelerators can this host and storage feed: N torchrun ranks on one storage, cold and warm"


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = ScaleConfig()
    args.add_data(p, generated=False)
    p.add_argument(
        "--ranks",
        type=args.typed(parse_positive_int_list, "ranks"),
        default=argparse.SUPPRESS,
        help=f"rank counts to run, e.g. 1,2,4,8 (default {','.join(map(str, d.ranks))})",
    )
    args.add_worker_count(
        p, f"loader workers per rank (default {d.workers}; 0: each rank loads in its own process)"
    )
    p.add_argument(
        "--cache",
        type=args.typed(parse_regimes, "cache"),
        default=argparse.SUPPRESS,
        help="page-cache regimes: cold (evicted before and after each read), warm, or both (default cold,warm)",
    )
    args.add_step_count(
        p, f"measured steps per rank, the same on every rank as DDP needs (default {d.steps})"
    )
    p.add_argument(
        "--rank-timeout",
        dest="rank_timeout_s",
        type=args.typed(positive_float, "rank-timeout"),
        default=argparse.SUPPRESS,
        help=f"seconds one rank count may take, start-up included, before it is failed (default {d.rank_timeout_s:g})",
    )
    args.add_device(p)
    args.add_batch(p)
    args.add_training(
        p,
        compute_default="sim:h100: emulated accelerators, as MLPerf Storage; real: the model "
        "under DDP in fp32, one GPU per rank or the CPU's cores shared out",
        tuning=False,
    )
    args.add_start_method(p)
    args.add_out(p)


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return scale(args.config_from(ScaleConfig, ns), command_line, progress)


def scale(config: ScaleConfig, command_line: str, progress: Progress) -> int:
    # torch and the measuring rooms load only when something is measured: usage errors stay instant
    import torch

    from ioprof.measure.compute import resolve_device
    from ioprof.render import kinds
    from ioprof.render.scale import headlines
    from ioprof.runners.scale import Silent, follow, in_this_job, open_scale_session, run_scale
    from ioprof.runners.torchrun import torchrun_world

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if config.compute.kind == "real":
        device, reason = resolve_device(config.device)
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda" and max(config.ranks) > gpus:
            raise IoprofError(
                f"--ranks {max(config.ranks)}: real compute needs one GPU per rank and this machine has {gpus}; "
                f"use --ranks up to {gpus}, or --compute sim:h100 to emulate more accelerators"
            )
    else:  # emulated accelerators: each rank's step is a sleep, its all-reduce runs over gloo
        device, reason, backend = (
            torch.device("cpu"),
            "simulated compute: each rank's accelerator is emulated",
            "gloo",
        )
    world = torchrun_world()
    if world is not None:  # started by torchrun (one node of several, or this one): one count, these ranks
        config = replace(config, ranks=(world[1],))
        if world[0] != 0:
            progress = Silent()
    dataset = one_dataset(config.data_path, config.seed, config.cache_dir, progress)
    if world is not None and world[0] != 0:
        return follow(config, dataset, backend, device, reason, command_line)
    out = prepare_out_dir(config.out_dir, NAME)
    run, session = open_scale_session(config, device, reason, command_line)
    config = replace(config, batch_size=run.batch_size)
    progress(
        f"ranks {','.join(map(str, config.ranks))} over {backend}, {config.compute.label}; writing results to {out}/"
    )

    def keep(result: ScaleResult) -> None:
        with writing_into(out):
            resultfile.save(result, out / "results.json")

    start = in_this_job() if world is not None else None
    result = kinds.conclude(
        run_scale(config, session, dataset, out, progress, backend=backend, gpus=gpus, keep=keep, start=start)
    )
    keep(result)
    with writing_into(out):
        report = kinds.write(result, out)
    for line in headlines(result):
        print(line.replace("**", ""))
    print(f"report: {report}")
    return 0
