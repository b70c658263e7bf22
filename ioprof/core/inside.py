"""A look inside the loader (``measure.inside``): time per stage of a sample, memory per worker,
threads against cores."""

from __future__ import annotations

from dataclasses import dataclass

from ioprof.core.handover import SlowWait
from ioprof.core.thresholds import GROWTH_NOISE_BYTES


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
class SampleTimes:
    """Each sample's whole ``__getitem__`` in the workers over the window: its distribution, the
    share of the workers' sample time its slowest 1 % took, and the slowest samples by name
    (each the slowest of its batch: (index, seconds, file or ""))."""

    samples: int
    p50_s: float
    p95_s: float
    p99_s: float
    max_s: float
    slowest_share: float  # of all samples' time, the slowest 1 % (at least one sample)
    slowest: tuple[tuple[int | str, float, str], ...]
    slow: SlowWait | None = None  # what the slow samples cost the loop (workers in order only)


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
    processes: int  # that made its batches side by side (``stage_rows.makers``)
    seen: str  # stages | getitem
    timing_cost_s_per_sample: float  # what the timers themselves cost, measured in each worker
    note: str = ""
    per_sample: SampleTimes | None = None  # each sample's whole __getitem__, where it was timed

    @property
    def own_stages(self) -> tuple[StageTime, ...]:
        """The workers' rows of the loader's own work: not the wait for a core nor the collector's
        pauses, which fall in whatever stage ran when they came (``NO_STAGE``)."""
        return tuple(s for s in self.worker if s.name not in NO_STAGE)

    def leading(self) -> StageTime | None:
        """The costliest stage one can act on (not ``rest of __getitem__`` unless it is all, never
        a row of ``NO_STAGE``)."""
        own = self.own_stages
        named = [s for s in own if s.name != REST_OF_GETITEM]
        return named[0] if named else (own[0] if own else None)

    def share_of(self, name: str) -> float:
        """The share of the workers' time per sample the stage ``name`` took (0 where it has none)."""
        return next((s.share or 0.0 for s in self.worker if s.name == name), 0.0)

    @property
    def work_s_per_sample(self) -> float | None:
        """The loader's own work a sample took but its file's read (the storage's part, where the
        storage is memory in a decode ceiling): its decode, transforms, collate and the rest, on a
        core. None where the read was not timed apart (``seen`` other than ``stages``)."""
        if self.seen != "stages":
            return None
        work = sum(s.s_per_sample for s in self.own_stages if s.name != READ)
        return work if work > 0 else None

    @property
    def work_as_timed_s_per_sample(self) -> float | None:
        """The loader's own work a sample took, as finely as it could be timed: without its file's
        read where that was timed apart (``work_s_per_sample``), with it where the dataset reads
        inside what was timed whole (its ``__getitem__``, its iterator's next). Never the wait for
        a core nor the garbage collector's pauses (``NO_STAGE``)."""
        if self.seen == "stages":
            return self.work_s_per_sample
        work = sum(s.s_per_sample for s in self.own_stages)
        return work if work > 0 else None

    @property
    def named_share(self) -> float:
        """Σ named stages ÷ the workers' time per sample (1 − the share left unexplained)."""
        named = sum(s.s_per_sample for s in self.worker if s.name != REST_OF_GETITEM)
        return named / self.worker_s_per_sample if self.worker_s_per_sample > 0 else 0.0


REST_OF_GETITEM = "rest of __getitem__"
READ = "read"  # a sample's file read, timed apart from its decode where the loader was ``stages``
# the time a worker was ready to run and waited for a core (others held them all): counted apart
# from the stage it fell in, and never the stage to act on (the stages' own work is)
WAITING_FOR_A_CORE = "waiting for a core"
# the training process's own stages, per batch (``LoaderStages.main``)
PIN_MEMORY_COPY, WAIT_FOR_THE_BATCH = "pin-memory copy", "wait for the batch"
# Python's garbage collections that fell inside the stages, counted apart from the stage that
# happened to allocate when one began: a worker's full collection walks every object it inherited
# from the training process (hundreds of ms where that process holds a few hundred thousand)
GARBAGE_COLLECTOR = "Python's garbage collector"
NO_STAGE = (WAITING_FOR_A_CORE, GARBAGE_COLLECTOR)  # rows of what is no stage's own work


@dataclass(frozen=True)
class WorkerMemory:
    """Memory of the loader's processes over the window, and what more workers would need.

    USS: memory only that process holds and no file holds for it (what it costs to add one: the
    pages of a file it maps are page cache); PSS: every page it maps, shared pages split.
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
    samples_per_epoch: int | None  # one pass of the loader in this process (its samples, not batches)
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
    # workers forked again each epoch: the most one reached at the end of its life (its last
    # reading, carried on to its share of an epoch at the slope its lives share), and that slope
    # per sample (None: not read — persistent workers, no worker read twice, or none read twice
    # past its warm-up: its peak is then the most one was read at, not carried)
    life_peak_bytes: float | None = None
    life_growth_per_sample: float | None = None
    life_first_pass: bool = False  # the lives read include the first pass's workers
    # where lives of the first pass and of later ones were read: each group's peak alone (a worker
    # forked before the training's first steps can hold several times what later ones do, or less)
    later_life_peak_bytes: float | None = None
    first_life_peak_bytes: float | None = None
    # the dataset's samples (what a persistent worker may still touch over its epochs; None: as
    # ``samples_per_epoch``, as results written before it was kept)
    dataset_samples: int | None = None

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


def threads_wanted(
    intra_op_threads: int, ranks_on_host: int, pin_memory_thread: bool, workers: int, threads_per_worker: int
) -> int:
    """The threads a training's ranks on one host have to run: each rank's intra-op threads, its
    pin-memory thread and its workers' busy threads."""
    return (intra_op_threads + int(pin_memory_thread) + workers * threads_per_worker) * ranks_on_host


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
    # False: no span read every process's threads at both ends (each lost a pass's workers, gone at
    # its end): ``threads_busy`` and ``runq_share`` say nothing
    threads_read: bool = True

    @property
    def threads_wanted(self) -> int:
        return threads_wanted(
            self.intra_op_threads,
            self.ranks_on_host,
            self.pin_memory_thread,
            self.workers,
            self.threads_per_worker,
        )

    @property
    def oversubscribed(self) -> bool:
        """The cores in the mask were full and threads queued for them: runnable threads waited for
        a core a good share of their time (run-queue delay), or, where that was not read, more
        threads ran than there are cores."""
        if self.cpu_busy_cores is None or self.cpu_busy_cores < OVERSUBSCRIBED_BUSY * self.affinity_cores:
            return False
        if self.runq_share is not None:
            return self.runq_share >= OVERSUBSCRIBED_RUNQ_SHARE
        return self.threads_read and max(self.threads_busy, 1) > self.affinity_cores


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
