"""Placement decisions from measured candidates: pure, no torch, no I/O."""

from __future__ import annotations

import math
from dataclasses import replace

from ioprof.analysis import predict
from ioprof.results import CandidateResult, PlaceDecision, PlaceResult

# MLPerf Storage: the accelerator must stay at least 90 % busy for ResNet-50.
MIN_BUSY_SHARE = 0.90


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
        rate, limits[w] = predict("multiprocess", rates)
        by_workers[str(w)] = rate or 0.0
    best_w = max(by_workers, key=lambda k: (by_workers[k], -int(k)))
    predicted = by_workers[best_w]
    storage_rate = next(s.img_per_s for s in c.storage if s.concurrency == int(best_w))
    files = result.dataset.files
    epoch_s = files / predicted if predicted > 0 else math.inf
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
    )


def decide(result: PlaceResult) -> PlaceResult:
    """Predictions per candidate, and the recommendation in one sentence."""
    usable = [c for c in result.candidates if c.status == "ok" and c.storage]
    cur_c = next((c for c in usable if c.kind == "current"), None)
    current = _decide(cur_c, result, None) if cur_c else None
    decisions = [current] if current else []
    decisions += [_decide(c, result, current) for c in usable if c.kind != "current"]
    demand = result.compute.img_per_s
    kind = "simulated " if result.compute.simulated else ""
    need = f"{MIN_BUSY_SHARE:.0%} of the {kind}{demand:,.0f} img/s the accelerator consumes"
    real = [d for d in decisions if d.kind == "candidate" and d.keeps_busy]
    if current and current.keeps_busy:
        rec = (
            f"Keep the dataset where it is: it feeds {current.predicted_img_per_s:,.0f} img/s with "
            f"{current.best_workers} workers, at least {need} (storage headroom "
            f"{current.storage_headroom:.1f}×)."
        )
    elif real:
        best = max(real, key=lambda d: d.predicted_img_per_s)
        copy = ""
        if best.copy_s is not None and best.saved_s is not None:
            verdict = "pays for itself" if best.copy_pays_off else "does not pay for itself"
            copy = (
                f"; copying the dataset there takes about {best.copy_s:,.0f} s and saves "
                f"{best.saved_s:,.0f} s over {result.epochs} epoch(s), so it {verdict}"
            )
        rec = (
            f"Move the dataset to {best.label}: it feeds {best.predicted_img_per_s:,.0f} img/s with "
            f"{best.best_workers} workers, at least {need}{copy}."
        )
    elif decisions:
        best = max(decisions, key=lambda d: d.predicted_img_per_s)
        rec = (
            f"No location measured keeps the accelerator {MIN_BUSY_SHARE:.0%} busy; the best, {best.label}, "
            f"feeds {best.predicted_img_per_s:,.0f} img/s ({best.busy_share:.0%}), limited by {best.limited_by}"
            + (" — a faster disk will not fix that." if best.limited_by != "storage" else ".")
        )
    else:
        rec = "No location could be measured; see the table for why."
    return replace(result, decisions=tuple(decisions), recommendation=rec)
