"""From measurements to verdicts: pure functions over result objects (no torch, no I/O, no words).

``analyze`` is a chain of named steps: a verdict per cell (``cell_verdict``), one per dataset
(``dataset_verdict``), the overall verdict from the worst input-bound dataset (``overall``),
advice per dataset (``advise``), and the findings the report must show (``findings``).
Thresholds are named constants with their sources; the words are ``render/words.py``'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from ioprof.conclude import boundaries, inside, workers
from ioprof.conclude.checks import fetched_nothing, findings
from ioprof.conclude.firstpass import first_pass
from ioprof.conclude.predict import decode_pace_of, own_paces, predict, residual
from ioprof.core.findings import (
    Advice,
    Analysis,
    CellVerdict,
    ComputeReference,
    DatasetVerdict,
)
from ioprof.core.presets import published_preset
from ioprof.core.results import (
    CellResult,
    ComputeCeiling,
    DatasetCeilings,
    DatasetInfo,
    StorageCeiling,
    SweepResult,
    TransferCeiling,
    WaitSplit,
)
from ioprof.core.stats import Interval
from ioprof.core.thresholds import (
    FETCHED_NOTHING_SHARE,
    KERNEL_SPLIT_MIN_UNITS,
    MOSTLY_A_COPY_SHARE,
    PUBLISHED_SHARE_TUNED,
    READ_CALLS_MIN_SHARE,
    STORAGE_HEADROOM,
    STORAGE_SCALING,
    classify_input_bound,
)
from ioprof.core.vocab import (
    INPUT_STAGES,
    Bottleneck,
    DecidedBy,
    InputBound,
    InputClass,
    KernelCall,
    OverallBottleneck,
    OverallInputBound,
)

CLASS_ORDER = {"not": 0, "borderline": 1, "moderately": 2, "highly": 3}


def classify_interval(share: Interval) -> tuple[InputBound, tuple[InputClass, InputClass]]:
    """The class of a data-wait share, or ``borderline`` when its interval straddles a threshold."""
    point = classify_input_bound(share.value)
    if not share.known:
        return point, (point, point)
    low, high = classify_input_bound(share.low), classify_input_bound(share.high)
    return ("borderline" if low != high else point), (low, high)


def fetched_share(cell: CellResult, s: StorageCeiling | None) -> float | None:
    """Share of the bytes the cell's samples hold that storage delivered (None: unknown): what was
    fetched ÷ what its loader read. Where its read() calls account for under READ_CALLS_MIN_SHARE
    of the bytes its samples hold (``s``'s bytes per sample × the images), the samples came another
    way — page faults on a memory-mapped file (an Arrow table), which read() never counts — and
    the share is of those bytes: fetched ÷ them."""
    if not by_page_faults(cell, s):
        return cell.miss_ratio()
    assert cell.fetched.bytes is not None and s is not None
    return min(1.0, cell.fetched.bytes / (cell.images * s.sample_bytes()))


def by_page_faults(cell: CellResult, s: StorageCeiling | None) -> bool:
    """Whether the cell's samples came by page faults: its read() calls read under
    READ_CALLS_MIN_SHARE of the bytes its samples hold (``s``'s bytes per sample × the images),
    where its fetched bytes are known. Only the samples that must have been read within the
    window's spans count: a loader's workers may have read those of its queued batches before a
    span opened (``read_ahead_samples``) — short passes of a loader far ahead of its loop read
    little in the spans by read() calls all the same."""
    held = (cell.images - cell.read_ahead_samples) * s.sample_bytes() if s is not None else 0.0
    return cell.fetched.known and held > 0 and cell.requested_bytes < READ_CALLS_MIN_SHARE * held


def storage_rate(s: StorageCeiling, cell: CellResult) -> float:
    """img/s storage can feed this cell: its raw rate scaled to the share of bytes actually
    fetched. A cell whose fetched bytes are unknown is assumed to fetch everything it reads:
    never assume cache hits without evidence."""
    if s.emulated:
        return s.img_per_s  # emulated storage charges every read
    share = s.img_per_s / max(1, s.shared_by)  # read for several ranks together: each its share
    miss = fetched_share(cell, s)
    miss = 1.0 if miss is None else miss
    return share / miss if miss > FETCHED_NOTHING_SHARE else math.inf


def storage_for(cell: CellResult, ceilings: DatasetCeilings | None) -> StorageCeiling | None:
    """The storage ceiling measured at this cell's readers (its ranks' together), if any."""
    return ceilings.storage_for(cell) if ceilings else None


def stage_rates(
    cell: CellResult,
    compute: ComputeCeiling | None,
    ceilings: DatasetCeilings | None,
    transfer: Sequence[TransferCeiling],
    pinned: bool,
) -> dict[str, float]:
    """Ceilings (img/s) of each stage for this cell's loader setting; absent stages are left out."""
    return rates_of(stage_ceilings(cell, compute, ceilings, transfer, pinned))


def rates_of(stages: dict[str, tuple[float, Interval | None]]) -> dict[str, float]:
    """Each stage's ceiling rate (img/s) from ``stage_ceilings``."""
    return {k: v for k, (v, _) in stages.items()}


def spreads_of(stages: dict[str, tuple[float, Interval | None]]) -> dict[str, float]:
    """The relative half-width of each stage's ceiling (``stage_ceilings``: its 95 % interval),
    0 where it has none (a simulated rate, the transfer's single figure)."""
    return {k: i.rel_half_width if i is not None and i.known else 0.0 for k, (_, i) in stages.items()}


def stage_ceilings(
    cell: CellResult,
    compute: ComputeCeiling | None,
    ceilings: DatasetCeilings | None,
    transfer: Sequence[TransferCeiling],
    pinned: bool,
) -> dict[str, tuple[float, Interval | None]]:
    """Each stage's ceiling for this cell's setting: (img/s, its interval where it has one)."""
    out: dict[str, tuple[float, Interval | None]] = {}
    compute = ceilings.compute if ceilings is not None and ceilings.compute is not None else compute
    if compute is not None:
        out["compute"] = (compute.img_per_s, compute.throughput())
    for d in ceilings.decode if ceilings else ():
        if d.setting == cell.setting:
            out["decode"] = (d.img_per_s, d.throughput())
    storage = storage_for(cell, ceilings)
    if storage is not None:
        out["storage"] = (storage_rate(storage, cell), storage.file_rate())
    for t in transfer:
        if t.pinned == pinned:
            out["transfer"] = (t.img_per_s, None)
    return out


def kernel_call(split: WaitSplit | None, input_bound: bool = True) -> KernelCall:
    """What mostly happened while the loop waited: the producer off-CPU (source), on a CPU (cpu),
    runnable but waiting for one (cores), or the training process receiving the batch (receive);
    "mixed" when no part's interval lies above the others'; "" when there is nothing to judge: too
    few waits read, or a loop that hardly waits (short waits are mostly the batch's hand-over)."""
    if (
        not input_bound
        or split is None
        or len(split.wait_s) < KERNEL_SPLIT_MIN_UNITS
        or sum(split.wait_s) <= 0
    ):
        return ""
    shares = split.shares()
    top = max(shares, key=lambda k: shares[k].value)
    rest = [v for k, v in shares.items() if k != top]
    if shares[top].known and all(v.known and shares[top].low > v.high for v in rest):
        return cast(KernelCall, top)  # a state of ``WaitSplit.parts``
    return "mixed"


MEASURED_ALONE = ("storage", "decode")  # the input stages a probe measures alone


def _ceilings_decide(
    cell: CellResult, rates: dict[str, float], inputs: dict[str, float], spreads: dict[str, float]
) -> bool:
    """Whether the stages measured alone can name the one that held the loader back: where both
    were measured (or the storage was found not involved: nothing fetched), the slower; where one
    was not, the one that was only if it explains what the loader delivered — its ceiling's
    interval reaches down to the loader's rate. A stage alone wholly faster than the loader was
    does not say that the stage not measured was not the limit."""
    if all(k in rates for k in MEASURED_ALONE):
        return True
    stage = min(inputs, key=lambda k: inputs[k])
    low = inputs[stage] * (1.0 - spreads.get(stage, 0.0))
    delivered = cell.throughput()
    return low <= (delivered.high if delivered.known else delivered.value)


def cell_verdict(
    cell: CellResult,
    rates: dict[str, float],
    *,
    compute_async: bool,
    storage: StorageCeiling | None = None,
    spreads: dict[str, float] | None = None,
    decode_pace: float | None = None,
) -> CellVerdict:
    """Bottleneck and input-bound class of one cell, with the numbers they rest on: the stage
    ceilings decide where they were measured; where none was, the kernel's split of the waits.
    ``decode_pace``: how many times faster the loader's own work per sample ran in the cell than
    in its decode ceiling (``predict.decode_pace_of``)."""
    share = cell.wait_share()
    klass, between = classify_interval(share)
    inputs: dict[str, float] = {k: v for k, v in rates.items() if k in INPUT_STAGES and math.isfinite(v)}
    call = kernel_call(cell.wait_split, between[0] != "not")
    fetched = fetched_share(cell, storage)
    if call == "source" and fetched is not None and fetched <= FETCHED_NOTHING_SHARE:
        # off-CPU is its source only where the source was read: a producer off-CPU through waits
        # in which nothing was fetched slept, or waited on a lock or another process
        call = "idle"
    decided_by: DecidedBy = ""
    bottleneck: Bottleneck
    if between[1] == "not":
        bottleneck = "compute"
    elif inputs and _ceilings_decide(cell, rates, inputs, spreads or {}):
        bottleneck, decided_by = cast(Bottleneck, min(inputs, key=lambda k: inputs[k])), "ceilings"
    elif call in WaitSplit.STAGE:
        bottleneck, decided_by = WaitSplit.STAGE[call], "kernel"
    else:
        bottleneck = "undetermined"  # input-bound, but no input stage to blame
    prediction = predict(cell.setting, rates, compute_async=compute_async)
    # the spread of the ceilings the prediction names ("compute", "decode+storage in series"…)
    named = [v for k, v in (spreads or {}).items() if prediction and k in prediction.by]
    res, unexplained = (
        residual(cell.throughput(), prediction, max(named, default=0.0))
        if prediction and cell.img_per_s > 0
        else (None, False)
    )
    own = (
        own_paces(cell, rates, prediction, compute_async=compute_async, decode_pace=decode_pace)
        if unexplained and prediction
        else {}
    )
    return CellVerdict(
        bottleneck=bottleneck,
        input_bound=klass,
        input_bound_range=between,
        data_wait_share=share.value,
        wait_share_low=share.low if share.known else None,
        wait_share_high=share.high if share.known else None,
        predicted_img_per_s=prediction.high if prediction else None,
        predicted_low_img_per_s=prediction.low if prediction else None,
        predicted_by=prediction.by if prediction else "",
        residual=res,
        residual_unexplained=unexplained,
        rates=rates,
        storage_miss_ratio=fetched,
        read_by_faults=by_page_faults(cell, storage),
        decided_by=decided_by,
        kernel_call=call,
        own_compute_img_per_s=own.get("compute"),
        own_decode_img_per_s=own.get("decode"),
    )


def compute_runs_async(result: SweepResult) -> bool:
    """A real step on CUDA is only enqueued: the host loads while the GPU computes."""
    return (
        result.run.device.startswith("cuda") and result.compute is not None and not result.compute.simulated
    )


def cell_verdicts(result: SweepResult) -> tuple[CellResult, ...]:
    """Every finished cell with its verdict."""
    ceilings = {c.dataset: c for c in result.ceilings}
    pinned = bool(result.config.get("pin_memory", False))
    out = []
    for cell in result.cells:
        if cell.status != "ok" or not cell.steps:
            out.append(cell)
            continue
        theirs = ceilings.get(cell.dataset)
        stages = stage_ceilings(cell, result.compute, theirs, result.transfer, pinned)
        storage = storage_for(cell, theirs)
        verdict = cell_verdict(
            cell,
            rates_of(stages),
            compute_async=compute_runs_async(result),
            storage=storage,
            spreads=spreads_of(stages),
            decode_pace=decode_pace_of(cell, theirs, fetched_share(cell, storage)),
        )
        out.append(replace(cell, verdict=verdict))
    return tuple(out)


def speedup_over_serial(
    cells: Sequence[CellResult],
) -> tuple[CellResult | None, CellResult | None, float | None]:
    """(serial cell, best multiprocess cell, best / serial) for one dataset's cells."""
    ok = [c for c in cells if c.status == "ok" and c.steps]
    serial = next((c for c in ok if c.loader == "serial"), None)
    mps = [c for c in ok if c.loader == "multiprocess"]
    best = max(mps, key=lambda c: c.delivered()) if mps else None
    ratio = best.delivered() / serial.delivered() if serial and best and serial.delivered() > 0 else None
    return serial, best, ratio


def loader_gain(serial: CellResult | None, best: CellResult | None) -> tuple[float | None, bool]:
    """(the most a loader can gain over ``serial``, whether ``best`` gained more beyond both
    intervals). A loader can at best remove the serial loader's wait for data, the step staying
    what it is: 1 / (1 - its wait share's top). A multiprocess cell faster than that took less
    time for the step itself — as when the host's speed drifts between the two windows."""
    if serial is None:
        return None, False
    share = serial.wait_share()
    top = share.high if share.known else share.value
    if not 0 <= top < 1:
        return None, False
    most = 1 / (1 - top)
    if best is None:
        return most, False
    s, b = serial.throughput(), best.throughput()
    beyond = s.known and b.known and s.high > 0 and b.low / s.high > most
    return most, beyond


def tied_with(best: CellResult, cells: Sequence[CellResult]) -> list[CellResult]:
    """The cells as fast as ``best`` within their intervals (``best`` first)."""
    b = best.throughput()
    out = [best]
    for c in cells:
        i = c.throughput()
        if c is not best and b.known and i.known and i.high >= b.low and i.low <= b.high:
            out.append(c)
    return out


def _class_named(v: CellVerdict) -> str:
    """A verdict's class in words: a borderline one with the two classes its interval straddles."""
    return f"borderline {'/'.join(v.input_bound_range)}" if v.input_bound == "borderline" else v.input_bound


def dataset_verdict(label: str, cells: Sequence[CellResult]) -> DatasetVerdict | None:
    """One dataset's verdict: what limits its best setting, and which settings are input-bound.
    The best setting is the least input-bound of those as fast as the fastest within their
    intervals — a point estimate does not pick between equals."""
    ok = [c for c in cells if c.verdict is not None]
    if not ok:
        return None
    fastest = max(ok, key=lambda c: c.delivered())
    ties = tied_with(fastest, ok)
    top = min(
        ties,
        key=lambda c: (
            (CLASS_ORDER[c.verdict.input_bound], c.verdict.data_wait_share) if c.verdict else (9, 1.0)
        ),
    )
    assert top.verdict is not None
    serial, best_mp, ratio = speedup_over_serial(ok)
    gain_max, beyond = loader_gain(serial, best_mp)
    lead = inside.leading_stage(top)
    bound = tuple(
        (c.setting.label, _class_named(c.verdict), c.verdict.bottleneck, c.verdict.data_wait_share)
        for c in ok
        if c.verdict is not None and c.verdict.input_bound != "not"
    )
    return DatasetVerdict(
        dataset=label,
        best_setting=top.setting.label,
        best_img_per_s=top.delivered(),
        bottleneck=top.verdict.bottleneck,
        input_bound=top.verdict.input_bound,
        input_bound_range=top.verdict.input_bound_range,
        data_wait_share=top.verdict.data_wait_share,
        input_bound_settings=bound,
        serial_img_per_s=serial.delivered() if serial else None,
        speedup_over_serial=ratio,
        best_multiprocess_setting=best_mp.setting.label if best_mp else None,
        best_multiprocess_img_per_s=best_mp.delivered() if best_mp else None,
        leading_stage=lead.name if lead else "",
        leading_share=lead.share if lead else None,
        leading_share_low=lead.share_low if lead else None,
        leading_share_high=lead.share_high if lead else None,
        waited_for_core_share=inside.waited_for_core(top) if lead else None,
        tied_settings=tuple(c.setting.label for c in ties if c is not top),
        fastest_setting=fastest.setting.label if fastest is not top else "",
        loader_gain_max=gain_max,
        speedup_beyond_loader=beyond,
    )


def overall(verdicts: Sequence[DatasetVerdict]) -> tuple[OverallBottleneck, OverallInputBound, str]:
    """(bottleneck, class, dataset) of the run: the worst input-bound dataset's, at its best
    setting — one input-bound dataset is not outvoted by compute-bound ones."""
    if not verdicts:
        return "unknown", "unknown", ""
    worst = max(verdicts, key=lambda v: (CLASS_ORDER[v.input_bound], v.data_wait_share))
    if worst.input_bound == "not":
        return "compute", "not", ""
    return worst.bottleneck, worst.input_bound, worst.dataset


def advise(
    info: DatasetInfo,
    cells: Sequence[CellResult],
    compute: ComputeCeiling | None,
    ceilings: DatasetCeilings | None,
    cores_usable: int,
    consumer: str = "training",
) -> Advice:
    """What to fix first, workers needed, storage bandwidth needed, whether serial suffices."""
    demand = compute.img_per_s if compute else None
    decode = _decode_advice(ceilings, demand, cores_usable, cells)
    storage = _storage_advice(info, ceilings, demand)
    serial = next((c for c in cells if c.loader == "serial" and c.verdict is not None), None)
    verdict = dataset_verdict(info.label, cells)
    top = max((c for c in cells if c.verdict is not None), key=lambda c: c.delivered(), default=None)
    fix: str
    if verdict is not None:
        fix = (
            verdict.bottleneck
            if verdict.bottleneck in INPUT_STAGES
            else ("none" if verdict.input_bound == "not" else "unknown")
        )
    else:  # no end-to-end cell: the slower of the best measured input ceilings, against demand
        fix = _fix_from_ceilings(decode["best_decode_img_per_s"], storage["storage_img_per_s_best"], demand)
    return Advice(
        dataset=info.label,
        fix_first=fix,
        demand_img_per_s=demand,
        cores_usable=cores_usable,
        files_known=info.files is not None and info.total_bytes is not None,
        network_storage=info.fs_kind in ("network", "fuse"),
        object_store=info.object_store,
        # a borderline serial cell's wait straddles a class bar: whether it suffices is not decided
        serial_suffices=None
        if serial is None or serial.verdict is None or serial.verdict.input_bound == "borderline"
        else serial.verdict.input_bound == "not",
        serial_wait_share=serial.wait_share().value if serial else None,
        best_cell_workers=top.workers if top else None,
        best_cell_wait_share=top.wait_share().value if top else None,
        consumer=consumer,
        window_fetched_share=_served_by_a_copy(top),
        **_fetched_of_what_it_read(top, ceilings),
        **decode,
        **storage,
    )


def _served_by_a_copy(top: CellResult | None) -> float | None:
    """The share of its reads the best cell, as the script ran it, fetched from storage, where a
    copy (a cache of its own, the page cache) served most of them; None otherwise."""
    if top is None or top.cache.regime != "as-is" or top.verdict is None:
        return None
    share = top.verdict.storage_miss_ratio
    if share is None or share > MOSTLY_A_COPY_SHARE:
        return None
    return 0.0 if fetched_nothing(top) else share


def _fetched_of_what_it_read(top: CellResult | None, ceilings: DatasetCeilings | None) -> dict[str, Any]:
    """The share of the bytes its samples hold that the best cell fetched from real storage, where
    known and short of all of them, and its storage ceiling over that share (``storage_rate``):
    the advice says both beside the probe's rate of whole samples."""
    s = storage_for(top, ceilings) if top is not None else None
    share = fetched_share(top, s) if top is not None and s is not None and not s.emulated else None
    if top is None or s is None or share is None or not FETCHED_NOTHING_SHARE < share < 1.0:
        return {}
    return {"storage_fetched_share": share, "storage_img_per_s_fetched": storage_rate(s, top)}


def _fix_from_ceilings(decode: float | None, storage: float | None, demand: float | None) -> str:
    known = {k: v for k, v in (("decode", decode), ("storage", storage)) if v is not None}
    if not known or demand is None:
        return "unknown"
    stage = min(known, key=lambda k: known[k])
    return stage if known[stage] < demand else "none"


def _decode_advice(
    ceilings: DatasetCeilings | None, demand: float | None, cores: int, cells: Sequence[CellResult] = ()
) -> dict[str, Any]:
    """Workers needed, read off the measured multiprocess decode curve; and whether a measured
    cell at that many workers kept up in its own window (its loop decidedly not input-bound): the
    workers made what the step took, whatever the reading alone's interval leaves open."""
    curve = sorted(
        (d for d in (ceilings.decode if ceilings else ()) if d.loader == "multiprocess"),
        key=lambda d: d.workers,
    )
    best = max(curve, key=lambda d: d.img_per_s) if curve else None
    per_worker = curve[0].per_reader_img_per_s if curve and curve[0].img_per_s > 0 else None
    # the figures' intervals, so that a worker count read off a ceiling of few batches says how
    # loosely it is known (on an H200, 1024x768 at --seconds 12: one worker ± 28 %)
    one = curve[0].throughput() if per_worker else None
    per_worker_interval = (
        one.centered_on(per_worker) if one is not None and one.known and per_worker else None
    )
    fewest = demand / per_worker_interval.high if demand and per_worker_interval else math.inf
    estimated = demand / per_worker if demand and per_worker else None
    meeting = [d for d in curve if demand and d.img_per_s >= demand]
    shortfall = best.img_per_s / demand if best and demand and not meeting else None
    return {
        "per_worker_img_per_s": per_worker,
        "workers_needed": meeting[0].workers if meeting else None,
        "workers_estimated": estimated,
        "best_decode_workers": best.workers if best else None,
        "best_decode_img_per_s": best.img_per_s if best else None,
        # "more workers cannot get there" only where even the interval's fastest worker needs more cores
        "cores_suffice": meeting != [] or estimated is None or min(estimated, fewest) <= cores,
        "decode_shortfall": shortfall,
        "per_worker_interval": per_worker_interval,
        "best_decode_interval": best.throughput() if best else None,
        "decode_fed": best.fed if best else None,
        "workers_needed_interval": meeting[0].throughput() if meeting else None,
        "workers_needed_kept_up": bool(meeting)
        and any(
            c.loader == "multiprocess"
            and c.workers == meeting[0].workers
            and c.verdict is not None
            and c.verdict.input_bound_range == ("not", "not")
            for c in cells
        ),
    }


def _storage_advice(
    info: DatasetInfo, ceilings: DatasetCeilings | None, demand: float | None
) -> dict[str, Any]:
    """Storage bandwidth needed against the best measured (cold) figure, and whether more
    concurrent readers help (per-file latency) or not (bandwidth). The need is in the bytes the
    storage figure counts for a sample, so that the two compare."""
    measured = [
        s
        for s in (ceilings.storage if ceilings else ())
        if s.files and (s.emulated or s.cache.regime == "cold")
    ]
    counted = [s for s in measured if not s.samples_unknown]  # an img/s only where a read's samples are known
    best = max(counted, key=lambda s: s.img_per_s) if counted else None
    # a sample read alone at its place in an archive takes its own bytes, not its share of the
    # archive (headers, padding, members it does not read)
    per_sample = best.sample_bytes() if best is not None and best.by_member else info.mean_file_bytes
    need_mb = (demand or 0.0) * per_sample / 1e6 if per_sample is not None else None
    by_readers = sorted(measured, key=lambda s: s.concurrency)
    scales = None
    if len(by_readers) >= 2 and by_readers[0].img_per_s > 0:
        scales = by_readers[-1].img_per_s >= STORAGE_SCALING * by_readers[0].img_per_s
    fastest = max(measured, key=lambda s: s.read_mb_per_s) if measured else None
    best_mb = fastest.read_mb_per_s if fastest else None
    # headroom is claimed only where the figure's interval holds it, not its middle alone
    band = fastest.bandwidth().centered_on(fastest.read_mb_per_s) if fastest else None
    low_mb = band.low if band is not None and band.known else best_mb
    read = "cold"
    if fastest is not None and not fastest.emulated and not fastest.cache.verified:
        read = "memory" if info.fs_kind == "ram" else "unverified"
    suffices = (
        None if low_mb is None or not demand or need_mb is None else low_mb >= need_mb * STORAGE_HEADROOM
    )
    return {
        "storage_read": read,
        "storage_mb_per_s_needed": need_mb,
        "mean_file_bytes": per_sample,
        "storage_mb_per_s_measured": best_mb,
        "storage_img_per_s_best": best.img_per_s if best else None,
        "storage_best_readers": best.concurrency if best else None,
        # a figure the page cache may have served can show the storage short, never enough
        "storage_suffices": None if suffices and read == "unverified" else suffices,
        "storage_scales_with_readers": scales,
        "storage_mb_per_s_interval": band if band is not None and band.known else None,
    }


def is_sweep(result: SweepResult) -> bool:
    """Whether the run measured end-to-end cells (``ioprof probe`` measures one ceiling alone)."""
    return "end-to-end" in result.config.get("stages", ["end-to-end"])


def compute_reference(result: SweepResult) -> ComputeReference | None:
    """The measured compute ceiling against the published figure for this GPU (CUDA, real step)."""
    comp = result.compute
    if comp is None or comp.simulated or not result.run.device.startswith("cuda"):
        return None
    gpu = result.machine.gpu or "this GPU"
    preset = published_preset(result.machine.gpu)
    crop = result.config.get("crop_px")
    comparable = (
        comp.model == "resnet50" and crop == 224 and result.config.get("precision") in ("bf16", "fp16")
    )
    share = comp.img_per_s / preset.published_img_per_s if preset and comparable else None
    return ComputeReference(
        gpu=gpu,
        measured_img_per_s=comp.img_per_s,
        published_img_per_s=preset.published_img_per_s if preset else None,
        source=preset.published_source if preset else "",
        comparable=comparable and preset is not None,
        share=share,
        tuned=share is None or share >= PUBLISHED_SHARE_TUNED,
        step_label=comp.label,
        crop_px=crop,
    )


def conclude(result: SweepResult) -> SweepResult:
    """Verdicts for every cell, every dataset and the run, advice and findings, filled in."""
    cells = cell_verdicts(result)
    verdicts = [v for info in result.datasets if (v := dataset_verdict(info.label, _of(cells, info.label)))]
    ceilings = {c.dataset: c for c in result.ceilings}
    roles = {lo.key: lo.role for lo in result.loaders}
    advice = tuple(
        advise(
            info,
            _of(cells, info.label),
            _consumer(result, ceilings.get(info.label)),
            ceilings.get(info.label),
            result.machine.cpu_cores_usable,
            roles.get(info.label, "training"),
        )
        for info in result.datasets
    )
    bottleneck, klass, dataset = overall(headline_verdicts(result, verdicts))
    peers, median = rank_spread(result, verdicts, dataset)
    reference = compute_reference(result)
    analyzed = replace(result, cells=cells)
    return replace(
        analyzed,
        analysis=Analysis(
            overall_bottleneck=bottleneck,
            overall_input_bound=klass,
            overall_dataset=dataset,
            datasets=tuple(verdicts),
            advice=advice,
            findings=findings(analyzed, reference)
            + inside.findings(analyzed, advice)
            + boundaries.epoch_starts(analyzed)
            + boundaries.fresh_iterators(analyzed)
            + workers.out_of_data(analyzed),
            compute_reference=reference,
            overall_peers=peers,
            overall_peers_median_share=median,
            first_pass=first_pass(analyzed),
        ),
    )


def headline_verdicts(result: SweepResult, verdicts: Sequence[DatasetVerdict]) -> list[DatasetVerdict]:
    """The verdicts the headline may come from. A user's script: its training loaders only —
    evaluation never sets it; with no optimizer step at all (inference, updates by hand) every
    loader, as it is; with training seen but no training window measured, none."""
    if result.kind != "run":
        return list(verdicts)
    roles = {lo.key: lo.role for lo in result.loaders}
    training = [v for v in verdicts if roles.get(v.dataset) == "training"]
    if training:
        return training
    if any(lo.role == "no-optimizer" for lo in result.loaders):
        return [v for v in verdicts if roles.get(v.dataset) == "no-optimizer"]
    return []


def rank_spread(
    result: SweepResult, verdicts: Sequence[DatasetVerdict], dataset: str
) -> tuple[int, float | None]:
    """Under torch.distributed: how many ranks' training loaders the headline's worst was chosen
    from, and their median data-wait share."""
    ranks = {lo.key: lo.rank for lo in result.loaders if lo.role == "training"}
    if dataset not in ranks or len(set(ranks.values())) < 2:
        return 0, None
    shares = sorted(v.data_wait_share for v in verdicts if v.dataset in ranks)
    mid = len(shares) // 2
    median = shares[mid] if len(shares) % 2 else (shares[mid - 1] + shares[mid]) / 2
    return len(shares), median


def _consumer(result: SweepResult, ceilings: DatasetCeilings | None) -> ComputeCeiling | None:
    """What consumes a dataset's batches: its own step (a user's loader) or the run's compute ceiling."""
    return ceilings.compute if ceilings is not None and ceilings.compute is not None else result.compute


def _of(cells: Sequence[CellResult], dataset: str) -> list[CellResult]:
    return [c for c in cells if c.dataset == dataset]
