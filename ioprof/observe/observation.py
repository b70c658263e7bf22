"""What the training process hands ``ioprof run``: its observation, as the JSON it writes.

The observation crosses a process boundary as ``observed-*.json`` (``Observer.write``), so it
stays plain data; these ``TypedDict``s name its keys once, for the side that writes it
(``Observer.observation``, ``LoaderRecorder.observed``) and the side that reads it back
(``result.build_result``), so that mypy checks every key either side uses. Keys a file written
by an earlier version may lack are ``NotRequired``: the reader gives them their defaults.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class IoFields(TypedDict):
    """The loader's processes' I/O counters over a span (``window.Totals``)."""

    read_bytes: int
    read_chars: int
    processes: int
    window_s: float
    own_read_chars: int | None


class CpuFields(TypedDict):
    """The loader's processes' CPU over a span, and (the window's) the producing threads'."""

    cpu_s: float
    window_s: float
    threads_window_s: NotRequired[float]  # the spans' seconds whose every process's threads were read
    thread_cpu_s: NotRequired[dict[str, float]]  # "pid/tid" → CPU s over the spans
    thread_runq_s: NotRequired[dict[str, float]]  # "pid/tid" → run-queue s
    spans_wall: NotRequired[Any]


class MountFields(TypedDict):
    """What the other counters of fetched bytes read over a span: NFS, a FUSE daemon, an interface."""

    nfs_bytes: int | None
    daemon_bytes: int | None
    daemon_pid: int | None
    daemon_name: str
    spans: Any
    net_bytes: int | None
    iface: str | None


class ProducerFields(TypedDict):
    """The processes making a loader's batches over a span: their seconds on a CPU or waiting for
    one (each process's, up to the span's), how many they were, and the span's seconds."""

    runnable_s: float
    processes: int
    window_s: float


class BeforeFields(TypedDict):
    """The first pass up to the window (``window.Before``)."""

    seconds: float
    first_batch_s: float | None
    batches: int
    wait_s: float
    io: IoFields
    cpu: CpuFields
    mount: MountFields
    producers: NotRequired[ProducerFields | None]


class LoaderObservation(TypedDict):
    """One loader's window (``LoaderRecorder.observed``)."""

    index: int
    role: str
    settings: dict[str, Any]  # the loader's own settings (num_workers, batch_size, dataset_root…)
    files_known: int
    source: dict[str, Any] | None
    opened: list[str]
    opened_held: NotRequired[bool | None]  # held still a turn of the workers later (None: not looked again)
    peers: NotRequired[list[str]]
    producer: NotRequired[str]  # worker | main
    workers_out: NotRequired[int | None]  # workers out of data as the window began
    splits: NotRequired[list[Any]]
    batches: int
    passes: int
    gaps_left_out: int
    segments: NotRequired[Any]
    window: str  # complete | partial | none
    waits: list[float]
    steps: list[float]
    images: list[int]
    clock: NotRequired[str]  # host | gpu-events
    host_waits: NotRequired[list[float]]
    host_steps: NotRequired[list[float]]
    optimizer_steps_between_batches: NotRequired[int]
    own_s_per_batch: NotRequired[float]
    own_once_s: NotRequired[float]
    off_thread: NotRequired[str]
    io: IoFields
    pieces: NotRequired[list[dict[str, Any]]]
    window_wall: NotRequired[list[float | None]]
    cpu: CpuFields
    mount: MountFields
    gpu: Any  # GpuTelemetry, as plain data once written
    inside: Any  # LoaderInside, likewise
    produced: NotRequired[list[Any]]  # its workers' batches in the window (``rates.Produced``)
    shm_warning: NotRequired[str]
    before: NotRequired[BeforeFields | None]
    pass_marks: NotRequired[list[dict[str, Any]]]
    dataset_info: NotRequired[Any]  # DatasetInfo as plain data, added by the observer


class Observation(TypedDict):
    """One training process's observation (``Observer.observation``)."""

    pid: int
    host: NotRequired[str]
    rank: NotRequired[int]  # torch.distributed's, from the environment (0 and 1 without it)
    world_size: NotRequired[int]
    local_rank: NotRequired[int]
    local_world_size: NotRequired[int]
    optimizer_steps: int
    device: str
    versions: NotRequired[dict[str, str]]
    loaders: list[LoaderObservation]
    probes: NotRequired[Any]
    probed_index: NotRequired[int | None]
    probe_pause_s: NotRequired[float]
    probe_refused: NotRequired[str]
    errors: NotRequired[list[str]]
    shm_failure: NotRequired[Any]
    config: dict[str, Any]
    written_at: float
