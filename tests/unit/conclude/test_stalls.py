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


def _concluded(waits: list[float], step: float = 0.065) -> SweepResult:
    c = cell(wait=0.0, step=step, steps=len(waits))
    elapsed = sum(waits) + step * len(waits)
    c = replace(c, wait_s=tuple(waits), elapsed_s=elapsed, data_wait_share=sum(waits) / elapsed)
    return conclude(replace(sweep_result((c,)), ceilings=()))


def _stalls(waits: list[float], step: float = 0.065) -> list[WaitInFewStalls]:
    result = _concluded(waits, step)
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
