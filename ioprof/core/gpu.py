"""What the GPU showed during a measurement: NVML's telemetry, and CUDA events per step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace


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
    driver_t_s: tuple[float, ...] = ()  # when the driver took each of them, on the clock of t_s
    interval_s: float = 0.0  # sampling period asked for
    sampler_cpu_s: float = 0.0  # CPU time the sampling thread itself used
    sampled_s: float = 0.0  # wall time it ran

    def utilization_pct(self) -> tuple[float, ...]:
        """The utilization samples, each once: the driver's own buffer where it was read (the
        readings every ``interval_s`` repeat the driver's last value until it updates it, about
        every 0.17-0.2 s: two readings of one value are one observation), else those readings."""
        return self.driver_util_pct or self.gpu_util_pct

    def within(self, spans: Sequence[tuple[float, float]]) -> GpuTelemetry:
        """Only the samples taken within ``spans`` (seconds on the clock of ``t_s``): a window's
        measured stretches, the pauses between them and whatever ran after it left out."""
        if not self.available:
            return self

        def kept(times: tuple[float, ...], *columns: tuple[float, ...]) -> list[tuple[float, ...]]:
            keep = [i for i, t in enumerate(times) if any(a <= t <= b for a, b in spans)]
            return [tuple(c[i] for i in keep) for c in (times, *columns)]

        t_s, util, mem, used, clock, power = kept(
            self.t_s,
            self.gpu_util_pct,
            self.mem_util_pct,
            self.mem_used_bytes,
            self.sm_clock_mhz,
            self.power_w,
        )
        driver_t, driver = kept(self.driver_t_s, self.driver_util_pct)
        if not t_s:
            return GpuTelemetry(
                False,
                f"no NVML reading fell within the window's measured time ({sum(b - a for a, b in spans):.2f} s)",
                device_name=self.device_name,
            )
        return replace(
            self,
            t_s=t_s,
            gpu_util_pct=util,
            mem_util_pct=mem,
            mem_used_bytes=used,
            sm_clock_mhz=clock,
            power_w=power,
            driver_util_pct=driver,
            driver_t_s=driver_t,
        )

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
