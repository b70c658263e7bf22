"""What each NVML reading the GPU sampler takes costs, in CPU and wall time per call.

Not a test: on a machine with an NVIDIA GPU it prints each call's cost (the figures behind the
sampler's once-a-second read of the driver's buffer; reports/benchmarks/gpu.json holds the H100's).

    python benchmarks/bench_nvml_calls.py

Refuses (exit 2) where NVML finds no GPU.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


def main() -> int:
    import pynvml

    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
    except pynvml.NVMLError as e:
        print(f"bench_nvml_calls: NVML finds no GPU here ({e})", file=sys.stderr)
        return 2
    calls: dict[str, Callable[[], Any]] = {
        "nvmlDeviceGetUtilizationRates": lambda: pynvml.nvmlDeviceGetUtilizationRates(h),
        "nvmlDeviceGetMemoryInfo": lambda: pynvml.nvmlDeviceGetMemoryInfo(h),
        "nvmlDeviceGetClockInfo": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "nvmlDeviceGetPowerUsage": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
        "nvmlDeviceGetSamples": lambda: pynvml.nvmlDeviceGetSamples(
            h, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0
        ),
        "nvmlDeviceGetPcieThroughput": lambda: pynvml.nvmlDeviceGetPcieThroughput(
            h, pynvml.NVML_PCIE_UTIL_RX_BYTES
        ),
    }
    for name, call in calls.items():
        n = 5 if "Pcie" in name else 100  # the PCIe query holds the thread ~20 ms a call
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        for _ in range(n):
            call()
        cpu_ms = (time.thread_time() - cpu0) / n * 1e3
        wall_ms = (time.perf_counter() - wall0) / n * 1e3
        print(f"{name}: {cpu_ms:.3f} ms CPU, {wall_ms:.3f} ms wall per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
