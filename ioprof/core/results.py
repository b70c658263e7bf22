"""Result objects of a run: what was measured, as frozen dataclasses with the unit in each field name.

Raw samples are kept (per step, per batch, per file) and every figure's 95 % interval is derived
from them here, by the pure functions of ``stats``; rounding happens only in the renderers.
Conclusions (verdicts, advice, findings) are not measurements: their types live in
``findings`` and they are recomputed from these objects whenever a report is rendered.
The file format (``results.json``) is ``resultfile``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ioprof.core.config import LoaderSetting
from ioprof.core.rates import CellRates, Method, cell_rates, loader_rate
from ioprof.core.stats import Interval, gaps, ratio_interval
from ioprof.core.thresholds import GROWTH_NOISE_BYTES
from ioprof.core.vocab import Bottleneck, CacheRegime, LoaderKind

if TYPE_CHECKING:
    from ioprof.core.findings import Analysis, CellVerdict, PlaceDecision, Ranking, Recommendation

SCHEMA_VERSION = 2


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
    ram_for_cache_bytes: int = 0  # what the page cache could hold for this process (cgroup limit included)
    ram_for_cache_source: str = ""
    # the kernel's own reclaim of idle pages where one runs (DAMON's pageout), and the seconds a
    # page must look idle before it goes ("" and None: none runs, or it could not be read)
    reclaim: str = ""
    reclaim_idle_s: float | None = None


# The filesystem type ioprof gives an S3-compatible object store (``--data s3://…``).
OBJECT_STORE_FS_TYPE = "s3"
# Data read by requests, each a GET whose bytes cross the network and nothing on this host keeps:
# objects in a store, and tar shards named by HTTP(S) URLs.
REQUEST_FS_TYPES = frozenset({OBJECT_STORE_FS_TYPE, "http", "https"})


@dataclass(frozen=True)
class DatasetInfo:
    """One dataset the run read. A figure nobody could read is None, never 0 or "": a user's
    dataset that does not say what it reads has no known size, file size or filesystem."""

    label: str  # "500x375" for generated sets, the path for --data
    path: str
    generated: bool
    files: int | None  # files (loose files), shards or objects it reads; None: unknown
    total_bytes: int | None
    mean_file_bytes: float | None  # bytes per sample: a loose file's, or a shard's ÷ its samples
    mean_width_px: float | None
    mean_height_px: float | None
    bits_per_pixel: float | None
    fs_type: str | None  # None: its filesystem was not identified (a URL's is "http", "https"…)
    mount_source: str | None
    classes: int | None
    fs_kind: str = ""  # block | network | fuse | ram | unknown (pagecache.FilesystemInfo.kind)
    keeps_pages: bool | None = None  # its filesystem keeps read pages cached (sshfs drops them at each open)
    samples: int | None = None  # samples it holds (the dataset's length), where known
    sharded: bool = False  # tar shards ioprof read itself (``files``: shards; ``samples``: estimated)

    # A dataset ioprof listed itself (sweep, place, whatif, profile: files it found and stat'ed)
    # always has these; only a user's dataset observed by ``run`` may not.
    @property
    def listed_files(self) -> int:
        assert self.files is not None, f"{self.label}: number of files unknown"
        return self.files

    @property
    def listed_bytes(self) -> int:
        assert self.total_bytes is not None, f"{self.label}: size unknown"
        return self.total_bytes

    @property
    def listed_file_bytes(self) -> float:
        assert self.mean_file_bytes is not None, f"{self.label}: file size unknown"
        return self.mean_file_bytes

    @property
    def object_store(self) -> bool:
        """Objects in an S3-compatible store or shards over HTTP(S), read by GETs."""
        return self.fs_type in REQUEST_FS_TYPES

    @property
    def epoch_samples(self) -> int:
        """The samples an epoch reads: its samples where it is sharded (estimated), else its files."""
        return self.samples if self.samples is not None else self.listed_files


@dataclass(frozen=True)
class CacheInfo:
    """The page-cache regime of one measurement, and whether it was verified.

    ``resident_fraction``: of the files' pages, resident just before the measurement;
    ``resident_after``: of the files the measurement read, resident just after it (cold: each
    file is evicted after it is read, so this stays near 0; None where not checked).
    """

    regime: CacheRegime
    resident_fraction: float
    verified: bool
    method: str
    note: str
    resident_after: float | None = None
    evict_after_read: bool = False


@dataclass(frozen=True)
class CrossCheck:
    """A second count of the bytes fetched, by another method, shown beside the primary one."""

    method: str
    source: str
    bytes: int


@dataclass(frozen=True)
class Fetched:
    """Bytes fetched from storage during a measurement, and how they were counted.

    ``method``: ``block-io`` (kernel ``read_bytes`` of the loader's processes; block devices
    only), ``nfs-mountstats`` (NFS client statistics: bytes read from the server),
    ``fuse-daemon`` (what the FUSE daemon read), ``cold-reads`` (bytes read from files verified
    cold and evicted after each read, so every one was fetched), ``ram`` (a RAM-backed
    filesystem: there is no storage below it), ``emulated`` (every read charged to the emulated
    device), ``object-gets`` (an object store: the bodies of the loader's GETs — no page cache holds
    an object, so every byte crossed the network), ``unknown`` (none of these applies: bytes
    fetched cannot be known here).
    """

    bytes: int | None
    method: str
    source: str = ""
    cross_checks: tuple[CrossCheck, ...] = ()

    @property
    def known(self) -> bool:
        return self.bytes is not None


UNKNOWN_FETCH = Fetched(None, "unknown")
# Methods whose count covers the whole host, not one process: every rank on a host sees them all.
MACHINE_WIDE_FETCH_METHODS = ("nfs-mountstats", "fuse-daemon", "interface-rx")


@dataclass(frozen=True)
class IoCounts:
    """Kernel I/O counters of the loader's processes over a measurement window (psutil).

    ``read_bytes`` counts block I/O only: on NFS and FUSE a fetched byte does not show there,
    which is why ``Fetched`` names how bytes from storage were counted.
    """

    read_bytes: int  # /proc/<pid>/io read_bytes: block I/O caused by these processes
    read_chars: int  # rchar: bytes returned by all their reads (page-cache hits, pipes included)
    processes: int
    window_s: float
    own_read_chars: int | None = None  # their own threads' rchar: no reaped child's (run)

    def derived(self) -> dict[str, Any]:
        """Figures users look for in the file (ignored when loading)."""
        return {
            "read_bytes_mb_per_s": self.read_bytes / 1e6 / self.window_s if self.window_s > 0 else 0.0,
            "read_chars_mb_per_s": self.read_chars / 1e6 / self.window_s if self.window_s > 0 else 0.0,
        }


@dataclass(frozen=True)
class WaitSplit:
    """What happened while the training loop waited for a batch, per measured unit
    (``observe.producers``): the training process's calling thread on a CPU receiving a worker's
    batch (unpickling it, rebuilding its tensors: its own work), and over the rest of the wait
    the batch's producer — its thread on a CPU, that thread runnable but waiting for a CPU
    (run-queue delay), its process's other threads on a CPU (an OpenMP team, a decoder's
    threads); what is left it was off-CPU: blocked reading its source, or on a lock. Units whose
    producer could not be told (the batch had already arrived) are left out.
    """

    # the stage each part of the producer's time blames: off-CPU is the source; on a CPU, or
    # waiting for one, the pipeline's own CPU work (decode and augment)
    STAGE: ClassVar[dict[str, Bottleneck]] = {"source": "storage", "cpu": "decode", "cores": "decode"}

    wait_s: tuple[float, ...]
    cpu_s: tuple[float, ...]  # the producing thread's
    runq_s: tuple[float, ...]
    others_cpu_s: tuple[float, ...]  # its process's other threads' (may read below 0 per unit: ticks)
    producer: str  # worker | main (the training process loads, without workers)
    units: int  # measured units in the window (these are the ones whose producer was known)
    receive_s: tuple[float, ...] = ()  # the calling thread's CPU (workers only: receiving the batch)
    # the calling thread's run-queue delay (workers only: woken by the batch, waiting for a core)
    receive_runq_s: tuple[float, ...] = ()
    looks: int = 1

    def parts(self) -> dict[str, list[float]]:
        """Per unit, seconds of the wait in each state: receive (the training process's own work on
        the batch), cores (the training process's thread runnable, waiting for a core once the
        batch woke it), and of the rest the producer's: cpu (all its process's threads, at most
        that rest), cores (runnable, waiting for one), source (off-CPU)."""
        receive = list(self.receive_s) or [0.0] * len(self.wait_s)
        woken = list(self.receive_runq_s) or [0.0] * len(self.wait_s)
        cpu, runq, off, got = [], [], [], []
        for w, c, r, o, g, k in zip(
            self.wait_s, self.cpu_s, self.runq_s, self.others_cpu_s, receive, woken, strict=True
        ):
            g = min(w, max(0.0, g))
            k = min(w - g, max(0.0, k))
            rest = w - g - k
            on = min(rest, max(0.0, c + o))
            q = min(rest - on, max(0.0, r))
            got.append(g)
            cpu.append(on)
            runq.append(k + q)
            off.append(rest - on - q)
        return {"source": off, "cpu": cpu, "cores": runq, "receive": got}

    def shares(self) -> dict[str, Interval]:
        """Each state's share of the waits, with its 95 % interval (batch means over units)."""
        if not self.wait_s:
            return {}
        waits = list(self.wait_s)
        return {
            name: ratio_interval(xs, waits, 1, self.looks).clipped(0.0, 1.0)
            for name, xs in self.parts().items()
        }


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
    looks: int = 1  # how often a stopping rule looked at its interval (``stats.LOOKS``), or 1

    def throughput(self) -> Interval:
        """img/s with its 95 % interval (batch means over steps)."""
        if self.simulated:
            return Interval.exact(self.img_per_s)
        return ratio_interval([float(self.batch_size)] * len(self.step_s), list(self.step_s), 1, self.looks)

    def derived(self) -> dict[str, Any]:
        return _interval_fields("img_per_s", self.throughput())


