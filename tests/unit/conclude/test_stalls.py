"""A window whose data wait lies in a few long waits: said as stalls, with what it waits without
them — a Hugging Face streaming dataset whose library sleeps 5 s as its data runs out held 99 % of
its window's wait in two waits, and read "77 %" input-bound, while between them it waited 4 %."""

from __future__ import annotations

from dataclasses import replace

import pytest
from builders import cell, sweep_result

from ioprof.conclude.stalls import pace_limits
from ioprof.conclude.sweep import conclude
from ioprof.core.findings_run import WaitInFewStalls
from ioprof.core.results import SweepResult
from ioprof.render.findings import finding


def _concluded(waits: list[float], step: float = 0.065, workers: int = 1) -> SweepResult:
    c = cell(wait=0.0, step=step, steps=len(waits), workers=workers)
    elapsed = sum(waits) + step * len(waits)
    c = replace(c, wait_s=tuple(waits), elapsed_s=elapsed, data_wait_share=sum(waits) / elapsed)
    return conclude(replace(sweep_result((c,)), ceilings=()))


def _stalls(waits: list[float], step: float = 0.065, workers: int = 1) -> list[WaitInFewStalls]:
    result = _concluded(waits, step, workers)
    assert result.analysis is not None
    return [x for x in result.analysis.findings if isinstance(x, WaitInFewStalls)]


def test_two_long_waits_among_fifty_short_ones_are_stalls() -> None:
    waits = [0.001 + 0.0005 * (i % 3) for i in range(49)]
    waits[19], waits[47] = 4.95, 4.92
    (x,) = _stalls(waits)
    assert (x.stalls, x.waits, x.stall_s) == (2, 49, (4.95, 4.92)), x
    assert x.share_of_wait == pytest.approx(9.87 / sum(waits))
    own = sum(waits) - 9.87
    assert x.wait_share_without == pytest.approx(own / (own + 0.065 * 49))
    words = finding(x)
    assert "2 of its 49 waits — 5.0 s, 4.9 s — hold 99 % of its data wait" in words, words
    assert "between them the loader kept up" in words, words


def test_a_loader_slow_at_every_batch_has_no_stalls() -> None:
    """Waits that are the loader's pace — long at every batch, or long at many — are no stalls (broken
    once — every wait beyond the fence a stall — 5 of 50 were counted, the short ones among them)."""
    assert _stalls([0.05 + 0.01 * (i % 5) for i in range(50)]) == []
    many = [0.001] * 40 + [0.5] * 10  # a fifth of the waits: its pace, not a stall
    assert _stalls(many) == []
    # short waits beyond the fence that hold little of the wait are not named with the stalls
    waits = [0.001 + 0.0005 * (i % 3) for i in range(45)] + [0.009, 0.017, 0.012, 4.9, 4.95]
    (x,) = _stalls(waits)
    assert x.stall_s == (4.9, 4.95), x


def test_a_loop_that_waits_only_in_its_stalls_is_not_held_back_by_its_loaders_pace() -> None:
    """Its verdict is input-bound (77 % of its time waiting), but the findings that would name its
    loader's pace as what limits it — its one working worker, its cores — must not: without the
    stalls it waits under the first class's line (broken once — the verdict's class taken — the
    HF run's report said "This is what limits it: it waits for data made by 1 worker")."""
    waits = [0.001 + 0.0005 * (i % 3) for i in range(49)]
    waits[19], waits[47] = 4.95, 4.92
    (c,) = _concluded(waits).cells
    assert c.verdict is not None and c.verdict.waits_for_data and pace_limits(c) is False
    slow = _concluded([0.05 + 0.01 * (i % 5) for i in range(50)])
    assert pace_limits(slow.cells[0]) is True  # its pace: no stall, as its verdict says


# The PyTorch examples' ImageNet script (resnet18, batch 64, 8 workers) under `ioprof run` on an H200:
# its window's 100 waits on the GPU's clock, ms. Its 8 workers make their batches together, so the
# loop waits once a turn, for the turn's first batch; the rest come ready.
_H200_8_WORKERS_MS = (
    [24.5]
    + [0.0] * 10
    + [0.2]
    + [0.0] * 5
    + [71.5, 47.6, 0.4]
    + [0.0] * 5
    + [78.3]
    + [0.0] * 7
    + [82.6]
    + [0.0]
    + [89.5]
    + [0.0] * 2
    + [0.2]
    + [0.0] * 4
    + [137.6]
    + [0.0] * 7
    + [131.7]
    + [0.0] * 7
    + [139.6, 0.2]
    + [0.0] * 6
    + [94.4]
    + [0.0] * 6
    + [142.7]
    + [0.0] * 2
    + [0.3]
    + [0.0] * 4
    + [138.3]
    + [0.0] * 7
    + [137.2, 0.3]
    + [0.0] * 6
    + [139.2]
    + [0.0]
)


def test_a_loaders_wait_once_a_turn_of_its_workers_is_its_pace_not_stalls() -> None:
    """Eight workers that hand over their batches together make the loop wait once a turn: 6 of
    the 100 waits held 57 % of the wait, and the report called them stalls, "no batch's making"
    (broken once — each wait its own observation — the finding came back: 6 of its 100 waits)."""
    waits = [ms / 1000 for ms in _H200_8_WORKERS_MS]
    assert len(waits) == 100
    assert _stalls(waits, step=0.018, workers=8) == []


def test_a_stall_among_the_turns_of_many_workers_is_one_turn_and_said_so() -> None:
    """A pass's end (5 s: the workers started again) among twelve turns of eight workers, each
    turn's wait 0.14 s for its first batch: a stall, counted and told in turns."""
    turn = [0.14] + [0.0] * 7
    waits = turn * 6 + [5.0] + [0.0] * 7 + turn * 6
    (x,) = _stalls(waits, step=0.018, workers=8)
    assert (x.stalls, x.waits, x.stall_s, x.per_turn) == (1, 13, (5.0,), 8), x
    words = finding(x)
    assert "1 of its 13 turns (a batch from each of its 8 workers) — 5.0 s — hold" in words, words
    assert "its other turns waited 140 ms (median)" in words, words
