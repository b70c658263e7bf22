"""The parts of a wait, from hand-built scheduler totals (pure logic)."""

from __future__ import annotations

import pytest

from ioprof.core.results import WaitSplit


def _split(**kw: tuple[float, ...]) -> WaitSplit:
    base = {"wait_s": (0.1,), "cpu_s": (0.0,), "runq_s": (0.0,), "others_cpu_s": (0.0,)}
    return WaitSplit(**{**base, **kw}, producer="worker", units=1)


def test_the_callers_wait_for_a_core_once_woken_is_waiting_for_a_core_not_the_source() -> None:
    # 100 ms: the training process unpickles for 10, waits for a core for 20 once the batch woke
    # it; the worker was on a CPU for 50 and runnable for 5; the 15 left it was off-CPU
    parts = _split(
        cpu_s=(0.04,), others_cpu_s=(0.01,), runq_s=(0.005,), receive_s=(0.01,), receive_runq_s=(0.02,)
    ).parts()
    got = {k: round(v[0], 6) for k, v in parts.items()}
    assert got == {"source": 0.015, "cpu": 0.05, "cores": 0.025, "receive": 0.01}


def test_the_parts_never_sum_past_the_wait_and_files_without_the_callers_delay_still_load() -> None:
    # totals read on a busy machine overshoot the wait (ticks): each part is capped by what is left
    parts = _split(cpu_s=(0.09,), runq_s=(0.05,), receive_s=(0.02,), receive_runq_s=(0.03,)).parts()
    assert sum(v[0] for v in parts.values()) == pytest.approx(0.1)
    assert parts["receive"][0] == pytest.approx(0.02) and parts["source"][0] == pytest.approx(0.0)
    assert parts["cores"][0] == pytest.approx(0.03)  # the caller's own delay first, then what fits
    # a result written before the caller's run-queue delay was read: that part is 0
    old = _split(cpu_s=(0.05,), receive_s=(0.01,)).parts()
    assert old["source"][0] == pytest.approx(0.04) and old["cores"][0] == 0.0