@dataclass(frozen=True)
class DecodeCeiling:
    """The real loader over an in-memory sample of the dataset: decode + augment + collate only.

    ``batch_images`` and ``batch_s``: per measured batch, its images and the time since the
    previous batch arrived (the raw samples of the rate and its interval).
    """

    loader: LoaderKind
    workers: int
    img_per_s: float
    images: int
    elapsed_s: float
    cache: CacheInfo
    batch_images: tuple[int, ...] = ()
    batch_s: tuple[float, ...] = ()
    sample_files: int = 0  # the in-memory sample the loader decoded
    sample_bytes: int = 0
    stopped_by: str = ""  # interval | seconds | batches
    looks: int = 1  # how often a stopping rule looked at its interval (``stats.LOOKS``), or 1
    # each batch a worker completed in the window: (cycle s, making s, images) (``rates.Produced``)
    produced: tuple[tuple[float, float, int], ...] = ()

    @property
    def setting(self) -> LoaderSetting:
        return LoaderSetting(self.loader, self.workers)

    @property
    def per_reader_img_per_s(self) -> float:
        """What one reader decodes: a worker, or the training process of the serial loader."""
        return self.img_per_s / self.setting.concurrency

    def rate(self) -> tuple[Interval, Method]:
        """img/s with its 95 % interval, centred on img_per_s (the figure every table and answer
        shows, as a cell's is), from the batches' arrivals or the workers' own (``rates``)."""
        return loader_rate(
            images=[float(n) for n in self.batch_images],
            durations=self.batch_s,
            img_per_s=self.img_per_s,
            workers=self.workers,
            produced=self.produced,
            looks=self.looks,
        )

    def throughput(self) -> Interval:
        return self.rate()[0]

    def derived(self) -> dict[str, Any]:
        return _interval_fields("img_per_s", self.throughput())


