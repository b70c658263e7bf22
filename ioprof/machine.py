"""What the measurement ran on: CPU, RAM, GPU and software versions."""

from __future__ import annotations

import os
import platform
import socket
import sys

import psutil
import torch
import torchvision

from ioprof.results import MachineInfo


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def is_virtual_machine() -> bool:
    """True when the CPU reports running under a hypervisor (x86 ``hypervisor`` flag)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and " hypervisor" in line for line in f)
    except OSError:
        return False


def usable_cores() -> int:
    """Cores this process may run on (affinity, and a cgroup CPU quota where one is set)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:
        n = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="utf-8") as f:
            quota, period = f.read().split()
        if quota != "max":
            n = min(n, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return n


def machine_info(gpu: str | None, gpu_driver: str | None, gpu_unavailable_reason: str | None) -> MachineInfo:
    return MachineInfo(
        cpu_model=cpu_model(),
        cpu_cores_logical=os.cpu_count() or 1,
        cpu_cores_usable=usable_cores(),
        ram_bytes=psutil.virtual_memory().total,
        gpu=gpu,
        gpu_driver=gpu_driver,
        gpu_unavailable_reason=gpu_unavailable_reason,
        python=sys.version.split()[0],
        torch=torch.__version__,
        torchvision=torchvision.__version__,
        platform=platform.platform(),
        hostname=socket.gethostname(),
        virtual_machine=is_virtual_machine(),
    )
