"""A window whose data wait lies mostly in a few long waits (stalls): a library sleeping as its
data runs out, a pass's end, a lock or a download — no batch's making. Its share is then the
stalls', and what its loader's pace made it wait is the share without them: a finding says so, and
the findings that would call the loader's pace (its working workers, its cores) what limits the
loop do not, where without the stalls it did not wait."""

from __future__ import annotations

from ioprof.core.findings_run import WaitInFewStalls
from ioprof.core.handover import far_fence
from ioprof.core.results import CellResult
from ioprof.core.stats import nearest_rank
from ioprof.core.thresholds import KERNEL_SPLIT_MIN_UNITS, MODERATELY_INPUT_BOUND_SHARE


def stalls_of(c: CellResult) -> WaitInFewStalls | None:
    """The stalls of a window whose data wait lies mostly in a few of its turns beyond the far fence
    of all its turns' waits (Q3 + 3 IQR, as slow samples are told): the fewest that hold half of it,
    longest first. A turn is one batch from each worker (one batch for the serial loader): W workers
    that make their batches together hand them over together, so the loop waits once a turn, for
    the turn's first batch — waits that long are the loader's pace, not stalls, and a turn's wait is
    the window's unit of observation, as its intervals' groups are. Only where the window is
    input-bound by its share and the stalls are few (at most a tenth of its turns: otherwise they
    are its pace, not stalls)."""
    waits = list(c.wait_s)
    per_turn = max(1, c.workers)
    turns = [sum(waits[i : i + per_turn]) for i in range(0, len(waits), per_turn)]
    total = sum(waits)
    if (
        len(turns) < KERNEL_SPLIT_MIN_UNITS
        or total <= 0
        or c.wait_share().value < MODERATELY_INPUT_BOUND_SHARE
    ):
        return None
    median, fence = far_fence(turns)
    stalls: list[float] = []
    held = 0.0
    for w in sorted(turns, reverse=True):
        if held >= 0.5 * total or w <= fence:
            break
        stalls.append(w)
        held += w
    if held < 0.5 * total or len(stalls) > len(turns) // 10:
        return None
    measured = total + sum(c.step_s)
    rest = sorted(w for w in turns if w < stalls[-1])
    return WaitInFewStalls(
        c.dataset,
        c.setting.label,
        len(stalls),
        len(turns),
        tuple(w for w in turns if w >= stalls[-1]),
        held / total,
        total / measured,
        (total - held) / (measured - held),
        nearest_rank(rest, 0.5) if rest else median,
        per_turn,
    )


def pace_limits(c: CellResult) -> bool | None:
    """Whether the loop waits for what its loader makes (``CellVerdict.waits_for_data``), unless
    its wait lies in stalls and without them it did not wait (False)."""
    waits = c.verdict.waits_for_data if c.verdict is not None else None
    stalls = stalls_of(c) if waits is not False else None
    if stalls is not None and stalls.wait_share_without < MODERATELY_INPUT_BOUND_SHARE:
        return False
    return waits