@dataclass(frozen=True)
class StorageCeiling:
    """Raw reads of the dataset's files in shuffled order at one concurrency.

    ``completed_s`` / ``completed_bytes``: each file's completion time since the start, in the
    order files completed, and its size: the raw samples of the rate and its interval. ``warmup``:
    how many of the first completions were a start-up transient (``stats.steady_start``: a link's
    burst, a connection's slow start), read and counted as fetched but not in the rates.
    """

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
    storage_read_bytes: int  # kernel read_bytes of the probe's process (block devices)
    cache: CacheInfo
    emulated: str = ""  # name of the emulated storage profile, "" for the real device
    unreadable_files: int = 0  # could not be opened or read (broken link, permission…): skipped
    fetched: Fetched = UNKNOWN_FETCH
    completed_s: tuple[float, ...] = ()
    completed_bytes: tuple[int, ...] = ()
    stopped_by: str = ""  # files | interval | seconds
    shared_by: int = 1  # processes (ranks on one host) whose readers it was measured for together
    looks: int = 1  # how often a stopping rule looked at its interval (``stats.LOOKS``), or 1
    latency_kind: str = "whole file"  # what latency_s times: a whole file's read, or its first byte (streams)
    where: str = ""  # what was read, when not files on a filesystem: "http://host:port", "a command"
    bytes_per_sample: float | None = None  # items of many samples (shards): img/s is MB/s ÷ this
    retries: int = 0  # requests the client had to repeat (an object store's throttling, 5xx, drops)
    warmup: int = 0  # first completions left out of the rates: a start-up transient

    def sample_bytes(self) -> float:
        """The bytes one sample takes: ``bytes_per_sample`` where a file holds many, else the mean
        of the files read (0 when none was)."""
        return self.bytes_per_sample or (self.bytes / self.files if self.files else 0.0)

    def _spans(self) -> list[float]:
        """Each counted completion's time since the one before (none before ``warmup``)."""
        if not self.completed_s:  # a schema-1 file kept no completions: no interval
            return []
        return gaps(self.completed_s)[self.warmup :]

    def bandwidth(self) -> Interval:
        """MB/s with its 95 % interval (batch means over consecutive completions)."""
        return ratio_interval(
            [b / 1e6 for b in self.completed_bytes[self.warmup :]],
            self._spans(),
            self.concurrency,
            self.looks,
        )

    def file_rate(self) -> Interval:
        """img/s it can feed with its 95 % interval: files/s (one image a file), or for items of
        many samples (shards) its bandwidth ÷ the bytes of a sample."""
        if self.bytes_per_sample:
            return ratio_interval(
                [b / self.bytes_per_sample for b in self.completed_bytes[self.warmup :]],
                self._spans(),
                self.concurrency,
                self.looks,
            )
        spans = self._spans()
        return ratio_interval([1.0] * len(spans), spans, self.concurrency, self.looks)

    def derived(self) -> dict[str, Any]:
        return {
            **_interval_fields("read_mb_per_s", self.bandwidth()),
            **_interval_fields("img_per_s", self.file_rate()),
        }


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
    real_storage: StorageCeiling | None = None  # the real device, when storage was emulated
    compute: ComputeCeiling | None = None  # this dataset's own consumer (ioprof run: each loader's step)


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
class StageTime:
    """One stage of a sample inside the loader's workers (or, ``where == "main"``, of a batch in
    the training process): its mean time and share with their 95 % intervals (batch means)."""

    name: str  # read | decode | a transform's class name | rest of __getitem__ | collate | …
    where: str  # worker | main
    s_per_sample: float  # main-process stages: per batch (``s_per_batch``)
    low_s: float
    high_s: float
    share: float | None = None  # of the worker's time per sample (worker stages only)
    share_low: float | None = None
    share_high: float | None = None

    @property
    def s_per_batch(self) -> float:
        return self.s_per_sample


@dataclass(frozen=True)
class LoaderStages:
    """Where a worker's time per sample goes: each stage timed inside the workers as they ran.

    ``seen``: ``stages`` when the dataset's file loader and transforms could be timed one by one
    (an ImageFolder-like dataset with a ``transforms.Compose``, or ioprof's own), ``getitem``
    when only ``__getitem__`` as a whole and collate could be (a custom dataset), ``iterator``
    for an iterable dataset (its iterator's next, and collate).
    ``worker_s_per_sample`` is the workers' time per sample measured around each batch's fetch,
    apart from the stages: the named stages add up to it less ``rest of __getitem__``.
    """

    worker: tuple[StageTime, ...]  # costliest first
    main: tuple[StageTime, ...]  # pin-memory copy, wait for the batch (per batch)
    worker_s_per_sample: float
    worker_low_s: float
    worker_high_s: float
    samples: int
    batches: int
    processes: int
    seen: str  # stages | getitem
    timing_cost_s_per_sample: float  # what the timers themselves cost, measured in each worker
    note: str = ""

    def leading(self) -> StageTime | None:
        """The costliest stage one can act on (not ``rest of __getitem__`` unless it is all)."""
        named = [s for s in self.worker if s.name != REST_OF_GETITEM]
        return named[0] if named else (self.worker[0] if self.worker else None)

    @property
    def named_share(self) -> float:
        """Σ named stages ÷ the workers' time per sample (1 − the share left unexplained)."""
        named = sum(s.s_per_sample for s in self.worker if s.name != REST_OF_GETITEM)
        return named / self.worker_s_per_sample if self.worker_s_per_sample > 0 else 0.0


REST_OF_GETITEM = "rest of __getitem__"


