"""The in-order hand-over replayed (``core.handover``): what a slow batch costs the loop, on
passes whose answer follows from the DataLoader's rules by hand."""

from __future__ import annotations

import math

import pytest

from ioprof.core.handover import PassBatch, SlowWait, far_fence, replay, replay_unordered, slow_wait


def _pass(
    n: int,
    workers: int,
    fetch: float,
    step: float,
    prefetch: int = 2,
    slow: dict[int, float] | None = None,
    lag: float = 0.0,
) -> list[PassBatch]:
    """A pass as a DataLoader with ``workers`` in order runs it, its loop taking ``step`` after each
    batch, every batch ``fetch`` s but batch k of ``slow`` ``slow[k]`` s more — made by the rules the
    replay states, so that its recorded times are the ones a real loader would show; an index sent
    at a hand-over reaches its worker ``lag`` s later (what no recorded time shows)."""
    slow = slow or {}
    ready: list[float] = []
    handed: list[float] = []
    out = []
    for k in range(n):
        begin = 0.0 if k < workers else ready[k - workers]
        if k >= prefetch * workers:
            begin = max(begin, handed[k - prefetch * workers] + lag)
        ready.append(begin + fetch + slow.get(k, 0.0))
        call = 0.0 if k == 0 else handed[k - 1] + step
        handed.append(max(ready[k], call))
        out.append(PassBatch(k % workers, begin, fetch + slow.get(k, 0.0), slow.get(k, 0.0), call, handed[k]))
    return out


def test_a_steady_pass_is_replayed_as_it_ran() -> None:
    """Two workers at 1 s a batch feed a loop stepping 0.1 s: their batches come in turns, both
    made at once, so the loop waits 0.8 s for one and nothing for the other — 0.4 s a batch, as
    the pass recorded."""
    batches = _pass(40, 2, 1.0, 0.1)
    waits = replay(batches, 2, 2)
    assert waits == pytest.approx([b.return_s - b.call_s for b in batches])
    assert waits[10:] == pytest.approx([0.8, 0.0] * 15)


def test_a_slow_batch_holds_back_the_loop_and_then_the_other_worker() -> None:
    """A loop that steps no time behind two workers: one batch 5 s late holds the loop 5 s,
    and the other worker, its two batches ahead made, waits with it — the whole 5 s is the loop's
    wait, none of it absorbed (broken once — the loop back at its recorded calls, not a step after
    the batch before — it failed)."""
    batches = _pass(40, 2, 1.0, 0.0, slow={6: 5.0})
    caused = sum(replay(batches, 2, 2)) - sum(replay(batches, 2, 2, without="excess"))
    assert caused == pytest.approx(5.0)


def test_the_prefetch_absorbs_what_the_loop_would_not_have_waited_for() -> None:
    """Two workers making a batch a second for a loop stepping 1 s: each worker is 2 s ahead (its
    two prefetched batches), so a batch 1 s late costs nothing and one 5 s late costs 5 − 3 s
    (it began 3 s before the loop wanted it). Broken once (no prefetch bound): it failed."""
    for late, cost in ((1.0, 0.0), (5.0, 2.0)):
        batches = _pass(40, 2, 1.0, 1.0, slow={20: late})
        caused = sum(replay(batches, 2, 2)) - sum(replay(batches, 2, 2, without="excess"))
        assert caused == pytest.approx(cost), late


def test_the_slow_samples_share_is_of_the_window_and_carries_the_replays_error() -> None:
    """Over the window (the pass's batches 10–39): the share of the loop's wait and time the slow
    batches cost, and a replay that misses the measured wait by 10 % widens both intervals."""
    batches = _pass(40, 2, 1.0, 0.1, slow={k: 2.0 for k in range(12, 40, 8)})
    window = [(0, k) for k in range(10, 40)]
    got = slow_wait([batches], window, 2, 2, fence_s=0.5, median_s=0.1, slow=4, samples=320)
    assert got is not None
    ran, without = replay(batches, 2, 2), replay(batches, 2, 2, without="excess")
    waited = sum(ran[10:])
    assert got.measured_wait_s == pytest.approx(waited) and got.replay_error == pytest.approx(0.0)
    assert got.wait.value == pytest.approx((waited - sum(without[10:])) / waited)
    assert got.wait.low <= got.wait.value <= got.wait.high
    steps = sum(batches[k + 1].call_s - batches[k].return_s for k in range(10, 39))
    assert got.loop.value == pytest.approx((waited - sum(without[10:])) / (waited + steps))
    # each batch's own costs are replayed: a hand-over 0.1 s slower for each batch of the window
    # is no error of the replay's (broken once — the mean costs for every batch — it was 0.9 %)
    late = [
        PassBatch(b.worker, b.start_s, b.fetch_s, b.excess_s, b.call_s, b.return_s + (0.0 if k < 10 else 0.1))
        for k, b in enumerate(batches)
    ]
    # (a later return is a later call too: the next batch is asked for a step after it)
    seen = slow_wait([late], window, 2, 2, fence_s=0.5, median_s=0.1, slow=4, samples=320)
    assert seen is not None and seen.replay_error == pytest.approx(0.0, abs=1e-12)


