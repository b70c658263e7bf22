"""What the analysis concludes, as typed values with the numbers they rest on — never sentences.

Verdicts, advice and findings (warnings) are computed by the ``conclude`` package from the
measurements and turned into words by ``render/words.py`` only. They are written into
``results.json`` for readers, and recomputed, not loaded, whenever a report is rendered.
A finding's ``kind`` names it in the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ioprof.core.inside import threads_wanted
from ioprof.core.vocab import (
    Bottleneck,
    CacheRegime,
    DecidedBy,
    InputBound,
    InputClass,
    KernelCall,
    OverallBottleneck,
    OverallInputBound,
)

if TYPE_CHECKING:
    from ioprof.core.stats import Interval


# -- one cell ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellVerdict:
    """What limits one cell, and the numbers it was decided from.

    ``input_bound``: highly | moderately | not, or ``borderline`` when the data-wait share's
    95 % interval straddles a class threshold (then ``input_bound_range`` names the two classes).
    ``bottleneck``: storage | decode | transfer | compute, or ``undetermined`` when the cell is
    input-bound but no ceiling of an input stage could be measured for its setting.
    The prediction is a range: ``predicted_img_per_s`` assumes the stages overlap perfectly
    (the slowest sets the pace), ``predicted_low_img_per_s`` that each worker reads and then
    decodes in turn; for the serial loader, the storage delivering while the process decodes and
    steps, and every stage in turn.
    """

    bottleneck: Bottleneck
    input_bound: InputBound
    input_bound_range: tuple[InputClass, InputClass]
    data_wait_share: float
    wait_share_low: float | None
    wait_share_high: float | None
    predicted_img_per_s: float | None
    predicted_low_img_per_s: float | None
    predicted_by: str  # which ceiling sets the prediction
    residual: float | None  # measured vs the predicted range: 0 inside it, else relative distance
    residual_unexplained: bool
    rates: dict[str, float]  # the ceilings used (img/s), storage scaled to the bytes fetched
    storage_miss_ratio: float | None  # share of requested bytes fetched from storage (None: unknown)
    # which method decided the bottleneck: "ceilings" (each stage measured alone), "kernel" (what
    # the awaited producer did while the loop waited), "" (no input stage to blame); and the
    # kernel's own call — source | cpu | cores, "mixed" when no part stands out, "" unread
    decided_by: DecidedBy = ""
    kernel_call: KernelCall = ""
    # where the compute ceiling sets the prediction and the cell's own steps ran at another pace
    # (the ceiling was read at another moment of a shared host): that pace (img/s), where it alone
    # explains the residual; None otherwise
    own_compute_img_per_s: float | None = None
    # where the decode ceiling sets it and the loader's own work per sample ran at another pace in
    # the cell than in its probe (both timed inside the loader): the ceiling at the cell's pace
    own_decode_img_per_s: float | None = None
    # its samples came by page faults (rows of a memory-mapped file): read() calls, which read
    # under READ_CALLS_MIN_SHARE of what they hold, are not what it read
    read_by_faults: bool = False

    @property
    def waits_for_data(self) -> bool | None:
        """True where the loop is input-bound for certain (moderately, highly, or borderline between
        them), False where it is surely not, None where its interval reaches both."""
        if self.input_bound == "not":
            return False
        if self.input_bound == "borderline" and "not" in self.input_bound_range:
            return None
        return True


# -- advice for one dataset --------------------------------------------------------------------


@dataclass(frozen=True)
class Advice:
    """Recommendations for one dataset, computed from the measurements (words: render/words.py).

    ``fix_first``: the input stage that limits the best setting (storage | decode), ``none`` when
    the best setting keeps up, ``unknown`` when it cannot be told.
    """

    dataset: str
    fix_first: str
    demand_img_per_s: float | None  # what the training step consumes (compute ceiling)
    # decode
    per_worker_img_per_s: float | None
    workers_needed: int | None  # smallest measured worker count whose decode ceiling meets demand
    workers_estimated: float | None  # demand / per-worker decode rate
    best_decode_workers: int | None
    best_decode_img_per_s: float | None
    cores_usable: int
    cores_suffice: bool
    decode_shortfall: float | None  # best decode ceiling / demand, when below 1
    # storage: the bytes a sample's read takes (an archive's member: its own, not its share of the
    # archive); None: what the dataset reads per image is not known
    mean_file_bytes: float | None
    storage_mb_per_s_needed: float | None
    storage_mb_per_s_measured: float | None  # best real (or emulated) cold figure
    storage_img_per_s_best: float | None
    storage_best_readers: int | None
    storage_suffices: bool | None  # never True from a figure the page cache may have served
    storage_scales_with_readers: bool | None  # latency-bound: more concurrent reads help
    network_storage: bool
    # the serial loader
    serial_suffices: bool | None  # None: no serial cell, or its class is borderline
    serial_wait_share: float | None
    # the fastest cell measured end to end
    best_cell_workers: int | None = None
    storage_read: str = "cold"  # the best storage figure: "cold" (verified, emulated), "memory", "unverified"
    best_cell_wait_share: float | None = None
    consumer: str = "training"  # what consumes the batches: training, or a script's evaluation
    object_store: bool = False  # its data is in an object store (read by GETs)
    files_known: bool = False  # the files it reads are known (their count and bytes), if not per image
    # the intervals of the decode ceilings the worker figures are read from (None: not known)
    per_worker_interval: Interval | None = None
    best_decode_interval: Interval | None = None
    # the workers that had data in the best decode reading, where fewer than its workers: a dataset
    # that deals out fewer shards than the loader has workers (None otherwise)
    decode_fed: int | None = None
    storage_mb_per_s_interval: Interval | None = None  # the best cold storage ceiling's MB/s
    workers_needed_interval: Interval | None = None  # img/s of the ceiling that meets the demand
    # a cell at that many workers kept up in its own window (decidedly not input-bound)
    workers_needed_kept_up: bool = False
    # the share of what the best cell read that it fetched, as the user's script ran it, where a
    # copy served most of it (``MOSTLY_A_COPY_SHARE``; 0: it fetched none); None otherwise
    window_fetched_share: float | None = None
    # the share of the bytes its samples hold that the best cell fetched from storage, where it is
    # known and short of all of them (its storage ceiling is the probe's rate over it); None otherwise
    storage_fetched_share: float | None = None
    storage_img_per_s_fetched: float | None = None  # that cell's storage ceiling, so scaled


# -- the run as a whole ------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetVerdict:
    """One dataset: its best setting, and what limits it there."""

    dataset: str
    best_setting: str  # LoaderSetting label of the fastest cell
    best_img_per_s: float
    bottleneck: Bottleneck
    input_bound: InputBound
    input_bound_range: tuple[InputClass, InputClass]
    data_wait_share: float
    input_bound_settings: tuple[tuple[str, str, str, float], ...]  # (label, class, stage, wait share)
    serial_img_per_s: float | None
    speedup_over_serial: float | None
    best_multiprocess_setting: str | None = None
    best_multiprocess_img_per_s: float | None = None
    # the costliest stage inside the best setting's workers (``LoaderStages``), if they were timed
    leading_stage: str = ""
    leading_share: float | None = None
    leading_share_low: float | None = None
    leading_share_high: float | None = None
    # the share of the same workers' time they waited for a core (where that was measured): the
    # leading stage's share is of a time that includes it
    waited_for_core_share: float | None = None
    # the other settings as fast as the fastest within their intervals: the best setting is the
    # least input-bound of them all
    tied_settings: tuple[str, ...] = ()
    fastest_setting: str = ""  # the fastest by point estimate, where another tied with it waits less
    # the most any loader could gain over the serial one: its whole data wait removed,
    # 1 / (1 - the top of its wait share's interval); None without a serial cell
    loader_gain_max: float | None = None
    # the best multiprocess cell beat the serial one by more than that, beyond both intervals: its
    # training step took less time (the machine's speed changing between the windows does that;
    # each interval covers its own window only)
    speedup_beyond_loader: bool = False


@dataclass(frozen=True)
class ComputeReference:
    """The measured compute ceiling against the GPU's published ResNet-50 figure."""

    gpu: str
    measured_img_per_s: float
    published_img_per_s: float | None  # None: no figure on file for this GPU
    source: str
    comparable: bool  # ResNet-50, 224 px, mixed precision: what the figure is for
    share: float | None
    tuned: bool  # share ≥ PUBLISHED_SHARE_TUNED, or not comparable
    step_label: str = ""
    crop_px: int | None = None


