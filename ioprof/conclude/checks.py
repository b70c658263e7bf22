"""The findings a sweep's report must show: one small pure check each, over the analyzed result.

Every check takes the result (cells already carrying their verdicts) and returns typed findings
with the numbers behind them; ``findings`` runs them all in report order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ioprof.conclude.stalls import stalls_of
from ioprof.core.findings import (
    BorderlineCells,
    ComputeBelowPublished,
    ComputePaceVaried,
    ComputeReference,
    ConvertedSamples,
    CpuIsTheDevice,
    DatasetsFitInRam,
    DecodePaceVaried,
    EmulatedFasterThanReal,
    FetchContradiction,
    FetchedAboveStorage,
    FetchedUnchecked,
    FetchedUnknown,
    Finding,
    IteratedOffThread,
    ManyOffPrediction,
    NoOptimizerSteps,
    NotAsAsked,
    OffPrediction,
    PagesNotKept,
    ProbeFailed,
    SplitsDisagree,
    StageUndetermined,
    StorageLeftIdle,
    TrainingNotMeasured,
    UndecodableSamples,
    WorkersExceedCores,
)
from ioprof.core.results import CellResult, StorageCeiling, SweepResult, WaitSplit
from ioprof.core.results_run import ObservedLoader
from ioprof.core.thresholds import (
    CONTRADICTION_MIN_BYTES,
    CONTRADICTION_SHARE,
    DATASET_TO_RAM_FOR_COLD_EPOCHS,
    FETCHED_NOTHING_SHARE,
    FETCHED_VS_STORAGE_TOLERANCE,
    PUBLISHED_SHARE_TUNED,
)
from ioprof.core.vocab import INPUT_STAGES

# Beyond this many, cells off their prediction are summarized in one finding, not listed.
RESIDUALS_LISTED = 3


def _ok(result: SweepResult) -> list[CellResult]:
    return [c for c in result.cells if c.verdict is not None]


def cpu_is_the_device(result: SweepResult) -> list[Finding]:
    comp = result.compute
    if result.run.device != "cpu" or comp is None or comp.simulated or result.kind == "run":
        return []  # a user's own run chose its device
    return [CpuIsTheDevice(result.run.device_reason, comp.model, comp.img_per_s)]


def fetch_contradictions(result: SweepResult) -> list[Finding]:
    """Verified cold, read plenty, fetched nothing: the counter cannot see these reads."""
    fs = {d.label: d.fs_type for d in result.datasets}
    out: list[Finding] = []
    for c in _ok(result):
        fetched = c.fetched.bytes
        if not (c.cache.regime == "cold" and c.cache.verified) or fetched is None:
            continue
        read = c.read_bytes_in_window
        if read >= CONTRADICTION_MIN_BYTES and fetched < CONTRADICTION_SHARE * read:
            out.append(
                FetchContradiction(
                    c.dataset,
                    c.setting.label,
                    read,
                    fetched,
                    c.fetched.method,
                    fs.get(c.dataset, ""),
                )
            )
    return out


def regimes_not_verified(result: SweepResult) -> list[Finding]:
    """Cells and storage probes whose cache regime was asked for but not achieved."""
    out: list[Finding] = [
        NotAsAsked(c.dataset, c.setting.label, c.cache.regime, c.cache.note)
        for c in result.cells
        if c.status == "ok" and not c.cache.verified
    ]
    for dc in result.ceilings:
        notes = {s.cache.note for s in dc.storage if not s.cache.verified}
        out += [NotAsAsked(dc.dataset, "storage ceiling", "cold", n) for n in sorted(notes)]
    return out


def fetched_unknown(result: SweepResult) -> list[Finding]:
    out: list[Finding] = []
    for info in result.datasets:
        unknown = tuple(
            c.setting.label for c in _ok(result) if c.dataset == info.label and not c.fetched.known
        )
        if unknown:
            out.append(FetchedUnknown(info.label, info.fs_type, unknown))
    return out


def _evaluation(result: SweepResult) -> set[str]:
    """A user's evaluation loaders: timed, but not measured alone (only training's pipeline is)."""
    return {lo.key for lo in result.loaders if lo.role == "evaluation"}


def stages_undetermined(result: SweepResult) -> list[Finding]:
    why = probe_reasons(result)
    evaluation = _evaluation(result)
    return [
        StageUndetermined(
            c.dataset,
            c.setting.label,
            c.verdict.data_wait_share,
            why,
            tuple((k, r) for k, r in c.verdict.rates.items() if k in INPUT_STAGES and math.isfinite(r)),
            c.delivered(),
            c.verdict.kernel_call == "idle",
        )
        for c in _ok(result)
        if c.verdict is not None and c.verdict.bottleneck == "undetermined" and c.dataset not in evaluation
    ]


def storage_high_mb_per_s(result: SweepResult, dataset: str) -> float | None:
    """The upper end of the interval of the fastest real storage ceiling measured under a dataset,
    in the bytes its counter saw fetched."""
    highs = [
        band.high if band.known else band.value
        for dc in result.ceilings
        if dc.dataset == dataset
        for s in dc.storage
        if s.files and not s.emulated
        for band in (s.fetched_bandwidth(),)
    ]
    return max(highs) if highs else None


def fetched_impossible(result: SweepResult) -> list[Finding]:
    """Bytes fetched faster than the storage delivers read alone (beyond the counters' edges,
    ``FETCHED_VS_STORAGE_TOLERANCE``): the counter saw more than this loader's reads in its
    window (another reader, a machine-wide counter). Said, never printed as a measurement, never
    clipped to the ceiling. Where the fetched figure has an interval, its lower end must lie
    beyond: a short window's few segments that merely may be above are no finding."""
    out: list[Finding] = []
    unchecked = []
    for c in _ok(result):
        mb = c.fetched_mb_per_s()
        if mb is None or c.fetched.method in ("emulated", "ram"):
            continue
        bandwidth = c.fetched_bandwidth()
        low = bandwidth.low if bandwidth is not None and bandwidth.known else mb
        high = storage_high_mb_per_s(result, c.dataset)
        if high is None and c.dataset not in _evaluation(result):
            unchecked.append(f"{c.dataset} {c.setting.label}")
        elif high is not None and low > high * (1 + FETCHED_VS_STORAGE_TOLERANCE):
            out.append(
                FetchedAboveStorage(
                    c.dataset, c.setting.label, mb, high, c.fetched.method, c.fetched.source, c.byte_window_s
                )
            )
    if unchecked and result.kind == "run":
        out.append(FetchedUnchecked(tuple(unchecked), "; ".join(probe_reasons(result))))
    return out


