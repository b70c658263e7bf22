"""What the measurement ran on: CPU, RAM, GPU and software versions."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path

import psutil

from ioprof.core.results import MachineInfo


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


# A cgroup memory limit at or above this is "no limit" (cgroup v1 writes 2^63 rounded down to a page).
_NO_LIMIT = 2**60


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return None if text == "max" or not text.isdigit() else int(text)


def cgroup_memory(
    cgroup_file: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup"
) -> tuple[int, int] | None:
    """(limit, usage) in bytes of the tightest memory limit on this process's cgroup and its
    parents (cgroup v2 ``memory.max``/``memory.current``, v1 ``memory.limit_in_bytes``/
    ``memory.usage_in_bytes``); None where no limit is set."""
    try:
        lines = Path(cgroup_file).read_text().splitlines()
    except OSError:
        return None
    found: list[tuple[int, int]] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if controllers == "":
            base, names = Path(root), ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base, names = Path(root) / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        folder = base / rel.strip("/")
        while True:
            limit, usage = _read_int(folder / names[0]), _read_int(folder / names[1])
            if limit is not None and limit < _NO_LIMIT:
                found.append((limit, usage or 0))
            if folder == base or base not in folder.parents:
                break
            folder = folder.parent
    return min(found, key=lambda lu: lu[0] - lu[1]) if found else None


def memory_for_cache() -> tuple[int, str]:
    """Bytes of RAM the page cache could give this process's data, and where the figure comes from:
    the host's available memory, or less where a container's cgroup limit leaves less."""
    available = psutil.virtual_memory().available
    limited = cgroup_memory()
    if limited is not None and limited[0] - limited[1] < available:
        return max(0, limited[0] - limited[1]), f"cgroup memory limit {limited[0] / 2**30:,.1f} GiB"
    return available, "the host's available memory"


def versions(load: bool = False) -> dict[str, str]:
    """Python's, torch's and torchvision's versions in this process; ``load``: import them where
    not yet imported (else an empty version: a user's script that never imported torchvision).
    Without ``load`` it imports nothing, for what a user's process reports of itself."""
    if load:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    found = {"python": sys.version.split()[0]}
    for name in ("torch", "torchvision"):
        module = sys.modules.get(name)
        found[name] = str(getattr(module, "__version__", "")) if module is not None else ""
    return found


def machine_info(
    gpu: str | None,
    gpu_driver: str | None,
    gpu_unavailable_reason: str | None,
    software: dict[str, str] | None = None,
) -> MachineInfo:
    """This machine; ``software``: the versions a user's process ran with (``versions()`` there,
    so that ``ioprof run``, which only reads what it measured, need not import torch: 2.4 s),
    else this process's."""
    from ioprof.host.pagecache import proactive_reclaim

    cache_bytes, cache_source = memory_for_cache()
    reclaim, idle_s = proactive_reclaim()
    soft = software or versions(load=True)
    return MachineInfo(
        cpu_model=cpu_model(),
        cpu_cores_logical=os.cpu_count() or 1,
        cpu_cores_usable=usable_cores(),
        ram_bytes=psutil.virtual_memory().total,
        gpu=gpu,
        gpu_driver=gpu_driver,
        gpu_unavailable_reason=gpu_unavailable_reason,
        python=soft.get("python", ""),
        torch=soft.get("torch", ""),
        torchvision=soft.get("torchvision", ""),
        platform=platform.platform(),
        hostname=socket.gethostname(),
        virtual_machine=is_virtual_machine(),
        ram_for_cache_bytes=cache_bytes,
        ram_for_cache_source=cache_source,
        reclaim=reclaim,
        reclaim_idle_s=idle_s,
    )