def test_what_the_run_could_not_show_is_the_replays_error_and_widens_the_shares() -> None:
    """Workers ahead of a loop stepping 0.8 s, held back by the prefetch bound, slow batches making
    the loop wait: where each index takes 0.2 s to reach its worker — a time no recorded batch
    shows — the replay gives 10 % less wait than the loop measured, and both shares' intervals are
    widened by it."""
    window = [(0, k) for k in range(10, 40)]
    kw = {"fence_s": 0.5, "median_s": 0.1, "slow": 4, "samples": 320}
    slow = {k: 4.0 for k in range(12, 40, 8)}
    prompt = slow_wait([_pass(40, 2, 1.0, 0.8, slow=slow)], window, 2, 2, **kw)  # type: ignore[arg-type]
    lagging = slow_wait([_pass(40, 2, 1.0, 0.8, slow=slow, lag=0.2)], window, 2, 2, **kw)  # type: ignore[arg-type]
    assert prompt is not None and lagging is not None and prompt.replay_error == pytest.approx(0.0, abs=1e-12)
    assert lagging.replay_error == pytest.approx(0.1)
    for got in (lagging.loop, lagging.wait):
        assert got.low <= got.value <= got.high
    assert lagging.loop.high - lagging.loop.low > 1.1 * (prompt.loop.high - prompt.loop.low)


def test_a_window_whose_batches_are_not_all_replayed_gets_no_figure() -> None:
    batches = _pass(20, 2, 1.0, 0.1)
    assert (
        slow_wait([batches], [(0, k) for k in range(10, 25)], 2, 2, fence_s=1, median_s=1, slow=0, samples=1)
        is None
    )


def test_the_far_fence_is_the_samples_own_spread() -> None:
    """Q3 + 3 IQR: 98 samples of 10–11 ms and two of 200 ms put the fence near 11 ms, beyond which
    only the two lie; a spread of 5–40 ms moves it to about 145 ms."""
    tight = [0.010 + 0.001 * (i % 10) / 10 for i in range(98)] + [0.2, 0.2]
    median, fence = far_fence(tight)
    assert median == pytest.approx(0.0105, abs=5e-4) and 0.011 < fence < 0.02
    assert sum(t > fence for t in tight) == 2
    wide = [0.005 + 0.035 * i / 99 for i in range(100)]
    assert far_fence(wide)[1] == pytest.approx(0.03125 + 3 * 0.0175, rel=0.05)


def test_handed_over_as_they_are_made_a_slow_batch_costs_the_loop_only_its_workers_share() -> None:
    """``in_order=False`` replayed: on a steady pass it waits as the in-order loader does; behind
    one batch 5 s late the other worker goes on (it has room for indices, the late one has not),
    so the loop loses that worker's 5 s of work shared by two — about 2.5 s plus a batch's edge —
    where in order it loses all 5 (broken once — every batch handed over in order — it failed)."""
    steady = _pass(40, 2, 1.0, 0.0)
    late = _pass(40, 2, 1.0, 0.0, slow={6: 5.0})
    assert replay_unordered(steady, 2, 2) == pytest.approx(replay(steady, 2, 2))
    caused = sum(replay_unordered(late, 2, 2)) - sum(replay_unordered(steady, 2, 2))
    assert 2.5 <= caused <= 3.5
    stepping = _pass(40, 2, 1.0, 0.1)
    assert sum(replay_unordered(stepping, 2, 2)) == pytest.approx(sum(replay(stepping, 2, 2)))


def _on_cpu(batches: list[PassBatch], share: float) -> list[PassBatch]:
    """The same pass, ``share`` of each slow batch's excess its samples' own work on a CPU."""
    return [
        PassBatch(b.worker, b.start_s, b.fetch_s, b.excess_s, b.call_s, b.return_s, share * b.excess_s)
        for b in batches
    ]


def test_what_slow_samples_cost_by_themselves_is_their_work_and_what_the_storage_could_give() -> None:
    """The same slow batches, their excess spent off a CPU (a wait, for bytes or not) or on one
    (their own decode). On a CPU it is theirs whatever the storage did. Off one it is theirs where
    nothing was read from a storage (headroom ∞), up to what a storage at its ceiling would have
    saved the loop where it was measured (a storage at its limit: nothing), and where that is
    unknown only the high end may be it all. Broken once (the whole excess theirs whatever the
    headroom): it failed."""
    batches = _pass(40, 2, 1.0, 0.1, slow={k: 2.0 for k in range(12, 40, 8)})
    window = [(0, k) for k in range(10, 40)]

    def wait(share: float) -> SlowWait:
        got = slow_wait(
            [_on_cpu(batches, share)], window, 2, 2, fence_s=0.5, median_s=0.1, slow=4, samples=320
        )
        assert got is not None and got.on_cpu is not None
        return got

    off, on = wait(0.0), wait(1.0)
    assert off.loop.value > 0.1 and on.on_cpu.value == pytest.approx(on.loop.value)
    assert off.own(math.inf) == (off.loop, off.wait)
    for headroom in (None, 0.0, 0.5):
        assert on.own(headroom)[0].value == pytest.approx(on.loop.value)  # their own work: theirs
    loop, wait_share = off.own(0.0)  # a storage at its limit: the wait moves, it does not leave
    assert loop.value == pytest.approx(0.0, abs=1e-9) and loop.high == pytest.approx(0.0, abs=1e-9)
    assert wait_share.value == pytest.approx(0.0, abs=1e-9)
    capped, _ = off.own(off.loop.value / 2)
    assert capped.value == pytest.approx(off.loop.value / 2) and capped.high <= off.loop.value / 2 + 1e-9
    unknown, _ = off.own(None)
    assert unknown.value == pytest.approx(0.0, abs=1e-9) and unknown.high == pytest.approx(off.loop.high)
    # the share of the wait is the same saving over the replayed wait
    assert off.own(math.inf)[1].value == pytest.approx(off.wait.value)
    # rows that did not tell the time on a CPU apart: nothing is surely theirs where the headroom
    # is unknown, and the headroom bounds it where it is known
    untold = slow_wait([batches], window, 2, 2, fence_s=0.5, median_s=0.1, slow=4, samples=320)
    assert untold is not None and untold.on_cpu is None and untold.own(None)[0].low == 0.0
    assert untold.own(0.2)[0].high == pytest.approx(0.2)