def _read_alone(result: SweepResult, c: CellResult) -> StorageCeiling | None:
    """The storage read alone by as many readers as the cell's loader had (its workers, one for
    a serial loader), from the real storage and not from the page cache; None where not measured."""
    readers = max(c.workers, 1)
    alone = [
        s
        for dc in result.ceilings
        if dc.dataset == c.dataset
        for s in dc.storage
        if s.files
        and not s.emulated
        and s.concurrency == readers
        and s.cache.regime not in ("warm", "memory")
    ]
    return alone[0] if alone else None


def _reads_in_flight(c: CellResult) -> float | None:
    """The workers' time in their read stage, added up: how many reads were in flight on average
    (each worker reads one sample at a time). None where reads were not timed apart."""
    stages = c.inside.stages if c.inside is not None else None
    shares = [s.share for s in (stages.worker if stages else ()) if s.name == "read" and s.share is not None]
    return c.workers * shares[0] if shares and c.workers else None


def storage_left_idle(result: SweepResult) -> list[Finding]:
    """Storage-bound cells that drew less than their readers draw from the storage reading alone,
    beyond both intervals and the counters' edges (a figure whose interval reaches the storage's
    says nothing)."""
    evaluation = _evaluation(result)
    rows: dict[str, list[tuple[str, float, float, float, float, int, float | None]]] = {}
    for c in _ok(result):
        if c.verdict is None or c.verdict.bottleneck != "storage" or c.dataset in evaluation:
            continue
        bandwidth = c.fetched_bandwidth()
        alone = _read_alone(result, c)
        if bandwidth is None or not bandwidth.known or alone is None:
            continue
        storage = alone.fetched_bandwidth()  # as the counters saw both: fetched against fetched
        if storage.known and bandwidth.high < storage.low * (1 - FETCHED_VS_STORAGE_TOLERANCE):
            rows.setdefault(c.dataset, []).append(
                (
                    c.setting.label,
                    bandwidth.value,
                    bandwidth.high,
                    storage.value,
                    storage.low,
                    alone.concurrency,
                    _reads_in_flight(c),
                )
            )
    return [StorageLeftIdle(dataset, tuple(cells)) for dataset, cells in rows.items()]


