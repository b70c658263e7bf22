"""GPU telemetry through NVML (``nvidia-ml-py``), behind a small interface.

``open_gpu_sampler`` returns an NVML sampler, or an explicit unavailable one that carries
the reason in words (CPU device, no driver, MIG, permission). NVML utilization is the share
of a sample period in which at least one kernel ran — one small kernel counts as busy — so
the verdict leans on the data-wait share, and utilization is shown as supporting evidence.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from ioprof.core.gpu import GpuTelemetry

if TYPE_CHECKING:
    import torch

DEFAULT_INTERVAL_S = 0.1
# The driver's own utilization buffer holds ~100 samples (about 16 s on an H100) and one read of it
# (nvmlDeviceGetSamples) cost 2.6 ms of CPU there, 40× the four other readings together: read it once
# a second and at the window's end, not at every 0.1 s tick (2.5 % of a core, measured, otherwise).
DRIVER_BUFFER_READ_S = 1.0


@dataclass(frozen=True)
class GpuSample:
    t_s: float
    gpu_util_pct: float
    mem_util_pct: float
    mem_used_bytes: float
    sm_clock_mhz: float
    power_w: float


class GpuSampler(Protocol):
    def start(self) -> None: ...

    def so_far(self) -> GpuTelemetry:
        """What it has read until now; it reads on."""

    def stop(self) -> GpuTelemetry: ...


class UnavailableSampler:
    """No telemetry, and the reason why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def start(self) -> None:
        pass

    def so_far(self) -> GpuTelemetry:
        return self.stop()

    def stop(self) -> GpuTelemetry:
        return GpuTelemetry(available=False, reason=self.reason)


class DriverBuffer(Protocol):
    """The driver's own buffer of utilization samples (``nvmlDeviceGetSamples``)."""

    def start(self) -> None:
        """From now on: samples older than this call are never returned."""

    def read(self) -> list[tuple[float, float]]:
        """Samples taken since the last read (or since ``start``): (when, as ``time.time()``; value)."""


def new_samples(samples: list[tuple[int, float]], last_seen_us: int) -> tuple[list[tuple[float, float]], int]:
    """The ``(timestamp µs, value)`` samples newer than ``last_seen_us`` as (seconds, value), and
    the newest timestamp seen. The driver's buffer holds samples from before a window opened; they
    are dropped."""
    fresh = [(t, v) for t, v in samples if t > last_seen_us]
    return [(t / 1e6, v) for t, v in fresh], max([last_seen_us, *(t for t, _ in fresh)])


