"""What ``ioprof run`` saw of a user's script beside its cells: each DataLoader it iterated
(``ObservedLoader``), each one's first pass up to its window and how each pass began, and the
command and how it ended (``ScriptInfo``)."""

from __future__ import annotations

from dataclasses import dataclass

from ioprof.core.counts import UNKNOWN_FETCH, Fetched, ReadBack


@dataclass(frozen=True)
class BeforeWindow:
    """A loader's first pass up to its window (``ioprof run``): from ``iter()`` to the window's
    first batch — its workers' start, the time to its first batch, the warm-up's batches. A
    streaming dataset's downloads, or a cache its first pass fills, happen here.

    ``cpu_s`` over ``cpu_window_s``: the training process's and the loader's processes' CPU
    (None where they could not be read at both ends); ``producers_runnable_s`` over
    ``producers_window_s``: the time the ``producers`` making its batches (its workers; without
    them, the training process) were on a CPU or waiting for one (None: not read apart, as by a
    version before this field); ``fetched``: the bytes fetched over it, counted as the window's
    are."""

    seconds: float
    first_batch_s: float | None
    batches: int
    wait_s: float
    processes: int = 1  # the training process and the loader's workers
    cpu_s: float | None = None
    cpu_window_s: float = 0.0
    fetched: Fetched = UNKNOWN_FETCH
    producers: int = 0
    producers_runnable_s: float | None = None
    producers_window_s: float = 0.0

    @property
    def busy_share(self) -> float | None:
        """The share of its processes' time they were on a CPU (None: not read)."""
        if self.cpu_s is None or self.cpu_window_s <= 0 or self.processes <= 0:
            return None
        return min(1.0, self.cpu_s / (self.processes * self.cpu_window_s))

    @property
    def producers_share(self) -> float | None:
        """The share of its producers' time they were on a CPU or waiting for one (None: not read)."""
        if self.producers_runnable_s is None or self.producers_window_s <= 0 or self.producers <= 0:
            return None
        return min(1.0, self.producers_runnable_s / (self.producers * self.producers_window_s))


@dataclass(frozen=True)
class PassStart:
    """How one pass (epoch) of a loader began and how long it took: ``startup_s`` inside ``iter()``
    (its workers started there, where they are not persistent: forked or spawned, the dataset sent
    to each), ``first_batch_s`` from ``iter()`` to the first batch in the loop's hands, ``pass_s``
    from ``iter()`` to the pass's end (None: it did not end) and ``stop_s`` the call that ran its
    iterator out, or its collection where the loop let it go first (workers not persistent are
    stopped and joined there), ``batches`` the loop took in it, ``own_s`` ioprof's own time in
    the pass's calls (in ``pass_s``, no part of the loop's), ``ran_out`` whether the loop took the
    whole pass (its last batch by the loader's length, or its iterator's StopIteration) rather
    than letting it go first."""

    startup_s: float
    first_batch_s: float
    pass_s: float | None
    batches: int
    stop_s: float = 0.0
    own_s: float = 0.0
    ran_out: bool = False


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
    own_once_s: float = 0.0  # and its work that comes once (a window's start and end, a pass's end)
    before: BeforeWindow | None = None  # its first pass up to the window
    batches_per_pass: int | None = None  # len(loader), where it has one
    pass_starts: tuple[PassStart, ...] = ()  # each pass's start and length, in order
    # workers started by spawn or a fork server: the dataset pickled, handed to each at every start
    # (bytes, and the seconds pickling took in the probe); None: forked, or not probed
    sent_bytes: int | None = None
    sent_s: float | None = None
    sent_whole: bool = True  # False: pickling was stopped, sent_bytes is a lower bound
    iterable: bool = False  # an IterableDataset: each worker yields what its own iterator does
    shards: int | None = None  # the shards it deals out among its workers, where it says
    workers_out: int | None = None  # its workers out of data as the window began (None: not read)
    # its root is where a few files its workers opened one a sample lay: not the whole of what it reads
    root_seen_in_passing: bool = False


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
    probe_read_back: ReadBack | None = None  # your files' cached pages the storage read evicted, read back
    probe_fork_server_stopped: bool = False  # the fork server ioprof started for the probe, stopped after it
    shm_failure: str = ""  # a worker died for want of /dev/shm: the one line that says so
    shm_warnings: tuple[str, ...] = ()  # batches in flight that would not fit, seen at the first batch
