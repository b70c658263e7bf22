"""``ioprof whatif``'s alternatives ranked against the user's current pipeline: pure, no words.

Every alternative is judged against a **control** that shares its storage and cache regime: the
baseline for those that read the data where it lives, the same loose files copied to the scratch
storage (``loose-on-scratch``) for the copies made there (pre-resized files, shards). Its gain
over the control is the fix's own; the control's gain over the baseline is the move to the
scratch storage, which is a question of where the data lives (``ioprof place``), not of how it is
read. A copy's gain on the data's own storage is measured where the scratch folder sits on it,
and otherwise estimated from the bytes per image it reads against the bandwidth the data's
storage delivered read alone — and marked as an estimate.

An alternative beats its control only as ``ioprof compare`` counts a change: their 95 %
intervals do not overlap and the rates differ by more than ``COMPARE_MIN_EFFECT``. The one-off
cost of an offline copy is scaled from the sample to the whole dataset. When the current
pipeline is not input-bound, nothing upstream can make training faster, and the ranking says so.
"""

from __future__ import annotations

from dataclasses import replace

from ioprof.conclude.compare import compare_cells
from ioprof.conclude.sweep import classify_interval
from ioprof.core.findings_whatif import RankedAlternative, Ranking
from ioprof.core.results_whatif import AlternativeResult, WhatifResult

CONTROL = "loose-on-scratch"


def control_of(alt: AlternativeResult, by: dict[str, AlternativeResult]) -> AlternativeResult:
    """The measured alternative that shares this one's storage and cache regime."""
    if alt.name == CONTROL:
        return by["baseline"]
    if alt.where == "scratch" and CONTROL in by:
        return by[CONTROL]
    return by["baseline"]


def bytes_per_image(alt: AlternativeResult) -> float | None:
    c = alt.cell
    return c.requested_bytes / c.images if c is not None and c.images and c.requested_bytes > 0 else None


def _on_data_storage(
    alt: AlternativeResult, base: AlternativeResult, result: WhatifResult
) -> tuple[float | None, bool]:
    """(gain over the current pipeline on the data's own storage, whether it is an estimate)."""
    assert alt.cell is not None and base.cell is not None
    if alt.where in ("data", "emulated") or alt.name == CONTROL:
        return (alt.cell.img_per_s / base.cell.img_per_s if base.cell.img_per_s > 0 else None), False
    per_image, storage = bytes_per_image(alt), result.data_storage
    if per_image is None or storage is None or not storage.files or base.cell.img_per_s <= 0:
        return None, True
    # the data's storage feeds this many of the copy's images a second, at the loader's readers
    fed = storage.read_mb_per_s * 1e6 / per_image
    return min(alt.cell.img_per_s, fed) / base.cell.img_per_s, True


def _ranked(
    alt: AlternativeResult, base: AlternativeResult, ctrl: AlternativeResult, result: WhatifResult
) -> RankedAlternative:
    assert alt.cell is not None and base.cell is not None and ctrl.cell is not None
    mine, theirs = alt.cell.throughput(), base.cell.throughput()
    beyond = alt.name != "baseline" and compare_cells(ctrl.cell, alt.cell).change != "within-noise"
    scale = result.dataset.listed_bytes / alt.sample_bytes if alt.sample_bytes else None
    data_gain, estimated = _on_data_storage(alt, base, result)
    storage_gain = ctrl.cell.img_per_s / base.cell.img_per_s if ctrl.name == CONTROL else None
    return RankedAlternative(
        name=alt.name,
        img_per_s=mine.value,
        low=mine.low if mine.known else None,
        high=mine.high if mine.known else None,
        gain=mine.value / theirs.value if theirs.value > 0 else 0.0,
        beyond_noise=beyond,
        busy_share=mine.value / result.compute.img_per_s if result.compute.img_per_s > 0 else None,
        data_wait_share=alt.cell.data_wait_share,
        dataset_prep_s=alt.prep_s * scale if alt.prep_s is not None and scale else None,
        dataset_prep_bytes=round(alt.prep_bytes * scale) if alt.prep_bytes is not None and scale else None,
        control=ctrl.name,
        fix_gain=mine.value / ctrl.cell.img_per_s if ctrl.cell.img_per_s > 0 else None,
        storage_gain=storage_gain,
        data_gain=data_gain,
        data_gain_estimated=estimated,
    )


def conclude(result: WhatifResult) -> WhatifResult:
    """The measured alternatives, fastest first; the best fix beyond the noise of its control (if
    any); and the storage move (the control against the baseline) when it is beyond the noise."""
    measured = [a for a in result.alternatives if a.measured and a.cell is not None and a.cell.steps]
    by = {a.name: a for a in measured}
    base = by.get("baseline")
    if base is None or base.cell is None:
        return replace(result, ranking=Ranking((), "", "unknown", False))
    ranked = sorted(
        (_ranked(a, base, control_of(a, by), result) for a in measured),
        key=lambda r: r.img_per_s,
        reverse=True,
    )
    fixes = [r for r in ranked if r.name != CONTROL and r.beyond_noise and (r.fix_gain or 0) > 1]
    best = max(fixes, key=lambda r: r.fix_gain or 0.0).name if fixes else ""
    move = next((r for r in ranked if r.name == CONTROL and r.beyond_noise and r.gain > 1), None)
    klass, between = classify_interval(base.cell.wait_share())
    return replace(
        result,
        ranking=Ranking(
            ranked=tuple(ranked),
            best=best,
            baseline_input_bound=klass,
            compute_bound=between[1] == "not",
            storage_move=move.name if move else "",
        ),
    )