def probe_reasons(result: SweepResult) -> tuple[str, ...]:
    """Why a user's pipeline was not (fully) measured alone: --no-probe, the condition that kept
    the probe from running, or what it could not measure."""
    s = result.script
    if s is None:
        return ()
    if not result.config.get("probe", True):
        return ("--no-probe: the pipeline was not measured alone",)
    refused = (f"not probed: {s.probe_refused}",) if s.probe_refused else ()
    return (*refused, *s.probe_notes)


def script_roles(result: SweepResult) -> list[Finding]:
    """A user's script: no training window measured, no optimizer at all, a loader off the loop's thread."""
    if result.kind != "run" or result.script is None:
        return []
    out: list[Finding] = []
    measured = {c.dataset for c in _ok(result)}
    roles = {lo.role for lo in result.loaders}
    training_measured = any(lo.role == "training" and lo.key in measured for lo in result.loaders)
    if result.loaders and not training_measured and result.script.optimizer_steps > 0:
        rows = tuple(
            (lo.key, lo.role, _most_in_a_pass(lo), lo.measured_batches_needed) for lo in result.loaders
        )
        out.append(TrainingNotMeasured(rows, result.script.warmup_steps))
    if result.loaders and "no-optimizer" in roles:
        out.append(NoOptimizerSteps(tuple(lo.key for lo in result.loaders)))
    out += [IteratedOffThread(lo.key, lo.off_thread) for lo in result.loaders if lo.off_thread]
    return out


def _most_in_a_pass(lo: ObservedLoader) -> int:
    """The batches a loader delivered in its longest pass (all it delivered, where its passes were
    not told apart)."""
    return max((p.batches for p in lo.pass_starts), default=lo.batches) or lo.batches


def splits_disagree(result: SweepResult) -> list[Finding]:
    """Where both methods ran, they must agree: the ceilings' stage against the kernel's call."""
    out: list[Finding] = []
    for c in _ok(result):
        v = c.verdict
        if (
            v is None
            or v.decided_by != "ceilings"
            or v.kernel_call not in WaitSplit.STAGE
            or c.wait_split is None
        ):
            continue
        kernel = WaitSplit.STAGE[v.kernel_call]
        if kernel != v.bottleneck:
            shares = tuple((k, i.value) for k, i in c.wait_split.shares().items())
            out.append(SplitsDisagree(c.dataset, c.setting.label, v.bottleneck, v.kernel_call, shares))
    return out


def probe_failures(result: SweepResult) -> list[Finding]:
    return [ProbeFailed(p.dataset, p.stage, p.setting, p.error) for p in result.probe_failures]


def samples(result: SweepResult) -> list[Finding]:
    u = result.undecodable
    out: list[Finding] = []
    if u.count:
        out.append(UndecodableSamples(u.count, u.first[:5]))
    if u.converted:
        out.append(ConvertedSamples(u.converted))
    return out


