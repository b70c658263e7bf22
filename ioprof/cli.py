"""Command line: argparse in, one config object out, one error boundary.

Exit codes: 0 success; 2 bad usage (argparse); 1 any other problem the user can fix,
printed as one line ``ioprof: error: …``; 130 interrupted (finished cells are kept).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ioprof import __version__
from ioprof.config import (
    AUTO,
    CACHE_REGIMES,
    DEFAULT_IMAGES_PER_DATASET,
    DEFAULT_MAX_FAILED_SHARE,
    DEFAULT_RESOLUTIONS,
    MAX_DEFAULT_IMAGES_PER_DATASET,
    MODELS,
    PRECISIONS,
    STAGES,
    PlaceConfig,
    SweepConfig,
    non_negative_int,
    parse_compute,
    parse_device,
    parse_loaders,
    parse_paths,
    parse_positive_int_list,
    parse_resolutions,
    parse_storage_profile,
    parse_storage_profiles,
    positive_float,
    positive_int,
    share,
)
from ioprof.errors import IoprofError
from ioprof.presets import GPU_PRESETS, STORAGE_PROFILES


def _arg(fn: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """Turn a parser's ValueError into argparse's usage error, keeping its message."""

    def parse(text: str) -> Any:
        try:
            return fn(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = name
    return parse


def _add_training_args(p: argparse.ArgumentParser) -> None:
    """What every measuring command needs: the loader's worker counts and the training to feed."""
    p.add_argument(
        "--workers",
        type=_arg(parse_positive_int_list, "workers"),
        default=(1, 4, 8),
        help="worker counts for the multiprocess loader, e.g. 1,4,8 (default 1,4,8)",
    )
    p.add_argument(
        "--batch-size",
        type=_arg(positive_int, "batch-size"),
        help="images per batch (default 8 on CPU, 256 on CUDA)",
    )
    p.add_argument(
        "--device",
        type=_arg(parse_device, "device"),
        default="auto",
        help="auto (CUDA when available, else CPU), cpu, cuda or cuda:INDEX",
    )
    p.add_argument("--model", choices=MODELS, default="resnet50", help="model trained (default resnet50)")
    p.add_argument(
        "--compute",
        type=_arg(parse_compute, "compute"),
        default=parse_compute("real"),
        help=f"real, sim:IMG_PER_S or sim:PRESET ({', '.join(GPU_PRESETS)}) to simulate a GPU",
    )
    p.add_argument(
        "--crop-px",
        type=_arg(positive_int, "crop-px"),
        default=224,
        help="RandomResizedCrop output size (default 224)",
    )
    p.add_argument(
        "--precision",
        choices=(AUTO, *PRECISIONS),
        default=AUTO,
        help="fp32, tf32 (CUDA), bf16, or fp16 (CUDA, with a gradient scaler) autocast; "
        "default auto: bf16 on CUDA (fp16 where the GPU lacks bf16), fp32 on the CPU",
    )
    p.add_argument(
        "--channels-last",
        action=argparse.BooleanOptionalAction,
        help="NHWC memory format for model and inputs (default: on for CUDA, off on the CPU)",
    )
    p.add_argument(
        "--seed", type=_arg(non_negative_int, "seed"), default=0, help="seed for data and shuffling"
    )
    p.add_argument("--out", metavar="DIR", help="output folder (default: a new folder under ./reports/)")
    p.add_argument(
        "--cache-dir", metavar="DIR", help="where generated datasets are kept (default ~/.cache/ioprof)"
    )


