"""Result objects of a run, and their one file format (``results.json``).

Results are frozen dataclasses with the unit in each field name; raw samples are kept
and rounding happens only in the renderers. ``save`` writes atomically (temporary file,
then rename) so that an interrupted run keeps every finished cell.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ioprof.errors import IoprofError

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class MachineInfo:
    cpu_model: str
    cpu_cores_logical: int
    cpu_cores_usable: int  # what this process may run on (affinity / cgroup)
    ram_bytes: int
    gpu: str | None  # name of the GPU used, or None
    gpu_driver: str | None
    gpu_unavailable_reason: str | None
    python: str
    torch: str
    torchvision: str
    platform: str
    hostname: str
    virtual_machine: bool = False  # the CPU reports a hypervisor: the host may cache the disk


@dataclass(frozen=True)
class DatasetInfo:
    """One dataset the sweep ran on."""

    label: str  # "500x375" for generated sets, the path for --data
    path: str
    generated: bool
    files: int
    total_bytes: int
    mean_file_bytes: float
    mean_width_px: float
    mean_height_px: float
    bits_per_pixel: float
    fs_type: str
    mount_source: str
    classes: int


@dataclass(frozen=True)
class CacheInfo:
    regime: str  # cold | warm | as-is
    resident_fraction: float
    verified: bool
    method: str
    note: str


@dataclass(frozen=True)
class IoCounts:
    """Bytes read by the loader processes during a measurement window (kernel counters)."""

    read_bytes: int  # fetched from storage (/proc/<pid>/io read_bytes)
    read_chars: int  # returned by all reads, page-cache hits included (rchar)
    processes: int
    window_s: float

    @property
    def storage_mb_per_s(self) -> float:
        return self.read_bytes / 1e6 / self.window_s if self.window_s > 0 else 0.0

    @property
    def requested_mb_per_s(self) -> float:
        return self.read_chars / 1e6 / self.window_s if self.window_s > 0 else 0.0

    @property
    def cache_hit_ratio(self) -> float | None:
        """Share of requested bytes served from the page cache (None when nothing was read)."""
        if self.read_chars <= 0:
            return None
        return min(1.0, max(0.0, 1.0 - self.read_bytes / self.read_chars))


@dataclass(frozen=True)
class GpuTelemetry:
    """NVML samples taken during one measurement, or the reason there are none."""

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
    pcie_rx_kb_per_s: tuple[float, ...] = ()
    pcie_tx_kb_per_s: tuple[float, ...] = ()
    driver_util_pct: tuple[float, ...] = ()  # nvmlDeviceGetSamples buffer, when supported
    interval_s: float = 0.0  # sampling period asked for
    sampler_cpu_s: float = 0.0  # CPU time the sampling thread itself used
    sampled_s: float = 0.0  # wall time it ran

    @property
    def sampler_core_share(self) -> float:
        """Share of one core the sampler cost."""
        return self.sampler_cpu_s / self.sampled_s if self.sampled_s > 0 else 0.0


@dataclass(frozen=True)
class ComputeCeiling:
    """Training steps on synthetic batches already on the device (or the simulated rate)."""

    img_per_s: float
    simulated: bool
    device: str
    model: str
    batch_size: int
    step_s: tuple[float, ...]
    label: str  # "real resnet50 on cpu", "simulated 2800 img/s (h100)"
    source: str = ""


@dataclass(frozen=True)
class DecodeCeiling:
    """The real loader over files verified in RAM: decode + augment + collate only."""

    loader: str
    workers: int
    img_per_s: float
    images: int
    elapsed_s: float
    cache: CacheInfo


@dataclass(frozen=True)
class StorageCeiling:
    """Raw reads of the dataset's files in shuffled order at one concurrency."""

    concurrency: int
    files: int
    bytes: int
    elapsed_s: float
    read_mb_per_s: float
    files_per_s: float
    latency_s: tuple[float, ...]
    latency_p50_s: float
    latency_p99_s: float
    img_per_s: float  # files_per_s: one image per file
    storage_read_bytes: int  # what the kernel fetched from storage during the probe
    cache: CacheInfo
    emulated: str = ""  # name of the emulated storage profile, "" for the real device
    unreadable_files: int = 0  # could not be opened or read (broken link, permission…): skipped