@dataclass(frozen=True)
class Finding:
    """A warning the report must show, with its figures. Subclasses name the kind."""

    kind: ClassVar[str] = "finding"


@dataclass(frozen=True)
class CpuIsTheDevice(Finding):
    kind: ClassVar[str] = "cpu-is-the-device"
    device_reason: str
    model: str
    img_per_s: float


@dataclass(frozen=True)
class DatasetsFitInRam(Finding):
    kind: ClassVar[str] = "datasets-fit-in-ram"
    datasets: tuple[str, ...]
    sizes_bytes: tuple[int, ...]
    fs_types: tuple[str, ...]  # the filesystem checked to keep read pages, each dataset's
    ram_bytes: int
    ratio: float  # MLPerf Storage's dataset-to-RAM ratio for cold epochs
    cold_cells: bool = True  # the cells were measured cold (evicting after each read)
    ram_source: str = ""  # where the RAM figure comes from (the host, a cgroup limit)
    reclaim: str = ""  # the host's own reclaim of idle pages (MachineInfo.reclaim), "" where none
    reclaim_idle_s: float | None = None
    epoch_s: float | None = None  # the longest of their epochs at the best pace measured for each


@dataclass(frozen=True)
class PagesNotKept(Finding):
    """Datasets small enough for RAM on a filesystem that drops read pages (sshfs, other FUSE
    mounts at their defaults): every epoch reads the storage anyway."""

    kind: ClassVar[str] = "pages-not-kept"
    datasets: tuple[str, ...]
    fs_types: tuple[str, ...]


