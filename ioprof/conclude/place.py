"""Placement decisions from measured candidates: pure, no torch, no I/O, no words.

For each usable location: the predicted training rate at each worker count (the slowest of
compute, decode at that count and storage at that concurrency), the accelerator's busy share,
and the time of all the run's epochs. Which epochs read the storage decides it: a dataset that
fits in the RAM the page cache can use, on a filesystem that keeps read pages, reads the storage
in its first epoch only (later epochs run at the compute and decode rate); one that does not fit,
or sits on a mount that drops cached pages at every open (sshfs and other FUSE mounts at their
defaults), reads it every epoch. A candidate folder is worth moving to only when it keeps the
accelerator busy, holds the whole dataset, and the time it saves over the epochs exceeds the copy.
One decision comes out, consistent with every figure beside it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ioprof.conclude.predict import predict
from ioprof.core.config import LoaderSetting
from ioprof.core.findings_place import PlaceDecision, Recommendation
from ioprof.core.results_place import CandidateResult, PlaceResult
from ioprof.core.thresholds import MIN_BUSY_SHARE, SPACE_HEADROOM


def fits(c: CandidateResult, total_bytes: int) -> bool:
    """Whether the whole dataset fits in the candidate's free space (unknown counts as fitting)."""
    return c.free_bytes is None or c.free_bytes >= total_bytes * SPACE_HEADROOM


def fits_in_ram(result: PlaceResult) -> bool:
    return result.dataset.listed_bytes <= result.ram_available_bytes


def reading_epochs(c: CandidateResult, result: PlaceResult) -> int:
    """Epochs that read the storage at this location: the first only where the page cache can hold
    the dataset and the filesystem keeps read pages; every epoch otherwise."""
    return 1 if fits_in_ram(result) and c.keeps_pages is not False else result.epochs


def _rates(result: PlaceResult, workers: int, storage: float | None) -> dict[str, float]:
    decode = {d.workers: d.img_per_s for d in result.decode if d.loader == "multiprocess"}
    rates = {"compute": result.compute.img_per_s}
    if storage is not None:
        rates["storage"] = storage
    if workers in decode:
        rates["decode"] = decode[workers]
    return rates


def _predicted(result: PlaceResult, workers: int, storage: float | None) -> tuple[float, str]:
    p = predict(LoaderSetting.multiprocess(workers), _rates(result, workers, storage), compute_async=False)
    return (p.high, p.by) if p else (0.0, "")


def _decide(c: CandidateResult, result: PlaceResult, current: PlaceDecision | None) -> PlaceDecision:
    demand = result.compute.img_per_s
    by_workers: dict[str, float] = {}
    limits: dict[int, str] = {}
    for s in c.storage:
        by_workers[str(s.concurrency)], limits[s.concurrency] = _predicted(result, s.concurrency, s.img_per_s)
    best_w = max(by_workers, key=lambda k: (by_workers[k], -int(k)))
    predicted = by_workers[best_w]
    storage_rate = next(s.img_per_s for s in c.storage if s.concurrency == int(best_w))
    files = result.dataset.epoch_samples
    epoch_s = files / predicted if predicted > 0 else math.inf
    warm = max(_predicted(result, int(w), None)[0] for w in by_workers)
    reading = reading_epochs(c, result)
    later_s = files / warm if reading == 1 and warm > 0 else epoch_s
    total_s = epoch_s * reading + later_s * (result.epochs - reading)
    copy_s = saved = pays = None
    if c.kind == "candidate" and c.write_mb_per_s:
        copy_s = result.dataset.listed_bytes / 1e6 / c.write_mb_per_s
        if current is not None:
            saved = current.total_s - total_s
            pays = saved > copy_s
    fed, at = accelerators_fed(c, demand)
    return PlaceDecision(
        label=c.label,
        kind=c.kind,
        best_workers=int(best_w),
        predicted_img_per_s=predicted,
        limited_by=limits[int(best_w)],
        busy_share=predicted / demand if demand > 0 else 0.0,
        keeps_busy=predicted >= MIN_BUSY_SHARE * demand,
        storage_headroom=storage_rate / demand if demand > 0 else math.inf,
        predicted_by_workers=by_workers,
        epoch_s=epoch_s,
        copy_s=copy_s,
        saved_s=saved,
        copy_pays_off=pays,
        fits=c.kind != "candidate" or fits(c, result.dataset.listed_bytes),
        reading_epochs=reading,
        warm_img_per_s=warm,
        total_s=total_s,
        keeps_pages=c.keeps_pages,
        accelerators_fed=fed,
        accelerators_at=at,
    )