@dataclass(frozen=True)
class WorkerMemory:
    """Memory of the loader's processes over the window, and what more workers would need.

    USS: memory only that process holds (what it costs to add one); PSS: with shared pages split.
    ``growth_bytes_per_1000_samples``: a worker's USS growth per 1,000 samples it produced — copy-
    on-read of the dataset's Python objects shows as growth. ``shm_*``: /dev/shm, where batches
    travel from workers to the training process (``batch_bytes`` × ``prefetch_factor`` × workers
    of them are in flight).
    """

    main_uss_bytes: int
    main_pss_bytes: int
    worker_uss_bytes: int | None  # mean over the workers, at the window's end (None: none read)
    worker_pss_bytes: int | None
    growth_bytes_per_1000_samples: float | None  # None: not judged (``growth_note`` says why) or none
    growth_low: float | None
    growth_high: float | None
    readings: int
    batch_bytes: int  # one batch's tensors
    prefetch_factor: int
    workers: int
    shm_total_bytes: int | None  # None: no /dev/shm here
    shm_free_bytes: int | None  # before the loader's first batch
    ram_available_bytes: int  # the host's available memory, or less under a cgroup limit
    ram_source: str
    samples_per_epoch: int | None  # the dataset's length (what each worker may still touch)
    persistent_workers: bool = False
    growth_note: str = ""  # why no growth is given: the window too short to judge, a fit not steady
    growth_samples: int = 0  # samples per process the fit rests on, after the warm-up
    growth_cause: str = ""  # copy-on-read | leak | unknown (named only with evidence) | "" (no growth)
    revisited: bool = False  # a process went on growing over samples it had already produced
    dataset_objects: int | None = None  # Python objects the dataset holds (counted where it grows)
    dataset_object_bytes: int | None = None
    # persistent workers: what one holds more from an epoch to the next at the same point of both
    # (None: not judged — fewer than two epochs of the same workers), and the epochs read
    epoch_growth_bytes: float | None = None
    epoch_growth_low: float | None = None
    epoch_growth_high: float | None = None
    epochs_seen: int = 0

    @property
    def shm_in_flight_bytes(self) -> int:
        return self.batch_bytes * self.prefetch_factor * self.workers

    @property
    def grows_per_epoch(self) -> bool:
        """Persistent workers that hold more at the same point of each epoch than of the last,
        by more than the allocator's noise even at the interval's low end."""
        return self.epoch_growth_low is not None and self.epoch_growth_low >= GROWTH_NOISE_BYTES

    @property
    def grows(self) -> bool:
        """A growth to speak of: its interval's low end above the noise floor, with no note
        against it (the measurement's window and steadiness checks apply only above that floor)."""
        return (
            self.growth_bytes_per_1000_samples is not None
            and self.growth_low is not None
            and self.growth_low >= GROWTH_NOISE_BYTES
            and not self.growth_note
        )


@dataclass(frozen=True)
class CoreUse:
    """The threads that ran against the cores this process may use (``sched_getaffinity``).

    ``threads_busy``: threads of the training process and its workers that were on a CPU at
    least a tenth of the window, times the ranks on the host; ``cpu_busy_cores``: their CPU
    seconds ÷ the window's seconds, times the ranks on the host.
    """

    affinity_cores: int
    intra_op_threads: int  # torch.get_num_threads() in the training process
    ranks_on_host: int
    pin_memory_thread: bool
    workers: int
    threads_per_worker: int  # most busy threads in one worker (torch's 1, more where OpenCV/OpenMP pools run)
    threads_busy: int
    cpu_busy_cores: float | None  # None: the window had no span between two readings (too short)
    window_s: float
    runq_share: float | None = None  # of the threads' runnable time, waiting for a core (schedstat)

    @property
    def threads_wanted(self) -> int:
        per_rank = (
            self.intra_op_threads + int(self.pin_memory_thread) + self.workers * self.threads_per_worker
        )
        return per_rank * self.ranks_on_host

    @property
    def oversubscribed(self) -> bool:
        """The cores in the mask were full and threads queued for them: runnable threads waited for
        a core a good share of their time (run-queue delay), or, where that was not read, more
        threads ran than there are cores."""
        if self.cpu_busy_cores is None or self.cpu_busy_cores < OVERSUBSCRIBED_BUSY * self.affinity_cores:
            return False
        if self.runq_share is not None:
            return self.runq_share >= OVERSUBSCRIBED_RUNQ_SHARE
        return max(self.threads_busy, 1) > self.affinity_cores


# The cores in the mask count as full from this share of their time busy, and oversubscribed when
# runnable threads spent at least this share of their runnable time waiting for one of them.
OVERSUBSCRIBED_BUSY = 0.85
OVERSUBSCRIBED_RUNQ_SHARE = 0.20


@dataclass(frozen=True)
class LoaderInside:
    """A look inside the loader: stages per sample, memory per worker, threads against cores."""

    stages: LoaderStages | None = None
    memory: WorkerMemory | None = None
    cores: CoreUse | None = None