@dataclass(frozen=True)
class WorkersExceedCores(Finding):
    kind: ClassVar[str] = "workers-exceed-cores"
    workers: tuple[int, ...]
    cores: int


@dataclass(frozen=True)
class OffPrediction(Finding):
    """A cell measured outside its predicted range, beyond its own interval."""

    kind: ClassVar[str] = "off-prediction"
    dataset: str
    setting: str
    measured_img_per_s: float
    predicted_low_img_per_s: float
    predicted_img_per_s: float
    residual: float


@dataclass(frozen=True)
class ComputePaceVaried(Finding):
    """Cells whose own steps ran at another pace than the compute ceiling, read at another moment:
    their rates are explained by that pace, not by the ceiling."""

    kind: ClassVar[str] = "compute-pace-varied"
    count: int
    cells: int
    own_min: float  # the cells' own pace against the ceiling, relative (+0.16: 16 % faster)
    own_max: float
    compute_img_per_s: float


@dataclass(frozen=True)
class DecodePaceVaried(Finding):
    """Cells whose loader did the same work per sample at another pace than in their decode
    ceiling, read at another moment: their rates are explained by that pace, not by the ceiling."""

    kind: ClassVar[str] = "decode-pace-varied"
    count: int
    cells: int
    own_min: float  # the cells' loader pace against their decode ceilings', relative (-0.2: 20 % slower)
    own_max: float


@dataclass(frozen=True)
class ManyOffPrediction(Finding):
    kind: ClassVar[str] = "many-off-prediction"
    count: int
    cells: int
    residual_min: float
    residual_max: float
    compute_measured_low: bool  # all faster than a compute ceiling that predicted them
    compute_img_per_s: float | None


@dataclass(frozen=True)
class ComputeBelowPublished(Finding):
    kind: ClassVar[str] = "compute-below-published"
    reference: ComputeReference
    threshold: float


@dataclass(frozen=True)
class FetchContradiction(Finding):
    """A verified-cold cell whose block-I/O counters show nothing fetched: the counters or the
    eviction are wrong here, so the bytes from storage are not evidence of cache hits."""

    kind: ClassVar[str] = "fetch-contradiction"
    dataset: str
    setting: str
    requested_bytes: int
    fetched_bytes: int
    method: str
    fs_type: str | None


@dataclass(frozen=True)
class NotAsAsked(Finding):
    """A measurement whose cache regime could not be made or verified as asked."""

    kind: ClassVar[str] = "regime-not-verified"
    dataset: str
    setting: str
    regime: CacheRegime
    note: str


@dataclass(frozen=True)
class FetchedUnknown(Finding):
    kind: ClassVar[str] = "fetched-unknown"
    dataset: str
    fs_type: str | None  # None: the dataset's filesystem was not identified
    settings: tuple[str, ...]


@dataclass(frozen=True)
class TrainingNotMeasured(Finding):
    """A script that stepped an optimizer, but no training loader's window was measured: each
    loader with its role, the batches it delivered in its longest pass, and the batches a
    window needs (warm-up, the workers' start-up, one measured step)."""

    kind: ClassVar[str] = "training-not-measured"
    loaders: tuple[tuple[str, str, int, int], ...]
    warmup_steps: int


