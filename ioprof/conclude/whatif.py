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
intervals do not overlap and the rates differ by more than the noise between one run and the
next. A window's interval cannot see that noise (a shared machine's pace moves between runs), so
the user's pipeline is measured first, again after every ``AGAIN_EVERY`` alternatives, and last:
an alternative is read against the runs just before and just after it (``around``), and the
smallest change that counts is ``COMPARE_MIN_EFFECT`` or how far those two runs differ, whichever
is larger: the pace the machine kept while it ran. The one-off
cost of an offline copy is scaled from the sample to the whole dataset. When the current
pipeline is not input-bound, nothing upstream can make training faster, and the ranking says so.
"""

from __future__ import annotations

from dataclasses import replace

from ioprof.conclude.compare import compare_cells
from ioprof.conclude.sweep import classify_interval
from ioprof.core.findings_whatif import RankedAlternative, Ranking
from ioprof.core.results_whatif import AlternativeResult, WhatifResult, is_current
from ioprof.core.thresholds import COMPARE_MIN_EFFECT

CONTROL = "loose-on-scratch"


def control_of(alt: AlternativeResult, by: dict[str, AlternativeResult]) -> AlternativeResult:
    """The measured alternative that shares this one's storage and cache regime."""
    if alt.name == CONTROL or is_current(alt.name):
        return by["baseline"]
    if alt.where == "scratch" and CONTROL in by:
        return by[CONTROL]
    return by["baseline"]


def bytes_per_image(alt: AlternativeResult) -> float | None:
    c = alt.cell
    return c.requested_bytes / c.images if c is not None and c.images and c.requested_bytes > 0 else None


def _on_data_storage(
    alt: AlternativeResult, current: float, result: WhatifResult
) -> tuple[float | None, bool]:
    """(gain over the current pipeline's ``current`` img/s on the data's own storage, whether it is
    an estimate)."""
    assert alt.cell is not None
    if current <= 0:
        return None, alt.where not in ("data", "emulated") and alt.name != CONTROL
    mine = alt.cell.throughput().value
    if alt.where in ("data", "emulated") or alt.name == CONTROL:
        return mine / current, False
    per_image, storage = bytes_per_image(alt), result.data_storage
    if per_image is None or storage is None or not storage.files:
        return None, True
    # the data's storage feeds this many of the copy's images a second, at the loader's readers
    fed = storage.read_mb_per_s * 1e6 / per_image
    return min(mine, fed) / current, True


def current_runs(measured: list[AlternativeResult]) -> list[AlternativeResult]:
    """The user's pipeline as it is, each time it was measured, in order: first, then again."""
    return [a for a in measured if is_current(a.name) and a.cell is not None]


def around(measured: list[AlternativeResult], alt: AlternativeResult) -> list[AlternativeResult]:
    """The runs of the user's pipeline measured just before and just after ``alt`` (in the order
    measured): the pace the machine kept while ``alt`` ran."""
    i = measured.index(alt)
    before = next((a for a in reversed(measured[:i]) if is_current(a.name)), None)
    after = next((a for a in measured[i + 1 :] if is_current(a.name)), None)
    return [a for a in (before, after) if a is not None]


def drift(runs: list[AlternativeResult]) -> float | None:
    """How far the user's pipeline moved between its runs (the fastest over the slowest, less 1):
    this machine's noise from one run to the next, which no window's interval holds."""
    rates = [a.cell.throughput().value for a in runs if a.cell is not None]
    if len(rates) < 2 or min(rates) <= 0:
        return None
    return max(rates) / min(rates) - 1


def _beyond(
    alt: AlternativeResult, ctrl: AlternativeResult, runs: list[AlternativeResult], floor: float
) -> bool:
    """Beyond the noise of its control: of each of the user's runs where that is the control."""
    if is_current(alt.name):
        return False
    against = runs if ctrl.name == "baseline" else [ctrl]
    changes = {
        compare_cells(c.cell, alt.cell, floor).change for c in against if c.cell is not None and alt.cell
    }
    return len(changes) == 1 and changes != {"within-noise"}


def _ranked(
    alt: AlternativeResult, runs: list[AlternativeResult], ctrl: AlternativeResult, result: WhatifResult
) -> RankedAlternative:
    """``alt`` against the user's pipeline measured around it (``runs``), and against its control."""
    assert alt.cell is not None and ctrl.cell is not None
    mine = alt.cell.throughput()
    current = sum(a.cell.throughput().value for a in runs if a.cell is not None) / len(runs)
    floor = max(COMPARE_MIN_EFFECT, drift(runs) or 0.0)
    beyond = _beyond(alt, ctrl, runs, floor)
    scale = result.dataset.listed_bytes / alt.sample_bytes if alt.sample_bytes else None
    data_gain, estimated = _on_data_storage(alt, current, result)
    theirs = ctrl.cell.throughput().value
    storage_gain = theirs / current if ctrl.name == CONTROL and current > 0 else None
    of_control = current if ctrl.name == "baseline" else theirs
    return RankedAlternative(
        name=alt.name,
        img_per_s=mine.value,
        low=mine.low if mine.known else None,
        high=mine.high if mine.known else None,
        gain=mine.value / current if current > 0 else 0.0,
        beyond_noise=beyond,
        busy_share=mine.value / result.compute.img_per_s if result.compute.img_per_s > 0 else None,
        data_wait_share=alt.cell.wait_share().value,
        dataset_prep_s=alt.prep_s * scale if alt.prep_s is not None and scale else None,
        dataset_prep_bytes=round(alt.prep_bytes * scale) if alt.prep_bytes is not None and scale else None,
        control=ctrl.name,
        fix_gain=mine.value / of_control if of_control > 0 else None,
        storage_gain=storage_gain,
        data_gain=data_gain,
        data_gain_estimated=estimated,
        floor=floor,
    )


def conclude(result: WhatifResult) -> WhatifResult:
    """The measured alternatives, fastest first; the best fix beyond the noise of its control (if
    any); and the storage move (the control against the baseline) when it is beyond the noise."""
    measured = [a for a in result.alternatives if a.measured and a.cell is not None and a.cell.steps]
    by = {a.name: a for a in measured}
    runs = current_runs(measured)
    first = runs[0].cell if runs and runs[0].name == "baseline" else None
    if first is None:
        return replace(result, ranking=Ranking((), "", "unknown", False))
    ranked = sorted(
        # the pipeline's own runs, each against them all: how far each moved from their mean
        (
            _ranked(a, runs if is_current(a.name) else around(measured, a), control_of(a, by), result)
            for a in measured
        ),
        key=lambda r: r.img_per_s,
        reverse=True,
    )
    fixes = [r for r in ranked if r.name != CONTROL and r.beyond_noise and (r.fix_gain or 0) > 1]
    best = max(fixes, key=lambda r: r.fix_gain or 0.0).name if fixes else ""
    move = next((r for r in ranked if r.name == CONTROL and r.beyond_noise and r.gain > 1), None)
    klass, between = classify_interval(first.wait_share())
    return replace(
        result,
        ranking=Ranking(
            ranked=tuple(ranked),
            best=best,
            baseline_input_bound=klass,
            compute_bound=between[1] == "not",
            storage_move=move.name if move else "",
            drift=drift(runs),
        ),
    )