@dataclass(frozen=True)
class CellResult:
    """One end-to-end measurement: a dataset × loader setting.

    On CUDA ``wait_s`` is the GPU's data stall per step and ``step_s`` the rest of its step
    (copy, compute, host overhead), both from CUDA events (``cuda`` has the parts); elsewhere
    they are host clock times, exact because the CPU and a simulated step run synchronously.
    ``images_per_step`` and ``bytes_per_step``: what each measured step's batch held, and the
    bytes the loader read from the dataset's files for it.
    """

    dataset: str
    loader: LoaderKind
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
    stopped_by: str  # interval | steps | seconds | error
    status: str = "ok"  # ok | failed
    error: str = ""
    verdict: CellVerdict | None = None  # filled by analysis, recomputed on load
    cuda: CudaStepTimes | None = None  # the GPU's timeline per step, on CUDA with a real step
    images_per_step: tuple[int, ...] = ()
    bytes_per_step: tuple[int, ...] = ()
    fetched: Fetched = UNKNOWN_FETCH
    start_method: str = ""  # multiprocessing start method of the workers ("" for serial)
    bytes_window_s: float | None = None  # seconds the byte counters cover, when not elapsed_s
    looks: int = 1  # how often the stopping rule looked at its interval (``stats.LOOKS``), or 1
    inside: LoaderInside | None = None  # stages per sample, memory per worker, threads against cores
    wait_split: WaitSplit | None = None  # what the awaited producer did while the loop waited (run)
    retries: int = 0  # requests an object store's client repeated for the window's samples
    # the counters' window, in seconds since the epoch (start, end): to be matched with readings
    # taken elsewhere over the same seconds (a storage server's, a switch's); a sweep's cells
    window_wall_s: tuple[float, float] | None = None
    # the window cut where the fetch counters were read again (at the first step boundary a
    # quarter second or more after the last reading; in a user's loop, half a second): (seconds,
    # bytes fetched) each, counted as ``fetched`` is; they add up to it. None in a file from before
    fetched_segments: tuple[tuple[float, int], ...] = ()
    # each batch a worker completed in the window: (cycle s, making s, images) (``rates.Produced``)
    produced: tuple[tuple[float, float, int], ...] = ()
    # what ``read_bytes_in_window`` counts: the delivered batches' bytes, or (workers reading files)
    # the workers' own reads over the fetch counters' readings (``fetched.bytes_read``)
    reads_counted: Literal["batches", "workers"] = "batches"

    @property
    def setting(self) -> LoaderSetting:
        return LoaderSetting(self.loader, self.workers)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.dataset, self.loader, self.workers)

    @property
    def requested_bytes(self) -> int:
        """Bytes the loader read from the dataset's files during the window (a user's loader,
        whose reads ioprof does not make: what its processes read, ``rchar``)."""
        return sum(self.bytes_per_step) if self.bytes_per_step else self.io.read_chars

    def step_durations_s(self) -> list[float]:
        return [w + s for w, s in zip(self.wait_s, self.step_s, strict=True)]

    def rates(self) -> CellRates:
        """img/s and the data-wait share with their 95 % intervals, from the loop's steps or the
        workers' own batches (``rates.cell_rates``), centred on img_per_s (images over the
        window's clock), the figure every table shows."""
        images = [float(n) for n in self.images_per_step] or [float(self.batch_size)] * self.steps
        return cell_rates(
            images=images,
            wait_s=self.wait_s,
            step_s=self.step_s,
            img_per_s=self.img_per_s,
            workers=self.workers,
            produced=self.produced,
            looks=self.looks,
        )

    def throughput(self) -> Interval:
        return self.rates().throughput

    def wait_share(self) -> Interval:
        return self.rates().wait_share

    @property
    def read_bytes_in_window(self) -> int:
        """Bytes the loader read from the dataset's files between the readings ``fetched`` was
        counted over: what is set beside it (``fetched.bytes_read``)."""
        return self.io.read_chars if self.reads_counted == "workers" else self.requested_bytes

    def miss_ratio(self) -> float | None:
        """Share of the bytes the loader read that were fetched from storage (None: unknown)."""
        read = self.read_bytes_in_window
        if not self.fetched.known or read <= 0:
            return None
        assert self.fetched.bytes is not None
        return min(1.0, self.fetched.bytes / read)

    @property
    def byte_window_s(self) -> float:
        """The seconds the byte counts cover: the whole window, or (a user's loader) the spans
        between its pauses over which its counters were read."""
        return self.elapsed_s if self.bytes_window_s is None else self.bytes_window_s

    def fetched_mb_per_s(self) -> float | None:
        if not self.fetched.known or self.byte_window_s <= 0:
            return None
        assert self.fetched.bytes is not None
        return self.fetched.bytes / 1e6 / self.byte_window_s

    def fetched_bandwidth(self) -> Interval | None:
        """fetched_mb_per_s with its 95 % interval: batch means over the window's segments (each
        a quarter second or more, at step boundaries), held to the stopping rule's looks as the
        img/s is; None where the figure is unknown or the window was not cut (a file from before)."""
        value = self.fetched_mb_per_s()
        if value is None or not self.fetched_segments:
            return None
        if value == 0:
            return Interval.exact(0.0)
        return ratio_interval(
            [b / 1e6 for _, b in self.fetched_segments], [s for s, _ in self.fetched_segments], 1, self.looks
        ).centered_on(value)

    def requested_mb_per_s(self) -> float:
        return self.read_bytes_in_window / 1e6 / self.byte_window_s if self.byte_window_s > 0 else 0.0

    def derived(self) -> dict[str, Any]:
        if self.status != "ok":
            return {}
        # the verdict's share where there is one: of the samples' bytes for rows faulted in from a
        # memory-mapped file (conclude.sweep.fetched_share), else of the bytes read
        miss = self.verdict.storage_miss_ratio if self.verdict is not None else self.miss_ratio()
        return {
            **_interval_fields("img_per_s", self.throughput()),
            **_interval_fields("data_wait_share", self.wait_share()),
            "requested_bytes": self.requested_bytes,
            "fetched_mb_per_s": self.fetched_mb_per_s(),
            **_interval_fields("fetched_mb_per_s", self.fetched_bandwidth() or Interval.unknown(0.0)),
            "requested_mb_per_s": self.requested_mb_per_s(),
            "cache_hit_ratio": None if miss is None else 1.0 - miss,
        }


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
    steps: int  # the most measured steps a cell runs
    seconds: float | None  # the most seconds a cell measures
    start_method: str  # multiprocessing start method of the loader workers
    ioprof_version: str
    min_steps: int = 0
    target_rel_half_width: float = 0.0
    decided_rel_half_width: float = 0.0  # a cell whose class was decided could stop within ± this
    resumed_from: str = ""  # started_at of the first run whose finished cells this one kept (--resume)
    kept_cells: int = 0  # cells taken from that run, not measured again


@dataclass(frozen=True)
class ProbeFailure:
    """A stage ceiling that could not be measured for one setting, and why."""

    dataset: str
    stage: str  # decode | storage
    setting: str  # LoaderSetting.key, or "" for the whole dataset
    error: str