class ThreadSampler:
    """Calls ``read`` every ``interval_s`` in a background thread from ``start`` to ``stop``.

    A failure of ``read`` mid-run marks the telemetry partial and stops sampling; it never
    ends the measurement. ``driver`` (optional) is the driver's own sample buffer, read from
    ``start`` on.
    """

    def __init__(
        self,
        read: Callable[[float], GpuSample],
        device_name: str,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        driver: DriverBuffer | None = None,
    ) -> None:
        self._read = read
        self._name = device_name
        self._interval_s = interval_s
        self._clock = clock
        self._driver_buffer = driver
        self._samples: list[GpuSample] = []
        self._driver: list[tuple[float, float]] = []  # (s since start, value)
        self._failure = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._t0_wall = time.time()  # the driver stamps its samples on this clock
        self._cpu_s = 0.0
        self._driver_read_at = -float("inf")

    def sample_once(self, reading: bool = True) -> bool:
        """Take one sample, and the driver buffer's new ones once a second — or the buffer's
        alone (``reading`` False, at the window's end); False once reading has failed."""
        try:
            t_s = self._clock() - self._t0
            if reading:
                self._samples.append(self._read(t_s))
            if self._driver_buffer is not None and (
                not reading or t_s - self._driver_read_at >= DRIVER_BUFFER_READ_S
            ):
                self._driver.extend((t - self._t0_wall, v) for t, v in self._driver_buffer.read())
                self._driver_read_at = t_s
        except Exception as e:  # any NVML failure mid-run: keep what we have, say why
            self._failure = f"NVML stopped answering mid-run ({type(e).__name__}: {e}); telemetry is partial"
            return False
        return True

    def _loop(self) -> None:
        cpu0 = time.thread_time()
        due = self._clock()
        try:
            while not self._stop.is_set():
                if not self.sample_once():
                    return
                # on the interval's schedule, not the interval after each reading's own time
                due = max(due + self._interval_s, self._clock())
                self._stop.wait(due - self._clock())
            self.sample_once(reading=False)  # the window's end: the driver's samples since its last read
        finally:
            self._cpu_s = time.thread_time() - cpu0

    def start(self) -> None:
        self._t0, self._t0_wall = self._clock(), time.time()
        if self._driver_buffer is not None:
            self._driver_buffer.start()
        self._thread = threading.Thread(target=self._loop, name="ioprof-nvml", daemon=True)
        self._thread.start()

    def so_far(self) -> GpuTelemetry:
        """The readings until now, the sampler reading on (a run's results saved mid-run)."""
        cpu_s = self._cpu_s
        thread = self._thread
        if thread is not None and thread.is_alive() and thread.ident is not None:
            try:
                cpu_s = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except (AttributeError, OSError):  # no per-thread CPU clock here: its cost is not known yet
                cpu_s = 0.0
        return self._telemetry(list(self._samples), list(self._driver), cpu_s)

    def stop(self) -> GpuTelemetry:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self._telemetry(self._samples, self._driver, self._cpu_s)

    def _telemetry(
        self, samples: list[GpuSample], driver: list[tuple[float, float]], cpu_s: float
    ) -> GpuTelemetry:
        t = telemetry_from_samples(self._name, samples, driver, self._failure)
        return replace(
            t, interval_s=self._interval_s, sampler_cpu_s=cpu_s, sampled_s=self._clock() - self._t0
        )


def telemetry_from_samples(
    name: str, samples: list[GpuSample], driver_util: list[tuple[float, float]], failure: str
) -> GpuTelemetry:
    if not samples:
        return GpuTelemetry(available=False, reason=failure or "no NVML sample was taken", device_name=name)
    return GpuTelemetry(
        available=True,
        reason=failure,
        partial=bool(failure),
        device_name=name,
        t_s=tuple(s.t_s for s in samples),
        gpu_util_pct=tuple(s.gpu_util_pct for s in samples),
        mem_util_pct=tuple(s.mem_util_pct for s in samples),
        mem_used_bytes=tuple(s.mem_used_bytes for s in samples),
        sm_clock_mhz=tuple(s.sm_clock_mhz for s in samples),
        power_w=tuple(s.power_w for s in samples),
        driver_util_pct=tuple(v for _, v in driver_util),
        driver_t_s=tuple(t for t, _ in driver_util),
    )


@dataclass(frozen=True)
class NvmlStatus:
    """Whether NVML can sample the GPU torch uses, with the handle or the reason."""

    handle: Any
    name: str
    driver: str
    reason: str  # "" when usable


def _nvml_reason(e: Exception) -> str:
    text = str(e)
    if "Shared Library Not Found" in text or "LibraryNotFound" in type(e).__name__:
        return "NVML library not found: no NVIDIA driver is installed on this machine"
    if "Insufficient Permissions" in text or "NoPermission" in type(e).__name__:
        return "NVML refused access (insufficient permissions)"
    if "Driver Not Loaded" in text:
        return "NVML found no loaded NVIDIA driver"
    return f"NVML unavailable ({type(e).__name__}: {text})"


