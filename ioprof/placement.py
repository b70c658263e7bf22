"""Placement decisions from measured candidates: pure, no torch, no I/O, no words.

For each usable location: the predicted training rate at each worker count (the slowest of
compute, decode at that count and storage at that concurrency), the accelerator's busy share,
the epoch time, and — for candidate folders — whether copying the whole dataset there pays off.
A candidate without room for the whole dataset is measured for information only and never
recommended.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ioprof.analysis import predict
from ioprof.config import LoaderSetting
from ioprof.findings import PlaceDecision, Recommendation
from ioprof.results import CandidateResult, PlaceResult
from ioprof.thresholds import MIN_BUSY_SHARE

# A candidate must hold the whole dataset with this much to spare.
SPACE_HEADROOM = 1.05


def fits(c: CandidateResult, total_bytes: int) -> bool:
    """Whether the whole dataset fits in the candidate's free space (unknown counts as fitting)."""
    return c.free_bytes is None or c.free_bytes >= total_bytes * SPACE_HEADROOM


def _decide(c: CandidateResult, result: PlaceResult, current: PlaceDecision | None) -> PlaceDecision:
    demand = result.compute.img_per_s
    decode = {d.workers: d.img_per_s for d in result.decode if d.loader == "multiprocess"}
    by_workers: dict[str, float] = {}
    limits: dict[int, str] = {}
    for s in c.storage:
        w = s.concurrency
        rates = {"compute": demand, "storage": s.img_per_s}
        if w in decode:
            rates["decode"] = decode[w]
        p = predict(LoaderSetting.multiprocess(w), rates, compute_async=False)
        by_workers[str(w)], limits[w] = (p.high, p.by) if p else (0.0, "")
    best_w = max(by_workers, key=lambda k: (by_workers[k], -int(k)))
    predicted = by_workers[best_w]
    storage_rate = next(s.img_per_s for s in c.storage if s.concurrency == int(best_w))
    epoch_s = result.dataset.files / predicted if predicted > 0 else math.inf
    copy_s = saved = pays = None
    if c.kind == "candidate" and c.write_mb_per_s:
        copy_s = result.dataset.total_bytes / 1e6 / c.write_mb_per_s
        if current is not None:
            # a dataset that fits in RAM reads storage only in its first epoch
            reading_epochs = 1 if result.dataset.total_bytes <= result.ram_available_bytes else result.epochs
            saved = (current.epoch_s - epoch_s) * reading_epochs
            pays = saved > copy_s
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
        fits=c.kind != "candidate" or fits(c, result.dataset.total_bytes),
    )


def recommend(result: PlaceResult, decisions: list[PlaceDecision]) -> Recommendation:
    """Keep the data, move it to the fastest candidate that keeps the accelerator busy (and can
    hold it all), or say that none does and what limits the best."""
    current = next((d for d in decisions if d.kind == "current"), None)
    movable = [d for d in decisions if d.kind == "candidate" and d.keeps_busy and d.fits]
    if current and current.keeps_busy:
        action, chosen = "keep", current
    elif movable:
        action, chosen = "move", max(movable, key=lambda d: d.predicted_img_per_s)
    elif decisions:
        action, chosen = "none-suffices", max(decisions, key=lambda d: d.predicted_img_per_s)
    else:
        action, chosen = "nothing-measured", None
    demand = result.compute.img_per_s
    return Recommendation(
        action=action,
        location=chosen.label if chosen else "",
        predicted_img_per_s=chosen.predicted_img_per_s if chosen else 0.0,
        best_workers=chosen.best_workers if chosen else 0,
        demand_img_per_s=demand,
        simulated_demand=result.compute.simulated,
        busy_share=chosen.busy_share if chosen else 0.0,
        limited_by=chosen.limited_by if chosen else "",
        storage_headroom=chosen.storage_headroom if chosen else 0.0,
        copy_s=chosen.copy_s if chosen else None,
        saved_s=chosen.saved_s if chosen else None,
        copy_pays_off=chosen.copy_pays_off if chosen else None,
        epochs=result.epochs,
        threshold=MIN_BUSY_SHARE,
    )


def decide(result: PlaceResult) -> PlaceResult:
    """Predictions per measured location, and the recommendation."""
    usable = [c for c in result.candidates if c.status == "ok" and c.storage]
    cur_c = next((c for c in usable if c.kind == "current"), None)
    current = _decide(cur_c, result, None) if cur_c else None
    decisions = [current] if current else []
    decisions += [_decide(c, result, current) for c in usable if c.kind != "current"]
    return replace(result, decisions=tuple(decisions), recommendation=recommend(result, decisions))