@dataclass(frozen=True)
class Undecodable:
    """Samples that could not be decoded (skipped) or were converted to RGB, across the run."""

    count: int = 0
    converted: int = 0
    first: tuple[tuple[str, str], ...] = ()  # (path, reason) of the first few


@dataclass(frozen=True)
class BeforeWindow:
    """A loader's first pass up to its window (``ioprof run``): from ``iter()`` to the window's
    first batch — its workers' start, the time to its first batch, the warm-up's batches. A
    streaming dataset's downloads, or a cache its first pass fills, happen here.

    ``cpu_s`` over ``cpu_window_s``: the training process's and the loader's processes' CPU
    (None where they could not be read at both ends); ``fetched``: the bytes fetched over it,
    counted as the window's are."""

    seconds: float
    first_batch_s: float | None
    batches: int
    wait_s: float
    processes: int = 1  # the training process and the loader's workers
    cpu_s: float | None = None
    cpu_window_s: float = 0.0
    fetched: Fetched = UNKNOWN_FETCH

    @property
    def busy_share(self) -> float | None:
        """The share of its processes' time they were on a CPU (None: not read)."""
        if self.cpu_s is None or self.cpu_window_s <= 0 or self.processes <= 0:
            return None
        return min(1.0, self.cpu_s / (self.processes * self.cpu_window_s))


@dataclass(frozen=True)
class ObservedLoader:
    """One DataLoader of a user's script, as ``ioprof run`` / ``ioprof.watch`` saw it.

    ``key`` names its cell (its measured window) and its ceilings in the result. ``role``:
    ``training`` when optimizer steps ran between its batches within a pass, ``evaluation`` when
    none did though the script stepped an optimizer, ``no-optimizer`` when the script never did
    (inference, updates by hand), ``unknown`` when it never delivered two batches in a pass.
    """

    key: str  # "loader 1", or "rank 1 · loader 1" under torch.distributed
    rank: int
    role: str  # training | evaluation | no-optimizer | unknown
    dataset_class: str
    dataset_len: int | None
    dataset_root: str  # "" when the dataset does not name its files
    num_workers: int
    batch_size: int | None
    pin_memory: bool
    prefetch_factor: int | None
    persistent_workers: bool
    drop_last: bool
    sampler: str
    start_method: str
    batches: int  # batches it delivered in the whole run
    passes: int  # iterators started (epochs)
    window: str  # complete | partial | none
    gaps_left_out: int  # pauses between batches (evaluation, checkpoints) not counted as step time
    files_known: int  # files the dataset lists (for the storage ceiling)
    optimizer_steps_between_batches: int = 0  # within its passes: what makes it a training loader
    clock: str = "host"  # host | gpu-events: which clock its waits and steps are on
    off_thread: str = ""  # a thread other than the optimizer's that iterated it (a prefetcher)
    host: str = ""  # the machine its process ran on
    measured_batches_needed: int = 0  # batches before a window can open (warm-up and start-up)
    own_s_per_batch: float = 0.0  # ioprof's own code around each next(): what observing cost
    before: BeforeWindow | None = None  # its first pass up to the window
    batches_per_pass: int | None = None  # len(loader), where it has one


@dataclass(frozen=True)
class ScriptInfo:
    """The user's command that ``ioprof run`` ran, and how it ended."""

    command: str
    exit_code: int | None  # None while it still runs
    ended: str  # finished | failed | interrupted | stopped-by-ioprof | running
    ranks: int
    optimizer_steps: int  # rank 0, the whole run
    warmup_steps: int
    window_steps: int
    window_seconds: float | None
    stop_after: bool
    probed: bool  # the user's loader and files were measured alone after the window
    probe_pause_s: float  # how long that paused the user's training
    probe_notes: tuple[str, ...] = ()  # what the probe could not measure, and why
    probe_refused: str = ""  # why the training loader was never probed (the condition that failed)
    probe_when: str = ""  # when it was probed: after its window, at the end of a pass, at exit
    probe_start: str = ""  # how the probe's workers started, where not as the loader's own
    shm_failure: str = ""  # a worker died for want of /dev/shm: the one line that says so
    shm_warnings: tuple[str, ...] = ()  # batches in flight that would not fit, seen at the first batch


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
    analysis: Analysis | None = None  # filled by analysis, recomputed on load
    probe_failures: tuple[ProbeFailure, ...] = ()
    undecodable: Undecodable = field(default_factory=Undecodable)
    kind: str = "sweep"  # sweep (also probe) | run (the user's own script)
    script: ScriptInfo | None = None  # kind "run": the user's command
    loaders: tuple[ObservedLoader, ...] = ()  # kind "run": every DataLoader it iterated
    phases_s: dict[str, float] = field(default_factory=dict)  # where the run's time went, by phase


@dataclass(frozen=True)
class CandidateResult:
    """One place the data could live, as measured (or why it could not be)."""

    label: str
    path: str
    kind: str  # "current" | "candidate" | "emulated"
    status: str  # "ok" | "missing" | "not writable" | "full" | "too small" | "failed"
    reason: str
    fs_type: str
    mount_source: str
    ram_backed: bool
    sample_files: int
    sample_bytes: int
    write_mb_per_s: float | None  # copying the sample there: read + write + fsync
    storage: tuple[StorageCeiling, ...]
    free_bytes: int | None = None  # free space there before the sample was copied
    keeps_pages: bool | None = None  # its filesystem keeps read pages cached (sshfs drops them at each open)


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
    decisions: tuple[PlaceDecision, ...] = ()  # filled by placement, recomputed on load
    recommendation: Recommendation | None = None  # filled by placement, recomputed on load
    ram_source: str = ""  # where ram_available_bytes comes from: the host, a cgroup limit, --ram