def off_prediction(result: SweepResult) -> list[Finding]:
    """Cells measured outside their predicted range beyond their own interval: listed, or summarized.
    A cell whose input stages were not measured is left out: its prediction is the compute ceiling
    alone, and the stage-undetermined warning already says why it waits."""
    unexplained = [
        c
        for c in _ok(result)
        if c.verdict
        and c.verdict.residual_unexplained
        and c.verdict.residual is not None
        and c.verdict.bottleneck != "undetermined"
    ]
    paced = [c for c in unexplained if c.verdict and c.verdict.own_compute_img_per_s is not None]
    decoded = [c for c in unexplained if c.verdict and c.verdict.own_decode_img_per_s is not None]
    off = [
        c
        for c in unexplained
        if c.verdict and c.verdict.own_compute_img_per_s is None and c.verdict.own_decode_img_per_s is None
    ]
    return _pace_varied(result, paced) + _decode_pace_varied(result, decoded) + _off_prediction(result, off)


def _pace_varied(result: SweepResult, paced: list[CellResult]) -> list[Finding]:
    """Cells explained by the pace their own steps ran at, not by the compute ceiling: said once."""
    if not paced or result.compute is None or result.compute.img_per_s <= 0:
        return []
    ceiling = result.compute.img_per_s
    own = [(c.verdict.own_compute_img_per_s or 0.0) / ceiling - 1 for c in paced if c.verdict]
    return [ComputePaceVaried(len(paced), len(_ok(result)), min(own), max(own), ceiling)]


def _decode_pace_varied(result: SweepResult, paced: list[CellResult]) -> list[Finding]:
    """Cells explained by the pace their loader's own work ran at, not by its decode ceiling's."""
    own = [
        (c.verdict.own_decode_img_per_s or 0.0) / c.verdict.rates["decode"] - 1
        for c in paced
        if c.verdict and c.verdict.rates.get("decode")
    ]
    return [DecodePaceVaried(len(own), len(_ok(result)), min(own), max(own))] if own else []


def _off_prediction(result: SweepResult, off: list[CellResult]) -> list[Finding]:
    if not off:
        return []
    if len(off) <= RESIDUALS_LISTED:
        return [
            OffPrediction(
                c.dataset,
                c.setting.label,
                c.delivered(),
                c.verdict.predicted_low_img_per_s or 0.0,
                c.verdict.predicted_img_per_s or 0.0,
                c.verdict.residual or 0.0,
            )
            for c in off
            if c.verdict
        ]
    residuals = [c.verdict.residual or 0.0 for c in off if c.verdict]
    by_compute = all(c.verdict and c.verdict.predicted_by.startswith("compute") for c in off)
    return [
        ManyOffPrediction(
            count=len(off),
            cells=len(_ok(result)),
            residual_min=min(residuals),
            residual_max=max(residuals),
            compute_measured_low=all(r > 0 for r in residuals) and by_compute and result.compute is not None,
            compute_img_per_s=result.compute.img_per_s if result.compute else None,
        )
    ]


def workers_exceed_cores(result: SweepResult) -> list[Finding]:
    cores = result.machine.cpu_cores_usable
    over = tuple(sorted({c.workers for c in result.cells if c.workers > cores}))
    return [WorkersExceedCores(over, cores)] if over else []


def datasets_fit_in_ram(result: SweepResult) -> list[Finding]:
    """Datasets the page cache could hold: later epochs come from RAM — said only where the size is
    known and the filesystem was checked to keep read pages; on one that drops them (sshfs, a URL
    fetched again at each read) every epoch reads the storage, said apart — unless a window of its
    loader fetched none of what it read (a cache of its own, filled by its first pass: WebDataset's
    ``cache_dir``, a streaming dataset's local copy). A dataset whose size or filesystem is unknown
    gets no claim either way; nor does one on a RAM-backed filesystem (tmpfs), which every epoch
    reads from memory and no cold cell could evict."""
    ram = result.machine.ram_for_cache_bytes or result.machine.ram_bytes
    small = [
        i
        for i in result.datasets
        if i.total_bytes is not None and i.total_bytes * DATASET_TO_RAM_FOR_COLD_EPOCHS <= ram
    ]
    kept = [i for i in small if i.keeps_pages is True and i.fs_type and i.fs_kind != "ram"]
    dropped = [
        i for i in small if i.keeps_pages is False and i.fs_type and not _read_from_a_copy(result, i.label)
    ]
    out: list[Finding] = []
    if kept:
        out.append(
            DatasetsFitInRam(
                tuple(i.label for i in kept),
                tuple(i.listed_bytes for i in kept),
                tuple(i.fs_type or "" for i in kept),
                ram,
                DATASET_TO_RAM_FOR_COLD_EPOCHS,
                cold_cells=any(c.cache.regime == "cold" for c in result.cells),
                ram_source=result.machine.ram_for_cache_source,
                reclaim=result.machine.reclaim,
                reclaim_idle_s=result.machine.reclaim_idle_s,
                epoch_s=_longest_epoch_s(result, [i.label for i in kept]),
            )
        )
    if dropped:
        out.append(PagesNotKept(tuple(i.label for i in dropped), tuple(i.fs_type or "" for i in dropped)))
    return out