def _add_measure_args(p: argparse.ArgumentParser) -> None:
    res = ",".join(f"{w}x{h}" for w, h in DEFAULT_RESOLUTIONS)
    _add_training_args(p)
    p.add_argument(
        "--loaders",
        type=_arg(parse_loaders, "loaders"),
        default=("serial", "multiprocess"),
        help="serial (num_workers=0, in-process) and/or multiprocess (default both)",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--resolutions",
        type=_arg(parse_resolutions, "resolutions"),
        default=DEFAULT_RESOLUTIONS,
        help=f"generated datasets, WIDTHxHEIGHT list (default {res})",
    )
    src.add_argument(
        "--data", metavar="PATH", help="your own ImageFolder tree or flat folder of images (only read)"
    )
    p.add_argument(
        "--images",
        type=_arg(positive_int, "images"),
        help="images per generated dataset (default: what one cell reads, at least "
        f"{DEFAULT_IMAGES_PER_DATASET} and at most {MAX_DEFAULT_IMAGES_PER_DATASET})",
    )
    p.add_argument(
        "--steps",
        type=_arg(positive_int, "steps"),
        help="measured steps per cell, after warm-up (default 5 on CPU, 50 on CUDA)",
    )
    p.add_argument(
        "--warmup-steps",
        type=_arg(non_negative_int, "warmup-steps"),
        help="steps run and excluded before measuring (default 1 on CPU, 10 on CUDA)",
    )
    p.add_argument(
        "--seconds",
        type=_arg(positive_float, "seconds"),
        help="stop a cell's measurement after this long even if steps remain (default 60)",
    )
    p.add_argument(
        "--cache",
        choices=CACHE_REGIMES,
        default="cold",
        help="page-cache regime of the end-to-end cells (default cold: evicted and verified)",
    )
    p.add_argument(
        "--storage-profile",
        type=_arg(parse_storage_profile, "storage-profile"),
        help=f"emulate storage: {', '.join(STORAGE_PROFILES)} or custom:READ_MB_PER_S[:LATENCY_MS]",
    )
    p.add_argument(
        "--pin-memory",
        action=argparse.BooleanOptionalAction,
        help="DataLoader(pin_memory=True) (default: on for CUDA, off on the CPU)",
    )
    p.add_argument(
        "--non-blocking",
        action=argparse.BooleanOptionalAction,
        help="copy batches to the device with non_blocking=True (default: as --pin-memory)",
    )
    p.add_argument(
        "--max-failed-share",
        type=_arg(share, "max-failed-share"),
        default=DEFAULT_MAX_FAILED_SHARE,
        help=f"stop when more than this share of samples cannot be decoded (default {DEFAULT_MAX_FAILED_SHARE})",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ioprof",
        description="Why is my PyTorch image training slow? Storage, CPU decode or GPU compute — measured.",
    )
    parser.add_argument("--version", action="version", version=f"ioprof {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sw = sub.add_parser("sweep", help="serial vs multiprocess loader across resolutions and worker counts")
    _add_measure_args(sw)
    sw.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the interrupted sweep in DIR (same options), keeping its finished cells",
    )
    pr = sub.add_parser(
        "probe", help="measure one stage ceiling alone: storage, decode, compute or transfer (CUDA)"
    )
    pr.add_argument("stage", choices=("storage", "decode", "compute", "transfer"))
    _add_measure_args(pr)
    pl = sub.add_parser("place", help="which storage location keeps training fed, and does copying pay")
    _add_training_args(pl)
    pl.add_argument(
        "--candidates",
        type=_arg(parse_paths, "candidates"),
        default=(),
        help="folders to compare with the dataset's current location, e.g. /mnt/nvme,/dev/shm",
    )
    pl.add_argument("--data", metavar="PATH", help="the dataset (default: the generated ImageNet-like set)")
    pl.add_argument(
        "--storage-profile",
        type=_arg(parse_storage_profiles, "storage-profile"),
        default=(),
        help=f"hypothetical locations, emulated: {', '.join(STORAGE_PROFILES)} or custom:MB_PER_S[:MS]",
    )
    pl.add_argument(
        "--target-rate",
        type=_arg(positive_float, "target-rate"),
        help="img/s the training consumes (the same as --compute sim:IMG_PER_S)",
    )
    pl.add_argument(
        "--epochs",
        type=_arg(positive_int, "epochs"),
        default=90,
        help="epochs of training, for whether copying pays off (default 90)",
    )
    g = sub.add_parser("gen", help="write synthetic ImageFolder datasets that compress like photographs")
    g.add_argument("--resolutions", type=_arg(parse_resolutions, "resolutions"), default=DEFAULT_RESOLUTIONS)
    g.add_argument("--images", type=_arg(positive_int, "images"), default=DEFAULT_IMAGES_PER_DATASET)
    g.add_argument("--classes", type=_arg(positive_int, "classes"), default=4)
    g.add_argument("--seed", type=_arg(non_negative_int, "seed"), default=0)
    g.add_argument("--out", metavar="DIR", required=True, help="folder to write the datasets into")
    r = sub.add_parser("report", help="re-render report.md from a results.json without measuring")
    r.add_argument("results", metavar="RESULTS.json")
    sub.add_parser("env", help="what ioprof sees on this machine (CPU, RAM, GPU, NVML)")
    return parser