@dataclass(frozen=True)
class TransferCeiling:
    """Host-to-device copy of one batch."""

    pinned: bool
    gb_per_s: float
    img_per_s: float
    batch_size: int


@dataclass(frozen=True)
class DatasetCeilings:
    dataset: str
    decode: tuple[DecodeCeiling, ...]
    storage: tuple[StorageCeiling, ...]


@dataclass(frozen=True)
class CellVerdict:
    """What limits one cell, and the numbers it was decided from."""

    bottleneck: str  # storage | decode | transfer | compute
    input_bound: str  # highly | moderately | not
    data_wait_share: float
    predicted_img_per_s: float | None
    predicted_by: str  # which ceiling sets the prediction
    residual: float | None  # (measured - predicted) / predicted
    residual_unexplained: bool
    evidence: str


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


@dataclass(frozen=True)
class CellResult:
    """One end-to-end measurement: a dataset × loader × worker count.

    On CUDA ``wait_s`` is the GPU's data stall per step and ``step_s`` the rest of its step
    (copy, compute, host overhead), both from CUDA events (``cuda`` has the parts); elsewhere
    they are host clock times, exact because the CPU and a simulated step run synchronously.
    """

    dataset: str
    loader: str  # serial | multiprocess
    workers: int  # 0 for serial
    batch_size: int
    warmup_steps: int
    steps: int  # measured steps the figures rest on
    images: int
    elapsed_s: float
    img_per_s: float
    wait_s: tuple[float, ...]  # per measured step: waiting for the next batch (CUDA: GPU data stall)
    step_s: tuple[float, ...]  # per measured step: the training step (CUDA: rest of the GPU's step)
    data_wait_share: float
    startup_s: float  # from creating the loader's iterator to the first batch
    io: IoCounts
    cache: CacheInfo
    gpu: GpuTelemetry
    stopped_by: str  # "steps" | "seconds"
    status: str = "ok"  # ok | failed
    error: str = ""
    verdict: CellVerdict | None = None
    cuda: CudaStepTimes | None = None  # the GPU's timeline per step, on CUDA with a real step

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.dataset, self.loader, self.workers)


@dataclass(frozen=True)
class Advice:
    """Recommendations for one dataset, computed from the measurements."""

    dataset: str
    workers_needed: int | None  # smallest measured worker count that reaches the compute ceiling
    workers_estimated: float | None  # compute ceiling / per-worker decode rate
    cores_usable: int
    cores_suffice: bool
    decode_shortfall: float | None  # best decode ceiling / compute ceiling, when below 1
    storage_mb_per_s_needed: float
    storage_mb_per_s_measured: float | None
    storage_suffices: bool | None
    serial_suffices: bool | None
    text: tuple[str, ...]


@dataclass(frozen=True)
class Analysis:
    overall_bottleneck: str
    overall_input_bound: str
    headline: tuple[str, ...]
    advice: tuple[Advice, ...]
    warnings: tuple[str, ...]
    compute_reference: str = ""  # the compute ceiling against the GPU's published figure


@dataclass(frozen=True)
class RunInfo:
    command: str
    started_at: str  # ISO 8601, UTC
    finished_at: str
    interrupted: bool
    device: str  # the device actually used, e.g. "cpu", "cuda:0"
    device_reason: str  # why this device ("--device auto: no CUDA device")
    batch_size: int
    warmup_steps: int
    steps: int
    seconds: float | None
    start_method: str  # multiprocessing start method of the loader workers
    ioprof_version: str