@dataclass(frozen=True)
class NoOptimizerSteps(Finding):
    """No ``torch.optim`` step in the whole script (inference, or updates written by hand)."""

    kind: ClassVar[str] = "no-optimizer-steps"
    loaders: tuple[str, ...]


@dataclass(frozen=True)
class IteratedOffThread(Finding):
    """A loader iterated on a thread other than the one that steps the optimizer (a prefetcher):
    its waits are that thread's, not the training loop's."""

    kind: ClassVar[str] = "iterated-off-thread"
    dataset: str
    thread: str


@dataclass(frozen=True)
class FetchedAboveStorage(Finding):
    """A cell's fetched MB/s above the upper end of the storage ceiling's interval: not a
    measurement to print — the counter, read over that window, saw more than this loader's reads."""

    kind: ClassVar[str] = "fetched-above-storage"
    dataset: str
    setting: str
    fetched_mb_per_s: float
    storage_high_mb_per_s: float
    method: str
    source: str
    window_s: float


@dataclass(frozen=True)
class StorageLeftIdle(Finding):
    """Storage-bound cells that drew less from the storage than as many readers draw from it
    reading alone, beyond both intervals: the storage waited between the loader's reads.

    ``cells``: (setting, fetched MB/s, its interval's upper end, the storage alone's MB/s, its
    interval's lower end, readers, reads in flight) — the readers the storage was read alone with
    (the cell's workers, one for a serial loader); reads in flight: the workers' time in their
    read stage, added up (each reads one sample at a time), or None where reads were not timed
    apart from the rest of a worker's work."""

    kind: ClassVar[str] = "storage-left-idle"
    dataset: str
    cells: tuple[tuple[str, float, float, float, float, int, float | None], ...]


@dataclass(frozen=True)
class FetchedUnchecked(Finding):
    """Fetched MB/s with no storage ceiling to check them against (``--no-probe``, a failed probe)."""

    kind: ClassVar[str] = "fetched-unchecked"
    cells: tuple[str, ...]
    why: str = ""  # why the storage was not read alone


@dataclass(frozen=True)
class SplitsDisagree(Finding):
    """The stage ceilings and the kernel's split of the waits blame different stages."""

    kind: ClassVar[str] = "splits-disagree"
    dataset: str
    setting: str
    by_ceilings: str  # storage | decode
    by_kernel: str  # source | cpu | cores
    shares: tuple[tuple[str, float], ...]  # the kernel's parts of the wait


@dataclass(frozen=True)
class StageUndetermined(Finding):
    """Input-bound, but no ceiling of an input stage was measured for the setting, or only one,
    wholly faster than the loader delivered (``alone``), and the kernel's split named none."""

    kind: ClassVar[str] = "stage-undetermined"
    dataset: str
    setting: str
    data_wait_share: float
    why: tuple[str, ...] = ()  # what kept the input stages from being measured, where known
    alone: tuple[tuple[str, float], ...] = ()  # (stage, img/s) of those measured alone
    img_per_s: float = 0.0  # what the loader delivered
    idle: bool = False  # the kernel found its producer off-CPU, the window fetching nothing


@dataclass(frozen=True)
class ProbeFailed(Finding):
    kind: ClassVar[str] = "probe-failed"
    dataset: str
    stage: str
    setting: str
    error: str


@dataclass(frozen=True)
class UndecodableSamples(Finding):
    kind: ClassVar[str] = "undecodable-samples"
    count: int
    first: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ConvertedSamples(Finding):
    kind: ClassVar[str] = "converted-samples"
    count: int


@dataclass(frozen=True)
class EmulatedFasterThanReal(Finding):
    """The emulated profile is faster than the real device this dataset sits on."""

    kind: ClassVar[str] = "emulated-faster-than-real"
    dataset: str
    profile: str
    profile_mb_per_s: float
    real_mb_per_s: float


@dataclass(frozen=True)
class BorderlineCells(Finding):
    """Cells whose data-wait interval straddles a class threshold: their class is not decided."""

    kind: ClassVar[str] = "borderline"
    cells: tuple[tuple[str, str, str, str, float, float], ...]  # dataset, setting, low class, high, lo, hi
    ended_by: tuple[str, ...] = ()  # what ended each one's window under run: steps | seconds | script


