"""Result objects of a sweep and of ``ioprof run``: what was measured, as frozen dataclasses with
the unit in each field name. Their parts live beside them (``counts``: regimes and bytes fetched;
``gpu``; ``inside``: the look inside the loader), and the other commands' results in
``results_<command>``.

Raw samples are kept (per step, per batch, per file) and every figure's 95 % interval is derived
from them here, by the pure functions of ``stats``; rounding happens only in the renderers.
Conclusions (verdicts, advice, findings) are not measurements: their types live in
``findings`` and they are recomputed from these objects whenever a report is rendered.
The file format (``results.json``) is ``resultfile``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ioprof.core.config import LoaderSetting
from ioprof.core.counts import UNKNOWN_FETCH, CacheInfo, Fetched, IoCounts, ReadBack
from ioprof.core.gpu import CudaStepTimes, GpuTelemetry
from ioprof.core.inside import LoaderInside
from ioprof.core.rates import CellRates, Method, cell_rates, loader_rate
from ioprof.core.results_run import ObservedLoader, ScriptInfo
from ioprof.core.stats import Interval, gaps, ratio_interval
from ioprof.core.vocab import Bottleneck, LoaderKind

if TYPE_CHECKING:
    from ioprof.core.findings import Analysis, CellVerdict

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
class WaitSplit:
    """What happened while the training loop waited for a batch, per measured unit
    (``observe.producers``): the training process's calling thread on a CPU receiving a worker's
    batch (unpickling it, rebuilding its tensors: its own work), and over the rest of the wait
    the batch's producer — its thread on a CPU, that thread runnable but waiting for a CPU
    (run-queue delay), its process's other threads on a CPU (an OpenMP team, a decoder's
    threads); what is left it was off-CPU: blocked reading its source, or on a lock. Units whose
    producer could not be told (the batch had already arrived), and those not drawn where a fast
    loop's waits are split at a random share of its batches (``observe.producers``), are left out.
    """

    # the stage each part of the producer's time blames: off-CPU is the source; on a CPU, or
    # waiting for one, the pipeline's own CPU work (decode and augment)
    STAGE: ClassVar[dict[str, Bottleneck]] = {"source": "storage", "cpu": "decode", "cores": "decode"}

    wait_s: tuple[float, ...]
    cpu_s: tuple[float, ...]  # the producing thread's
    runq_s: tuple[float, ...]
    others_cpu_s: tuple[float, ...]  # its process's other threads' (older results: in ticks, may read < 0)
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
    # of step_s, how many the ceiling ran alone (0: all of them); the rest are the steps of a CPU
    # sweep's serial cells, in the order they ran (``runners.sweep.over_the_sweep``)
    alone_steps: int = 0
    # steps measured past the warm-up but cut as the start-up's (``stats.transient_start``): not in step_s
    startup_steps: int = 0

    def alone(self) -> ComputeCeiling:
        """The ceiling as measured alone, before any cell's steps were pooled with it."""
        return self.with_steps(self.step_s[: self.alone_steps]) if self.alone_steps else self

    def with_steps(self, steps: tuple[float, ...], alone_steps: int = 0) -> ComputeCeiling:
        """This ceiling over ``steps`` (each a batch), its rate theirs; ``alone_steps`` of them its own."""
        return replace(
            self, step_s=steps, alone_steps=alone_steps, img_per_s=self.batch_size * len(steps) / sum(steps)
        )

    def throughput(self) -> Interval:
        """img/s with its 95 % interval (batch means over steps)."""
        if self.simulated:
            return Interval.exact(self.img_per_s)
        return ratio_interval([float(self.batch_size)] * len(self.step_s), list(self.step_s), 1, self.looks)

    def derived(self) -> dict[str, Any]:
        return interval_fields("img_per_s", self.throughput())


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
    # its own work a sample took, timed in its workers (``LoaderStages.work_as_timed_s_per_sample``):
    # but the read where ``work_seen`` is ``stages``, with it where the dataset reads inside what was
    # timed whole (``getitem``, ``iterator``)
    work_s_per_sample: float | None = None
    work_seen: str = "stages"
    # the workers that had data, where fewer than ``workers``: a dataset that deals out fewer
    # shards than the loader has workers gives the rest none (``sources.shards.shard_count``)
    fed: int | None = None

    @property
    def setting(self) -> LoaderSetting:
        return LoaderSetting(self.loader, self.workers)

    @property
    def readers(self) -> int:
        """The processes that made its batches: its workers that had data, or the training process."""
        return self.fed or self.setting.concurrency

    @property
    def per_reader_img_per_s(self) -> float:
        """What one reader decodes: a worker, or the training process of the serial loader."""
        return self.img_per_s / self.readers

    def pooled(self, again: DecodeCeiling) -> DecodeCeiling:
        """Two readings of one setting as one: their batches together (the loop's and the workers'), and the
        work a sample took."""
        a, b = self.work_s_per_sample, again.work_s_per_sample
        images = self.images + again.images
        return replace(
            self,
            img_per_s=images / (self.elapsed_s + again.elapsed_s),
            images=images,
            elapsed_s=self.elapsed_s + again.elapsed_s,
            batch_images=self.batch_images + again.batch_images,
            batch_s=self.batch_s + again.batch_s,
            stopped_by=again.stopped_by,
            produced=self.produced + again.produced,
            work_s_per_sample=(a * self.images + b * again.images) / max(1, images) if a and b else None,
        )

    def rate(self) -> tuple[Interval, Method]:
        """img/s with its 95 % interval, centred on img_per_s (the figure every table and answer
        shows, as a cell's is), from the batches' arrivals or the workers' own (``rates``)."""
        return loader_rate(
            images=[float(n) for n in self.batch_images],
            durations=self.batch_s,
            img_per_s=self.img_per_s,
            workers=self.fed or self.workers,
            produced=self.produced,
            looks=self.looks,
        )

    def throughput(self) -> Interval:
        return self.rate()[0]

    def derived(self) -> dict[str, Any]:
        return interval_fields("img_per_s", self.throughput())


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
    # items of many samples whose count is not known (no bytes per sample): MB/s and files/s, no img/s
    samples_unknown: bool = False
    retries: int = 0  # requests the client had to repeat (an object store's throttling, 5xx, drops)
    warmup: int = 0  # first completions left out of the rates: a start-up transient
    # each completion one sample's bytes read at its place in a file of many (an archive's member),
    # in a random order: img/s is completions/s, and a sample's bytes their mean
    by_member: bool = False

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

    def fetched_bandwidth(self) -> Interval:
        """MB/s the storage delivered as its counter saw it (``bandwidth`` × the bytes fetched per
        byte read): what a loader's own fetched figure compares with. A member read at its place in
        an archive fetches more than it reads (the readahead around it); a whole file, what it reads."""
        band = self.bandwidth().centered_on(self.read_mb_per_s)
        fetched = self.fetched.bytes
        if fetched is None or self.bytes <= 0 or self.fetched.method == "unknown":
            return band
        k = fetched / self.bytes
        return Interval(band.value * k, band.low * k, band.high * k, band.batches)

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
            **interval_fields("read_mb_per_s", self.bandwidth()),
            **interval_fields("img_per_s", self.file_rate()),
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

    def storage_for(self, cell: CellResult) -> StorageCeiling | None:
        """The storage ceiling measured at this cell's readers (its ranks' together), if any: one
        whose items hold samples it cannot count is no ceiling in img/s."""
        for s in self.storage:
            if (
                s.concurrency == cell.setting.concurrency * max(1, s.shared_by)
                and s.files
                and not s.samples_unknown
            ):
                return s
        return None


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
    # samples whose reads may have come before the window's spans though their batches are counted
    # in it (a user's loader, its reads counted over the spans): its workers hold up to
    # prefetch_factor × workers batches read ahead as each segment opens; 0 where the reads counted
    # are the batches' own
    read_ahead_samples: int = 0

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
        workers' own batches (``rates.cell_rates``): centred on img_per_s (images over the
        window's clock), except where the loop drained a queue its workers filled before the
        window, whose rate is what they made in it. Their points are the figures every table,
        verdict and comparison uses (``delivered``)."""
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

    def delivered(self) -> float:
        """img/s the loader delivered over the window: ``img_per_s``, the loop's own, unless the loop
        drained a queue filled before the window, which no longer run holds (``rates``)."""
        return self.throughput().value

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
        r = self.rates()
        return {
            # the figures the report shows (img_per_s above is the loop's own: images over its
            # window's clock) and the side they rest on (``rates.Method``)
            "delivered_img_per_s": r.throughput.value,
            **interval_fields("img_per_s", r.throughput),
            "delivered_data_wait_share": r.wait_share.value,
            **interval_fields("data_wait_share", r.wait_share),
            "rate_from": r.method,
            "requested_bytes": self.requested_bytes,
            "fetched_mb_per_s": self.fetched_mb_per_s(),
            **interval_fields("fetched_mb_per_s", self.fetched_bandwidth() or Interval.unknown(0.0)),
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
    read_back: ReadBack | None = None  # what its cold reads evicted of the user's cached files, read back


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


def interval_fields(name: str, interval: Interval) -> dict[str, float | int | None]:
    """``<name>_low``, ``<name>_high`` and the batches they rest on (None when unknown)."""
    known = interval.known
    return {
        f"{name}_low": interval.low if known else None,
        f"{name}_high": interval.high if known else None,
        f"{name}_interval_batches": interval.batches,
    }