def accelerators_fed(c: CandidateResult, demand: float) -> tuple[int, int]:
    """(The most accelerators consuming ``demand`` img/s each that this storage alone keeps at
    least ``MIN_BUSY_SHARE`` busy, the readers it was read with): MLPerf Storage's figure, from the
    fastest concurrency measured, at its rate's 95 % low end (its figure where it has no
    interval). More readers might draw more; decode is each accelerator's host's own."""
    if demand <= 0 or not c.storage:
        return 0, 0
    rates = [(s.file_rate(), s.concurrency) for s in c.storage]
    best, at = max(rates, key=lambda r: r[0].value)
    supply = best.low if best.known else best.value
    return max(0, math.floor(supply / (MIN_BUSY_SHARE * demand))), at


def _choose(decisions: list[PlaceDecision]) -> tuple[str, PlaceDecision | None, PlaceDecision | None]:
    """(action, the location it names, a faster location not worth its copy)."""
    current = next((d for d in decisions if d.kind == "current"), None)
    better = [d for d in decisions if d.kind == "candidate" and d.keeps_busy and d.fits]
    paying = [d for d in better if d.copy_pays_off is not False]
    if current and current.keeps_busy:
        return "keep", current, None
    if paying:
        return "move", max(paying, key=lambda d: d.predicted_img_per_s), None
    if better and current is not None:
        return "keep-copy-does-not-pay", current, max(better, key=lambda d: d.predicted_img_per_s)
    if decisions:
        return "none-suffices", max(decisions, key=lambda d: d.predicted_img_per_s), None
    return "nothing-measured", None, None


def recommend(result: PlaceResult, decisions: list[PlaceDecision]) -> Recommendation:
    """Keep the data, move it to the fastest candidate that keeps the accelerator busy, holds it
    all and pays for its copy, keep it because no such copy pays, or say that none keeps up."""
    action, chosen, alt = _choose(decisions)
    current = next((d for d in decisions if d.kind == "current"), None)
    shown = alt if alt is not None else chosen
    return Recommendation(
        action=action,
        location=chosen.label if chosen else "",
        predicted_img_per_s=chosen.predicted_img_per_s if chosen else 0.0,
        best_workers=chosen.best_workers if chosen else 0,
        demand_img_per_s=result.compute.img_per_s,
        simulated_demand=result.compute.simulated,
        busy_share=chosen.busy_share if chosen else 0.0,
        limited_by=chosen.limited_by if chosen else "",
        storage_headroom=chosen.storage_headroom if chosen else 0.0,
        copy_s=shown.copy_s if shown else None,
        saved_s=shown.saved_s if shown else None,
        copy_pays_off=shown.copy_pays_off if shown else None,
        epochs=result.epochs,
        threshold=MIN_BUSY_SHARE,
        reading_epochs=current.reading_epochs if current else 0,
        current_keeps_pages=current.keeps_pages if current else None,
        current_object_store=result.dataset.object_store,
        fits_in_ram=fits_in_ram(result),
        alternative=(alt.label, alt.predicted_img_per_s, alt.copy_s or 0.0, alt.saved_s or 0.0)
        if alt
        else None,
    )


def conclude(result: PlaceResult) -> PlaceResult:
    """Predictions per measured location, and the recommendation."""
    usable = [c for c in result.candidates if c.status == "ok" and c.storage]
    cur_c = next((c for c in usable if c.kind == "current"), None)
    current = _decide(cur_c, result, None) if cur_c else None
    decisions = [current] if current else []
    decisions += [_decide(c, result, current) for c in usable if c.kind != "current"]
    return replace(result, decisions=tuple(decisions), recommendation=recommend(result, decisions))