@dataclass(frozen=True)
class CoresOversubscribed(Finding):
    """More threads ran than the cores in the affinity mask, and those cores were full."""

    kind: ClassVar[str] = "cores-oversubscribed"
    dataset: str
    setting: str
    threads_busy: int
    affinity_cores: int
    cpu_busy_cores: float
    intra_op_threads: int
    ranks_on_host: int
    workers: int
    threads_per_worker: int
    pin_memory_thread: bool
    the_limit: bool | None  # the cell waits for data, not its storage: the cores limit it (None: not decided)
    runq_share: float | None = None  # of runnable time, waiting for a core

    @property
    def threads_wanted(self) -> int:
        return threads_wanted(
            self.intra_op_threads,
            self.ranks_on_host,
            self.pin_memory_thread,
            self.workers,
            self.threads_per_worker,
        )


@dataclass(frozen=True)
class WorkersOutOfData(Finding):
    """Workers of an IterableDataset's loader that had run out of data before its window began:
    every batch of the window came from the others (fewer shards than workers, or uneven ones)."""

    kind: ClassVar[str] = "workers-out-of-data"
    dataset: str
    workers: int
    out: int
    shards: int | None  # the shards the dataset says it deals out (None: it does not say)
    seen_making: int | None  # the processes whose batches the look inside saw in the window
    the_limit: bool | None  # the window waits for what its working workers make (None: not decided)


@dataclass(frozen=True)
class SlowSamples(Finding):
    """A few samples far slower than the rest cost the loop a share of its time: each holds back
    its batch and, batches being handed over in order, the loop and then the other workers
    (``core.handover``: the pass replayed without them)."""

    kind: ClassVar[str] = "slow-samples"
    dataset: str
    setting: str
    slow: int  # samples beyond the far fence of their times
    samples: int
    fence_s: float
    median_s: float
    loop: tuple[float, float, float]  # their share of the loop's time: value, low, high
    wait: tuple[float, float, float]  # their share of its wait
    slowest: tuple[tuple[int | str, float, str], ...]  # (index, seconds, file or "")
    # the share of the workers' time they waited for a core (0: none): the stalls freed cores for
    # the rest, so the saving replayed is an upper bound
    queued: float = 0.0
    unordered_saves: float | None = None  # of the loop's wait, in_order=False replayed


@dataclass(frozen=True)
class WorkersDoNotFit(Finding):
    """The worker count asked for (the script's, or the verdict's advice) would not fit in RAM or
    in /dev/shm, by the memory measured per worker and per batch."""

    kind: ClassVar[str] = "workers-do-not-fit"
    dataset: str
    workers: int
    advised: bool  # the count is the advice's, not the one that ran
    max_workers_ram: int | None
    max_workers_shm: int | None
    ram_need_bytes: int
    ram_available_bytes: int
    shm_need_bytes: int
    shm_free_bytes: int | None


@dataclass(frozen=True)
class WorkerMemoryGrows(Finding):
    """Each worker's own memory grew with the samples it produced, after its warm-up: what it costs
    over an epoch at the worker count asked for, and its cause where the evidence names one —
    copy-on-read of a dataset holding many Python objects, a leak (growing over samples already
    produced), or unknown."""

    kind: ClassVar[str] = "worker-memory-grows"
    dataset: str
    setting: str
    growth_bytes_per_1000_samples: float
    growth_low: float
    growth_high: float
    workers: int
    epoch_cost_bytes: int  # all workers' growth over one epoch (each epoch again with persistent workers)
    samples_per_epoch: int
    persistent_workers: bool
    cause: str = "copy-on-read"  # copy-on-read | leak | unknown
    dataset_objects: int | None = None
    samples: int = 0  # samples per process the fit rests on
    # persistent workers: what one holds more at the same point of each epoch than of the last
    # (``WorkerMemory.epoch_growth_bytes``), over how many epochs, and the RAM it eats into
    per_epoch_bytes: float | None = None
    per_epoch_low: float | None = None
    per_epoch_high: float | None = None
    epochs: int = 0
    ram_available_bytes: int = 0

    @property
    def epochs_until_full(self) -> float | None:
        """Epochs until the workers' growth fills the RAM available now (None: not per epoch)."""
        if self.per_epoch_bytes is None or self.per_epoch_bytes <= 0:
            return None
        return self.ram_available_bytes / (self.per_epoch_bytes * self.workers)


@dataclass(frozen=True)
class ShmTooSmall(Finding):
    """Batches in flight outgrew /dev/shm: a worker died of it, or would have (seen at the first batch)."""

    kind: ClassVar[str] = "shm-too-small"
    line: str
    failed: bool