def nvml_status(cuda_index: int | None, uuid: str | None = None, pci_bus_id: str | None = None) -> NvmlStatus:
    """Open NVML for the GPU that torch calls ``cuda:cuda_index`` (matched by UUID, else PCI bus id)."""
    try:
        import pynvml
    except ImportError:
        return NvmlStatus(
            None, "", "", "the nvidia-ml-py package is not installed (pip install nvidia-ml-py)"
        )
    try:
        pynvml.nvmlInit()
    except Exception as e:  # pynvml.NVMLError subclasses, created dynamically
        return NvmlStatus(None, "", "", _nvml_reason(e))
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        if cuda_index is None:
            return NvmlStatus(
                None, "", str(driver), "the compute device is the CPU; there is no GPU to sample"
            )
        handle = None
        if uuid:
            # torch's uuid has no "GPU-" prefix; NVML's has
            text = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
            try:
                handle = pynvml.nvmlDeviceGetHandleByUUID(text)
            except Exception:
                handle = None
        if handle is None and pci_bus_id:
            handle = pynvml.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id)
        if handle is None:
            return NvmlStatus(
                None, "", str(driver), f"NVML could not match torch's cuda:{cuda_index} by UUID or PCI bus id"
            )
        try:
            current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
            if current == pynvml.NVML_DEVICE_MIG_ENABLE:
                return NvmlStatus(
                    None,
                    "",
                    str(driver),
                    "the GPU is in MIG mode: NVML utilization is not supported on MIG instances",
                )
        except Exception:
            pass  # MIG not supported by this GPU: nothing to refuse
        name = pynvml.nvmlDeviceGetName(handle)
        return NvmlStatus(handle, str(name), str(driver), "")
    except Exception as e:
        return NvmlStatus(None, "", "", _nvml_reason(e))


def nvml_for_device(device: torch.device) -> tuple[str | None, NvmlStatus]:
    """The GPU's name as torch reports it (None on the CPU) and NVML opened for that very GPU,
    matched by UUID, else PCI bus id (so CUDA_VISIBLE_DEVICES cannot point NVML elsewhere)."""
    if device.type != "cuda":
        return None, nvml_status(None)
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    uuid = str(getattr(props, "uuid", "") or "") or None
    pci_parts = [getattr(props, a, None) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    pci = None
    if all(p is not None for p in pci_parts):
        pci = f"{pci_parts[0]:08X}:{pci_parts[1]:02X}:{pci_parts[2]:02X}.0"
    return props.name, nvml_status(index, uuid, pci)


def _nvml_reader(handle: Any) -> Callable[[float], GpuSample]:
    import pynvml

    def read(t_s: float) -> GpuSample:
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return GpuSample(
            t_s=t_s,
            gpu_util_pct=float(util.gpu),
            mem_util_pct=float(util.memory),
            mem_used_bytes=float(mem.used),
            sm_clock_mhz=float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            power_w=pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        )

    return read


class NvmlDriverBuffer:
    """``nvmlDeviceGetSamples`` for GPU utilization, from the moment ``start`` is called."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._last_seen_us = 0

    def start(self) -> None:
        # NVML stamps its samples with the CPU clock in microseconds since the epoch
        self._last_seen_us = int(time.time() * 1e6)

    def read(self) -> list[tuple[float, float]]:
        import pynvml

        try:
            _type, samples = pynvml.nvmlDeviceGetSamples(
                self._handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, self._last_seen_us
            )
        except pynvml.NVMLError_NotFound:
            return []  # no new sample since the last call
        values, self._last_seen_us = new_samples(
            [(int(s.timeStamp), float(s.sampleValue.uiVal)) for s in samples], self._last_seen_us
        )
        return values


def _driver_buffer(handle: Any) -> NvmlDriverBuffer | None:
    """The driver's utilization sample buffer, or None where the GPU has none."""
    import pynvml

    try:
        pynvml.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
    except Exception:
        return None
    return NvmlDriverBuffer(handle)


def open_gpu_sampler(status: NvmlStatus, interval_s: float = DEFAULT_INTERVAL_S) -> GpuSampler:
    """The NVML sampler for the GPU in ``status``, or the unavailable one with its reason."""
    if status.reason or status.handle is None:
        return UnavailableSampler(status.reason or "no GPU handle")
    return ThreadSampler(
        _nvml_reader(status.handle), status.name, interval_s, driver=_driver_buffer(status.handle)
    )