def _sweep_config(ns: argparse.Namespace, stages: Sequence[str]) -> SweepConfig:
    """The one place where the Namespace becomes a config."""
    return SweepConfig(
        workers=ns.workers,
        loaders=ns.loaders,
        resolutions=ns.resolutions,
        data_path=ns.data,
        images_per_dataset=ns.images,
        batch_size=ns.batch_size,
        warmup_steps=ns.warmup_steps,
        steps=ns.steps,
        seconds=ns.seconds,
        device=ns.device,
        model=ns.model,
        compute=ns.compute,
        cache=ns.cache,
        storage_profile=ns.storage_profile,
        crop_px=ns.crop_px,
        precision=ns.precision,
        channels_last=ns.channels_last,
        pin_memory=ns.pin_memory,
        non_blocking=ns.non_blocking,
        stages=tuple(stages),
        seed=ns.seed,
        max_failed_share=ns.max_failed_share,
        out_dir=ns.out,
        cache_dir=ns.cache_dir,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    ns = parser.parse_args(args)
    if ns.command == "place" and ns.target_rate and ns.compute.kind != "real":
        parser.error("argument --target-rate: not allowed with argument --compute")
    command = "ioprof " + shlex.join(args)
    from ioprof.commands import make_progress

    progress = make_progress()
    try:
        if ns.command == "sweep":
            from ioprof.commands.sweep import sweep

            return sweep(_sweep_config(ns, STAGES), command, "sweep", progress, resume_dir=ns.resume)
        if ns.command == "probe":
            from ioprof.commands.sweep import sweep

            return sweep(_sweep_config(ns, (ns.stage,)), command, f"probe-{ns.stage}", progress)
        if ns.command == "place":
            from ioprof.commands.place import place

            compute = parse_compute(f"sim:{ns.target_rate}") if ns.target_rate else ns.compute
            cfg = PlaceConfig(
                candidates=ns.candidates,
                storage_profiles=ns.storage_profile,
                data_path=ns.data,
                workers=ns.workers,
                epochs=ns.epochs,
                compute=compute,
                device=ns.device,
                model=ns.model,
                batch_size=ns.batch_size,
                crop_px=ns.crop_px,
                precision=ns.precision,
                channels_last=ns.channels_last,
                seed=ns.seed,
                out_dir=ns.out,
                cache_dir=ns.cache_dir,
            )
            return place(cfg, command, progress)
        if ns.command == "gen":
            from ioprof.commands.gen import gen

            return gen(ns.resolutions, ns.images, ns.out, ns.seed, ns.classes, progress)
        if ns.command == "report":
            from ioprof.commands.sweep import report

            return report(ns.results)
        if ns.command == "env":
            from ioprof.commands.env import env

            return env()
    except IoprofError as e:
        print(f"ioprof: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ioprof: interrupted", file=sys.stderr)
        return 130
    raise AssertionError(f"unhandled command {ns.command}")