@dataclass(frozen=True)
class FirstPassWaits(Finding):
    """A training loader that waited for data mostly before its window: over its first pass (the
    time before it and the rest at the window's pace) it is more input-bound than its window says —
    a streaming dataset downloading before it yields, a cache filled on the first pass. ``by``:
    storage where the processes making its batches (``busy_of``) were mostly off the CPU (neither
    on one nor waiting for one: on I/O; ``busy_share`` the rest), start where they were, but a
    counter that sees its storage counted nothing, loader where busy, "" where not read."""

    kind: ClassVar[str] = "first-pass-waits"
    dataset: str
    before_s: float
    first_batch_s: float | None
    batches_before: int
    wait_before_s: float
    pass_batches: int
    pass_s: float
    pass_share: float
    pass_class: str  # highly | moderately
    window_share: float
    window_class: str
    busy_share: float | None
    by: str  # storage | start | loader | ""
    fetched_bytes: int | None = None
    fetched_method: str = ""
    pass_low: float | None = None  # the pass's share, its 95 % interval (``conclude.firstpass``)
    pass_high: float | None = None
    busy_of: str = "processes"  # workers | training process | processes (a run read before: on a CPU)


@dataclass(frozen=True)
class EpochStartCost(Finding):
    """A loader whose workers are started again at every pass (not persistent): each pass after the
    first waited for its first batch beyond what one worker takes to make one — the start-up that
    ``persistent_workers=True`` keeps out of every epoch. ``share`` (with its 95 % interval over the
    passes): that cost over the passes' own time."""

    kind: ClassVar[str] = "epoch-start-cost"
    dataset: str
    workers: int
    start_method: str
    passes: int  # passes after the first, timed from iter() to their end
    startup_s: float  # mean time inside iter() (the workers started)
    first_batch_s: float  # mean time from iter() to the first batch
    batch_s: float  # one worker's time to make a batch, in the window
    cost_s: float  # mean per pass: the first batch's time beyond batch_s, and stop_s
    pass_s: float  # mean pass, iter() to its end, ioprof's own time taken off
    share: float
    share_low: float
    share_high: float
    sent_bytes: int | None = None  # spawn, forkserver: the dataset pickled, handed to each worker
    sent_s: float | None = None  # pickling it took that long here (each worker unpickles as much)
    sent_whole: bool = True  # False: pickling was stopped there, sent_bytes is a lower bound
    stop_s: float = 0.0  # mean per pass: the call that ran it out, its workers stopped and joined


@dataclass(frozen=True)
class FreshIterators(Finding):
    """A loader whose passes were all too short for a window (``next(iter(loader))`` at every
    step, or a pass left after a batch or two): each batch the loop took came early in a pass, and
    each pass first waited for its first batch — the workers started again (not persistent), or the
    batches they had made ahead thrown away (persistent). ``share`` (with its 95 % interval over the
    passes): those waits over the passes' own time, the loop's time with this loader."""

    kind: ClassVar[str] = "fresh-iterators"
    dataset: str
    workers: int
    persistent: bool
    passes: int  # passes timed from iter() to the next iter() (or their end)
    batches: int  # batches the loop took in them
    most_in_a_pass: int
    pass_holds: int | None  # batches a pass run out would give (len(loader)); None: not known
    startup_s: float  # mean time inside iter() (workers started)
    first_batch_s: float  # mean time from iter() to the first batch
    stop_s: float  # mean time stopping its workers where the loop let the iterator go
    pass_s: float  # mean pass, ioprof's own time taken off
    share: float
    share_low: float
    share_high: float


@dataclass(frozen=True)
class Analysis:
    """The run's conclusions: the overall verdict (from the worst input-bound dataset), one
    verdict per dataset, advice, findings, and the compute ceiling against its published figure."""

    overall_bottleneck: OverallBottleneck
    overall_input_bound: OverallInputBound
    overall_dataset: str  # the dataset the overall verdict comes from ("" when none)
    datasets: tuple[DatasetVerdict, ...]
    advice: tuple[Advice, ...]
    findings: tuple[Finding, ...]
    compute_reference: ComputeReference | None = None
    overall_peers: int = 0  # under torch.distributed: ranks the headline's (worst) loader was one of
    overall_peers_median_share: float | None = None  # their median data-wait share
    first_pass: FirstPassWaits | None = None  # ``run``: a first pass more input-bound than its window
