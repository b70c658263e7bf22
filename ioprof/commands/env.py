"""``ioprof env``: what ioprof sees on this machine, and why a part is unavailable."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "env"
HELP = "what ioprof sees on this machine (CPU, RAM, GPU, NVML)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    pass


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return env()


def env() -> int:
    import torch

    from ioprof.core.presets import GPU_PRESETS
    from ioprof.datasets.cache import default_cache_dir
    from ioprof.host.machine import machine_info
    from ioprof.host.pagecache import filesystem_of
    from ioprof.host.telemetry import nvml_for_device

    cuda = torch.cuda.is_available()
    gpu, nv = nvml_for_device(torch.device("cuda:0" if cuda else "cpu"))
    m = machine_info(gpu, nv.driver or None, nv.reason or None)
    fs = filesystem_of(os.getcwd())
    lines = [
        f"CPU: {m.cpu_model} — {m.cpu_cores_usable} usable of {m.cpu_cores_logical} logical cores",
        f"RAM: {m.ram_bytes / 2**30:,.1f} GiB",
        f"GPU: {m.gpu or 'none'}"
        + ("" if cuda else " (torch sees no CUDA device; training runs on the CPU)"),
        f"GPU telemetry (NVML): {'available, ' + nv.name + ', driver ' + nv.driver if not nv.reason else 'unavailable — ' + nv.reason}",
        f"Python {m.python}, torch {m.torch}, torchvision {m.torchvision}",
        f"Platform: {m.platform}",
        f"Current folder: {fs.fs_type} on {fs.source} (mounted at {fs.mountpoint}; bytes fetched counted as "
        f"{_fetch_kind(fs.kind)})",
        f"Dataset cache: {default_cache_dir()}",
        "Simulated GPUs (--compute sim:NAME), ResNet-50 img/s:",
        *(f"  {p.name}: {p.source}" for p in GPU_PRESETS.values()),
    ]
    print("\n".join(lines))
    return 0


def _fetch_kind(kind: str) -> str:
    return {
        "block": "block I/O (read_bytes)",
        "network": "NFS client statistics where available, else cold-verified reads",
        "fuse": "cold-verified reads, cross-checked with the FUSE daemon's reads",
        "ram": "nothing: RAM-backed",
    }.get(kind, "cold-verified reads")
