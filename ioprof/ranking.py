"""``ioprof whatif``'s alternatives ranked against the user's current pipeline: pure, no words.

An alternative beats the current pipeline only as ``ioprof compare`` counts a change: their 95 %
intervals do not overlap and the rates differ by more than ``COMPARE_MIN_EFFECT`` (a window cannot
see how a shared machine drifts between one alternative's run and the next). The one-off cost of an offline copy (pre-resized files, shards) is scaled from the sample to the
whole dataset. When the current pipeline is not input-bound, nothing upstream can make training
faster, and the ranking says so.
"""

from __future__ import annotations

from dataclasses import replace

from ioprof.analysis import classify_interval
from ioprof.comparison import compare_cells
from ioprof.findings import RankedAlternative, Ranking
from ioprof.results import AlternativeResult, WhatifResult


def _ranked(alt: AlternativeResult, base: AlternativeResult, result: WhatifResult) -> RankedAlternative:
    assert alt.cell is not None and base.cell is not None
    mine, theirs = alt.cell.throughput(), base.cell.throughput()
    beyond = compare_cells(base.cell, alt.cell).change != "within-noise"
    scale = result.dataset.total_bytes / alt.sample_bytes if alt.sample_bytes else None
    return RankedAlternative(
        name=alt.name,
        img_per_s=mine.value,
        low=mine.low if mine.known else None,
        high=mine.high if mine.known else None,
        gain=mine.value / theirs.value if theirs.value > 0 else 0.0,
        beyond_noise=alt.name != "baseline" and beyond,
        busy_share=mine.value / result.compute.img_per_s if result.compute.img_per_s > 0 else None,
        data_wait_share=alt.cell.data_wait_share,
        dataset_prep_s=alt.prep_s * scale if alt.prep_s is not None and scale else None,
        dataset_prep_bytes=round(alt.prep_bytes * scale) if alt.prep_bytes is not None and scale else None,
    )


def rank(result: WhatifResult) -> WhatifResult:
    """The measured alternatives, fastest first, and the best one beyond noise (if any)."""
    measured = [a for a in result.alternatives if a.measured and a.cell is not None and a.cell.steps]
    base = next((a for a in measured if a.name == "baseline"), None)
    if base is None or base.cell is None:
        return replace(result, ranking=Ranking((), "", "unknown", False))
    ranked = sorted((_ranked(a, base, result) for a in measured), key=lambda r: r.img_per_s, reverse=True)
    better = [r for r in ranked if r.beyond_noise and r.gain > 1]
    klass, between = classify_interval(base.cell.wait_share())
    return replace(
        result,
        ranking=Ranking(
            ranked=tuple(ranked),
            best=better[0].name if better else "",
            baseline_input_bound=klass,
            compute_bound=between[1] == "not",
        ),
    )
