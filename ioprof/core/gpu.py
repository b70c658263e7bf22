"""What the GPU showed during a measurement: NVML's telemetry, and CUDA events per step."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuTelemetry:
    """NVML samples taken during one measured window, or the reason there are none."""

    available: bool
    reason: str  # why unavailable, or why partial; "" when complete
    partial: bool = False
    device_name: str = ""
    t_s: tuple[float, ...] = ()
    gpu_util_pct: tuple[float, ...] = ()
    mem_util_pct: tuple[float, ...] = ()
    mem_used_bytes: tuple[float, ...] = ()
    sm_clock_mhz: tuple[float, ...] = ()
    power_w: tuple[float, ...] = ()
    driver_util_pct: tuple[float, ...] = ()  # nvmlDeviceGetSamples buffer since the window opened
    interval_s: float = 0.0  # sampling period asked for
    sampler_cpu_s: float = 0.0  # CPU time the sampling thread itself used
    sampled_s: float = 0.0  # wall time it ran

    def utilization_pct(self) -> tuple[float, ...]:
        """The utilization samples, each once: the driver's own buffer where it was read (the
        readings every ``interval_s`` repeat the driver's last value until it updates it, about
        every 0.17-0.2 s: two readings of one value are one observation), else those readings."""
        return self.driver_util_pct or self.gpu_util_pct

    @property
    def sampler_core_share(self) -> float:
        """Share of one core the sampler cost."""
        return self.sampler_cpu_s / self.sampled_s if self.sampled_s > 0 else 0.0


@dataclass(frozen=True)
class CudaStepTimes:
    """Per measured step on the GPU's own clock (CUDA events; no synchronization per step).

    For each step ``idle_s + copy_s + compute_s`` tiles the GPU's timeline, so their sum over
    the steps is ``elapsed_s``. ``data_stall_s`` is the part of ``idle_s`` during which the host
    was blocked waiting for the batch: ``min(idle, host wait)``.
    """

    host_wait_s: tuple[float, ...]  # blocked in next() on the host (may overlap GPU work)
    idle_s: tuple[float, ...]  # GPU idle between the previous step's end and this copy's start
    data_stall_s: tuple[float, ...]  # of idle_s, while the host waited for this batch
    copy_s: tuple[float, ...]  # host-to-device copy of the batch
    compute_s: tuple[float, ...]  # forward, backward, optimizer step
    elapsed_s: float  # window start → last step's end, on the GPU

    def slot_s(self) -> list[float]:
        """Each step's whole span on the GPU: idle + copy + compute."""
        return [i + c + k for i, c, k in zip(self.idle_s, self.copy_s, self.compute_s, strict=True)]

    def mean_s(self) -> dict[str, float]:
        """Mean per step of each part of the GPU's timeline (idle split into data / host)."""
        n = max(1, len(self.idle_s))
        return {
            "data_stall": sum(self.data_stall_s) / n,
            "host_overhead": (sum(self.idle_s) - sum(self.data_stall_s)) / n,
            "copy": sum(self.copy_s) / n,
            "compute": sum(self.compute_s) / n,
        }