def _interval_fields(name: str, interval: Interval) -> dict[str, float | int | None]:
    """``<name>_low``, ``<name>_high`` and the batches they rest on (None when unknown)."""
    known = interval.known
    return {
        f"{name}_low": interval.low if known else None,
        f"{name}_high": interval.high if known else None,
        f"{name}_interval_batches": interval.batches,
    }


@dataclass(frozen=True)
class AlternativeResult:
    """One alternative ``ioprof whatif`` ran end to end (or why it could not here).

    ``name``: baseline | threads | decode_jpeg | gpu_decode | resized-256 | resized-320 | shards |
    loose-on-scratch | prefetch-N | persistent_workers | pin_memory | cache. ``why_not``: a code
    (``needs-cuda``, ``missing:torchdata``, ``already-small``, ``needs-workers``, ``failed: …``).
    ``where``: data (the dataset's own storage) | scratch | emulated. ``prep_s``/``prep_bytes``: the
    one-off cost of making its files from the sample (``sample_bytes`` of it).
    """

    name: str
    measured: bool
    why_not: str
    cell: CellResult | None
    where: str
    where_fs: str
    prep_s: float | None = None
    prep_bytes: int | None = None
    sample_bytes: int | None = None
    figures: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class WhatifResult:
    """``ioprof whatif``: the user's pipeline and the alternatives, each run end to end on a sample."""

    schema_version: int
    kind: str  # "whatif"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    dataset: DatasetInfo
    sample_files: int
    sample_bytes: int
    compute: ComputeCeiling
    setting: str  # the current loader setting (label), the baseline's
    scratch: str
    scratch_fs: str
    scratch_bytes: int  # the most the scratch folder held
    alternatives: tuple[AlternativeResult, ...]
    ranking: Ranking | None = None  # filled by ranking.rank, recomputed on load
    data_storage: StorageCeiling | None = None  # the data's own storage read alone, cold (copies' estimates)
    scratch_store: str = ""  # a prefix in the data's store the shards were written to and streamed from


@dataclass(frozen=True)
class PhaseTimes:
    """Per measured minibatch: seconds in each phase of the training step."""

    data_wait_s: tuple[float, ...]
    copy_s: tuple[float, ...]
    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    update_s: tuple[float, ...]
    loss_read_s: tuple[float, ...]
    images: tuple[int, ...]

    def compute_s(self) -> list[float]:
        """Per step: everything but the data wait."""
        return [
            sum(x)
            for x in zip(
                self.copy_s, self.forward_s, self.backward_s, self.update_s, self.loss_read_s, strict=True
            )
        ]

    def step_s(self) -> list[float]:
        return [w + c for w, c in zip(self.data_wait_s, self.compute_s(), strict=True)]

    def phase(self, name: str) -> tuple[float, ...]:
        return tuple(getattr(self, f"{name}_s"))

    def mean_interval(self, name: str) -> Interval:
        """A phase's mean seconds per step with its 95 % interval (batch means)."""
        xs = list(self.phase(name))
        return ratio_interval(xs, [1.0] * len(xs))


@dataclass(frozen=True)
class LayerTimes:
    """One leaf module: seconds per step in its forward and backward (summed over its calls)."""

    name: str
    kind: str
    params: int
    activation_bytes: int
    calls_per_step: int
    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    share_of_step: float  # (mean forward + mean backward) / the mean compute step

    def mean_s(self) -> float:
        n = max(1, len(self.forward_s))
        return (sum(self.forward_s) + sum(self.backward_s)) / n


@dataclass(frozen=True)
class OperatorTime:
    name: str
    self_s: float  # over the traced steps
    share: float  # of all operators' self time
    calls: int


@dataclass(frozen=True)
class MeasuredEpoch:
    """A real epoch, run to check the prediction: its images and seconds."""

    images: int
    steps: int
    seconds: float
    regime: str


@dataclass(frozen=True)
class ProfileResult:
    """``ioprof profile``: one training step taken apart, and the epoch time it predicts."""

    schema_version: int
    kind: str  # "profile"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    dataset: DatasetInfo
    setting: str  # the loader setting profiled
    batch_size: int
    epoch_images: int
    startup_s: float  # from a fresh iterator to its first batch (worker start-up, each epoch)
    cold: PhaseTimes  # the first epoch: files from storage (evicted before and after each read)
    warm: PhaseTimes | None  # later epochs, when the dataset stays in RAM
    hooked: PhaseTimes  # the steps timed with the layer hooks on (their cost: against ``warm``/``cold``)
    layers: tuple[LayerTimes, ...]
    operators: tuple[OperatorTime, ...]
    trace_file: str
    measured_epoch: MeasuredEpoch | None = None
    prediction: Any = None  # findings.EpochPrediction, recomputed on load


def interval_sum(parts: list[Interval]) -> Interval:
    """A sum of figures measured side by side: ranks in lockstep (DDP) vary together, so their
    bounds add (a conservative interval; unknown when any part's is)."""
    value = sum(p.value for p in parts)
    if not parts or not all(p.known for p in parts):
        return Interval.unknown(value)
    return Interval(
        value, sum(p.low for p in parts), sum(p.high for p in parts), min(p.batches for p in parts)
    )


