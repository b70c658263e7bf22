"""``ioprof env``: what ioprof sees on this machine, and why a part is unavailable."""

from __future__ import annotations

import os

import torch

from ioprof.datasets.cache import default_cache_dir
from ioprof.machine import machine_info
from ioprof.pagecache import filesystem_of
from ioprof.telemetry import nvml_for_device


def env() -> int:
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
        f"Current folder: {fs.fs_type} on {fs.source} (mounted at {fs.mountpoint})",
        f"Dataset cache: {default_cache_dir()}",
    ]
    print("\n".join(lines))
    return 0