def fetched_nothing(cell: CellResult) -> bool:
    """Whether the cell's window fetched none of the bytes it read (its fetch measured)."""
    share = cell.verdict.storage_miss_ratio if cell.verdict is not None else None
    return share is not None and share <= FETCHED_NOTHING_SHARE


def _read_from_a_copy(result: SweepResult, label: str) -> bool:
    """Whether a measured window of this dataset fetched none of the bytes it read."""
    return any(fetched_nothing(c) for c in _ok(result) if c.dataset == label)


def _longest_epoch_s(result: SweepResult, labels: Sequence[str]) -> float | None:
    """The longest epoch of these datasets, each at the best pace its cells measured (None where
    one has no count of samples or no cell)."""
    epochs = []
    for info in result.datasets:
        if info.label not in labels:
            continue
        best = max((c.delivered() for c in _ok(result) if c.dataset == info.label), default=0.0)
        if not info.epoch_samples or best <= 0:
            return None
        epochs.append(info.epoch_samples / best)
    return max(epochs, default=None)


def emulated_faster_than_real(result: SweepResult) -> list[Finding]:
    """An emulated profile faster than the device the data really sits on: its figures describe
    storage this machine does not have (they are still emulated, never the real device's)."""
    out: list[Finding] = []
    profile = result.config.get("storage_profile") or {}
    for dc in result.ceilings:
        real = dc.real_storage
        mb = profile.get("read_mb_per_s")
        if real is not None and real.files and mb and real.read_mb_per_s < mb:
            out.append(
                EmulatedFasterThanReal(dc.dataset, str(profile.get("name")), float(mb), real.read_mb_per_s)
            )
    return out


def borderline(result: SweepResult) -> list[Finding]:
    found = [(c, v) for c in _ok(result) if (v := c.verdict) is not None and v.input_bound == "borderline"]
    cells = tuple(
        (
            c.dataset,
            c.setting.label,
            v.input_bound_range[0],
            v.input_bound_range[1],
            v.wait_share_low or 0.0,
            v.wait_share_high or 0.0,
        )
        for c, v in found
    )
    ended = tuple(c.stopped_by for c, _ in found) if result.kind == "run" else ()
    return [BorderlineCells(cells, ended)] if cells else []


def waits_in_few_stalls(result: SweepResult) -> list[Finding]:
    return [x for c in _ok(result) if (x := stalls_of(c)) is not None]


CHECKS: Sequence[Callable[[SweepResult], list[Finding]]] = (
    script_roles,
    cpu_is_the_device,
    fetched_impossible,
    storage_left_idle,
    fetch_contradictions,
    regimes_not_verified,
    fetched_unknown,
    stages_undetermined,
    waits_in_few_stalls,
    splits_disagree,
    borderline,
    probe_failures,
    samples,
    off_prediction,
    workers_exceed_cores,
    datasets_fit_in_ram,
    emulated_faster_than_real,
)


def findings(result: SweepResult, reference: ComputeReference | None) -> tuple[Finding, ...]:
    """Every check's findings, in report order, and the compute ceiling against its published figure."""
    out = [f for check in CHECKS for f in check(result)]
    if reference is not None and reference.comparable and not reference.tuned:
        out.append(ComputeBelowPublished(reference, PUBLISHED_SHARE_TUNED))
    return tuple(out)