@dataclass(frozen=True)
class RankResult:
    """One rank of a ``ioprof scale`` run: its measured window, and the CPU it and its loader
    workers used during it."""

    rank: int
    host: str
    cell: CellResult
    cpu_s: float  # CPU time (user + system) of the rank's process and its workers in the window
    wall_s: float  # the window's wall-clock length
    host_cores: int = 0  # CPU cores usable on the rank's host
    compute_s_per_step: float = 0.0  # the accelerator's work per step, without waiting for other ranks

    @property
    def cores_used(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def busy(self) -> Interval:
        """Share of the rank's wall time its accelerator computed (MLPerf Storage's AU: compute time ÷
        total time), with its interval. Time in the all-reduce waiting for a late rank is not busy,
        nor is the time blocked waiting for data. (Files without the compute time: 1 − wait share.)"""
        c = self.cell
        if self.compute_s_per_step <= 0:
            w = c.wait_share()
            return Interval(1.0 - w.value, 1.0 - w.high, 1.0 - w.low, w.batches)
        durations = c.step_durations_s()
        return ratio_interval([self.compute_s_per_step] * len(durations), durations, c.setting.concurrency)


@dataclass(frozen=True)
class RankCountResult:
    """All ranks of one rank count in one cache regime (or why that count failed).

    ``storage``: the storage read alone (cold) by as many readers as the ranks' loaders run
    together, measured just before the ranks start; None where not measured (``storage_error``).
    """

    ranks: int
    regime: str  # cold | warm
    status: str  # ok | failed
    reason: str  # why it failed: the first rank that did, and how
    launch_s: float  # torchrun's start to its exit
    per_rank: tuple[RankResult, ...]
    storage: StorageCeiling | None = None
    storage_error: str = ""

    def aggregate(self) -> Interval:
        """img/s of all ranks together."""
        return interval_sum([r.cell.throughput() for r in self.per_rank])

    def window_s(self) -> float:
        return max((r.cell.elapsed_s for r in self.per_rank), default=0.0)

    def fetched_bytes(self) -> int | None:
        """Bytes all ranks fetched from storage (None where any rank's count is unknown). A count of
        the whole host (NFS client statistics, the FUSE daemon's reads) is taken once per host — every
        rank on it recorded the same host-wide figure — never summed over its ranks."""
        if not self.per_rank or any(r.cell.fetched.bytes is None for r in self.per_rank):
            return None
        per_host: dict[str, list[int]] = {}
        own = 0
        for r in self.per_rank:
            b = r.cell.fetched.bytes or 0
            if r.cell.fetched.method in MACHINE_WIDE_FETCH_METHODS:
                per_host.setdefault(r.host, []).append(b)
            else:
                own += b
        return own + sum(max(v) for v in per_host.values())

    def fetched_mb_per_s(self) -> float | None:
        b, w = self.fetched_bytes(), self.window_s()
        return None if b is None or w <= 0 else b / 1e6 / w

    def fetched_bandwidth(self) -> Interval | None:
        """fetched_mb_per_s with an interval: the ranks' intervals added (``interval_sum``), a
        host-wide count's once per host, as its bytes are; None where a rank's has none."""
        value = self.fetched_mb_per_s()
        if value is None:
            return None
        own: list[Interval] = []
        per_host: dict[str, Interval] = {}
        for r in self.per_rank:
            bandwidth = r.cell.fetched_bandwidth()
            if bandwidth is None:
                return None
            if r.cell.fetched.method not in MACHINE_WIDE_FETCH_METHODS:
                own.append(bandwidth)
            elif r.host not in per_host or bandwidth.value > per_host[r.host].value:
                per_host[r.host] = bandwidth
        if value == 0:
            return Interval.exact(0.0)
        return interval_sum([*own, *per_host.values()]).centered_on(value)

    def requested_mb_per_s(self) -> float:
        w = self.window_s()
        return sum(r.cell.read_bytes_in_window for r in self.per_rank) / 1e6 / w if w > 0 else 0.0

    def cores_used(self, host: str | None = None) -> float:
        """CPU cores the ranks (and their workers) kept busy, on one host or on all."""
        return sum(r.cores_used for r in self.per_rank if host is None or r.host == host)

    def derived(self) -> dict[str, Any]:
        if self.status != "ok":
            return {}
        return {
            **_interval_fields("aggregate_img_per_s", self.aggregate()),
            "aggregate_img_per_s": self.aggregate().value,
            "fetched_bytes": self.fetched_bytes(),
            "fetched_mb_per_s": self.fetched_mb_per_s(),
            **_interval_fields("fetched_mb_per_s", self.fetched_bandwidth() or Interval.unknown(0.0)),
            "cores_used": self.cores_used(),
        }


@dataclass(frozen=True)
class ScaleResult:
    """``ioprof scale``: rank counts × cache regimes on one storage, each rank measured on its own."""

    schema_version: int
    kind: str  # "scale"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    dataset: DatasetInfo
    compute: str  # the compute's label: "simulated 2800 img/s (h100)", "real"
    sim_img_per_s: float | None  # per rank, when simulated
    backend: str  # gloo | nccl
    workers_per_rank: int
    gpus: int  # CUDA devices visible to rank 0 (the most ranks real compute can use per host)
    counts: tuple[RankCountResult, ...]
    conclusion: Any = None  # scaling.ScaleConclusion, recomputed on load

    def ranks_measured(self) -> list[int]:
        return sorted({c.ranks for c in self.counts if c.status == "ok"})


@dataclass(frozen=True)
class DeviceCell:
    """One model at one batch size on one device setup (or why it was not measured there).

    ``step_s``: seconds per measured training step (forward, backward, update; under DDP its
    all-reduce), per device; ``samples_per_step``: the samples all devices trained per step.
    """

    model: str
    setup: str  # cpu | 1 gpu | N gpus
    devices: int
    batch_size: int  # per device
    measured: bool
    why_not: str
    step_s: tuple[float, ...] = ()
    samples_per_step: int = 0
    params: int = 0
    gradient_bytes: int = 0  # what DDP all-reduces each step
    looks: int = 1  # how often a stopping rule looked at its interval (``stats.LOOKS``), or 1

    def throughput(self) -> Interval:
        """samples/s with its 95 % interval (batch means over the steps)."""
        return ratio_interval(
            [float(self.samples_per_step)] * len(self.step_s), list(self.step_s), 1, self.looks
        )

    def derived(self) -> dict[str, Any]:
        return _interval_fields("samples_per_s", self.throughput()) if self.measured else {}


@dataclass(frozen=True)
class DevicesResult:
    """``ioprof devices``: does a GPU, and a second one, pay off for a model?"""

    schema_version: int
    kind: str  # "devices"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    gpus: int
    cells: tuple[DeviceCell, ...]