@dataclass(frozen=True)
class SweepResult:
    schema_version: int
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    datasets: tuple[DatasetInfo, ...]
    compute: ComputeCeiling | None
    transfer: tuple[TransferCeiling, ...]
    ceilings: tuple[DatasetCeilings, ...]
    cells: tuple[CellResult, ...]
    analysis: Analysis | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class CandidateResult:
    """One place the data could live, as measured (or why it could not be)."""

    label: str
    path: str
    kind: str  # "current" | "candidate" | "emulated"
    status: str  # "ok" | "missing" | "not writable" | "full" | "failed"
    reason: str
    fs_type: str
    mount_source: str
    ram_backed: bool
    sample_files: int
    sample_bytes: int
    write_mb_per_s: float | None  # copying the sample there: read + write + fsync
    storage: tuple[StorageCeiling, ...]


@dataclass(frozen=True)
class PlaceDecision:
    """What one candidate would give training, and whether copying the data there pays."""

    label: str
    kind: str
    best_workers: int
    predicted_img_per_s: float
    limited_by: str  # storage | decode | compute
    busy_share: float  # predicted / compute ceiling (MLPerf Storage's accelerator utilization)
    keeps_busy: bool
    storage_headroom: float  # storage img/s at best_workers / compute ceiling
    predicted_by_workers: dict[str, float]
    epoch_s: float
    copy_s: float | None
    saved_s: float | None  # over the epochs that read storage, vs the current location
    copy_pays_off: bool | None


@dataclass(frozen=True)
class PlaceResult:
    schema_version: int
    kind: str  # "place"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    dataset: DatasetInfo
    ram_available_bytes: int
    epochs: int
    compute: ComputeCeiling
    decode: tuple[DecodeCeiling, ...]
    candidates: tuple[CandidateResult, ...]
    decisions: tuple[PlaceDecision, ...] = ()
    recommendation: str = ""
    notes: tuple[str, ...] = ()


# --- (de)serialization ------------------------------------------------------------------

T = TypeVar("T")


def to_jsonable(obj: Any) -> Any:
    """Dataclasses → dicts (plus the derived figures users look for), tuples → lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        if isinstance(obj, IoCounts):  # derived, for readers of the file; ignored on load
            out["storage_mb_per_s"] = obj.storage_mb_per_s
            out["requested_mb_per_s"] = obj.requested_mb_per_s
            out["cache_hit_ratio"] = obj.cache_hit_ratio
        return out
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    return obj


def _from(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        non_none = [a for a in args if a is not type(None)]
        return _from(non_none[0], value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_jsonable(tp, value)
    if origin is tuple:
        inner = args[0] if args else Any
        return tuple(_from(inner, v) for v in value)
    if tp is float and value is not None:
        return float(value)
    return value


def from_jsonable(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a dataclass tree from ``to_jsonable``'s output (unknown keys are ignored)."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _from(hints[f.name], data[f.name])
    return cls(**kwargs)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(result: SweepResult | PlaceResult, path: Path) -> None:
    atomic_write_text(path, json.dumps(to_jsonable(result), indent=2) + "\n")


def load(path: str | os.PathLike[str]) -> SweepResult | PlaceResult:
    """Read a ``results.json``; refuse files of another schema version, with the reason."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IoprofError(f"{p}: no such file; pass the results.json of a finished run") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IoprofError(f"{p}: not a readable results.json ({e})") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise IoprofError(f"{p}: not an ioprof results.json (no schema_version)")
    if data["schema_version"] != SCHEMA_VERSION:
        raise IoprofError(
            f"{p}: schema_version {data['schema_version']} is not the {SCHEMA_VERSION} this ioprof reads; "
            "re-run the measurement with this version"
        )
    try:
        if data.get("kind") == "place":
            return from_jsonable(PlaceResult, data)
        return from_jsonable(SweepResult, data)
    except (TypeError, KeyError, ValueError, IndexError) as e:
        raise IoprofError(f"{p}: results.json is damaged or incomplete ({e})") from None
