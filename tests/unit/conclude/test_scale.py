"""``ioprof scale``'s conclusion from hand-built ranks, and the launcher's failure reasons."""

from __future__ import annotations

import builders
import pytest

from ioprof.conclude.scale import conclude
from ioprof.core.results import SCHEMA_VERSION
from ioprof.core.results_scale import RankCountResult, RankResult, ScaleResult
from ioprof.render.scale import headlines as headline
from ioprof.render.scale import render_scale_markdown
from ioprof.runners.torchrun import failure_reason


def _rank(
    rank: int, wait: float, cores: float = 0.2, fetched_bytes: int = 1_000_000, host: str = "h"
) -> RankResult:
    cell = builders.cell(workers=1, wait=wait, step=0.1, steps=20, jitter=0.002, fetched=fetched_bytes)
    # the simulated accelerator (80 img/s) computes a batch of 8 in 0.1 s: the whole step here
    return RankResult(
        rank,
        host,
        cell,
        cpu_s=cores * cell.elapsed_s,
        wall_s=cell.elapsed_s,
        host_cores=2,
        compute_s_per_step=0.1,
    )


def _count(
    ranks: int,
    wait: float,
    *,
    cores: float = 0.2,
    storage_img_per_s: float | None = None,
    fetched_bytes: int = 1_000_000,
    regime: str = "cold",
    waits: list[float] | None = None,
) -> RankCountResult:
    waits = waits or [wait] * ranks
    per = tuple(_rank(i, w, cores, fetched_bytes) for i, w in enumerate(waits))
    storage = builders.storage(ranks, storage_img_per_s) if storage_img_per_s else None
    return RankCountResult(ranks, regime, "ok", "", 5.0, per, storage)


def _result(*counts: RankCountResult) -> ScaleResult:
    return ScaleResult(
        SCHEMA_VERSION,
        "scale",
        builders.RUN,
        builders.MACHINE,
        {},
        builders.dataset_info(),
        "simulated 80 img/s",
        80.0,
        "gloo",
        1,
        0,
        counts,
    )


def test_the_stage_that_stops_the_next_rank_is_read_from_that_count() -> None:
    # every step of a cell moves 1 MB: a 2-s window per rank; 4 ranks fetch ~1.7 MB/s, the storage gave 20 files/s × 100 kB
    fetched = 4_000_000
    storage_bound = _result(
        _count(1, 0.0), _count(2, 0.001), _count(4, 0.05, fetched_bytes=fetched, storage_img_per_s=20)
    )
    rc = conclude(storage_bound).conclusion.regimes[0]
    assert rc.largest_busy == 2
    assert (rc.limit.stage, rc.limit.at_ranks, rc.limit.projected) == ("storage", 4, False)
    core_bound = _result(_count(1, 0.0), _count(2, 0.05, cores=0.9, storage_img_per_s=10_000))
    rc = conclude(core_bound).conclusion.regimes[0]
    assert (rc.largest_busy, rc.limit.stage) == (1, "cores")
    idle = _result(_count(1, 0.05, cores=0.3, storage_img_per_s=10_000))
    rc = conclude(idle).conclusion.regimes[0]
    assert (rc.largest_busy, rc.limit.stage, rc.limit.at_ranks) == (0, "workers", 1)
    assert "not even 1 rank" in headline(conclude(idle))[0]


def test_one_slow_rank_is_named_a_straggler() -> None:
    r = conclude(_result(_count(1, 0.0), _count(3, 0.0, waits=[0.0, 0.0, 0.06], storage_img_per_s=10_000)))
    rc = r.conclusion.regimes[0]
    assert rc.counts[1].stragglers == (2,)
    assert rc.limit.stage == "straggler"
    assert "rank(s) 2 straggled" in render_scale_markdown(r)


def _rotating(ranks: int, stall: float, steps: int = 30) -> RankCountResult:
    """Each step one rank in turn waits ``stall`` for its batch; DDP holds the others at the
    all-reduce that long. Compute is 0.1 s a step (batch 8 at the simulated 80 img/s)."""
    from dataclasses import replace

    per = []
    for r in range(ranks):
        waits = tuple(stall if k % ranks == r else 0.0 for k in range(steps))
        held = tuple(0.1 + (0.0 if k % ranks == r else stall) for k in range(steps))  # in the all-reduce
        c = replace(builders.cell(workers=1, steps=steps), wait_s=waits, step_s=held)
        elapsed = sum(waits) + sum(held)
        c = replace(c, elapsed_s=elapsed, img_per_s=c.images / elapsed, data_wait_share=sum(waits) / elapsed)
        per.append(
            RankResult(r, "h", c, cpu_s=0.2 * elapsed, wall_s=elapsed, host_cores=2, compute_s_per_step=0.1)
        )
    return RankCountResult(ranks, "cold", "ok", "", 5.0, tuple(per), builders.storage(ranks, 10_000))


def test_ranks_that_wait_for_each_other_are_not_busy() -> None:
    """A planted rotating straggler: each rank in turn waits 30 ms for a batch. Every rank's own data
    wait is under 8 %, so '1 − own wait' called each of them 92 % busy; the accelerators computed
    0.1 s of every 0.13 s: 77 %, as the scaling efficiency says."""
    r = conclude(_result(_count(1, 0.0, storage_img_per_s=10_000), _rotating(3, 0.03)))
    one, three = r.conclusion.regimes[0].counts
    assert one.status == "busy" and three.status == "starved"
    assert all(x.cell.data_wait_share < 0.08 for x in _rotating(3, 0.03).per_rank)
    assert three.busy_mean == pytest.approx(0.1 / 0.13, rel=0.01)
    assert three.efficiency is not None and three.busy_mean == pytest.approx(
        three.busy_from_efficiency, rel=0.02
    )
    limit = r.conclusion.regimes[0].limit
    assert (limit.stage, limit.at_ranks) == ("lockstep", 3)
    text = render_scale_markdown(r)
    assert "ranks waiting for each other" in text and "efficiency says" in text


def _loader_window(make_s: float, steps: int, workers: int = 2, ahead: int = 2) -> RankResult:
    """A rank's window over a loader simulated batch by batch: ``workers`` workers each making a
    batch of 8 in ``make_s`` s, in index order, ``ahead`` indices each outstanding; a step computes
    0.1 s. At the open every batch the workers may hold is ready, made before it (while the rank's
    first steps were slow); at the close, what they made but did not hand over is taken."""
    from dataclasses import replace

    depth = workers * ahead
    made = [-0.5 + 0.1 * i for i in range(depth)]  # all ready before the open
    free = [made[-1]] * workers  # each worker idle since
    waits, computes, t = [], [], 0.0
    for i in range(steps):
        ready = made[i]
        waits.append(max(0.0, ready - t))
        t = max(t, ready) + 0.1
        computes.append(0.1)
        w = (i + depth) % workers  # the freed slot's index goes to its worker, which makes it in turn
        start = max(t - 0.1, free[w])
        free[w] = start + make_s
        made.append(free[w])
    held = [m for m in made[steps:] if m <= t]
    c = replace(builders.cell(workers=workers, steps=steps), wait_s=tuple(waits), step_s=tuple(computes))
    c = replace(c, elapsed_s=t, img_per_s=c.images / t, data_wait_share=sum(waits) / t)
    return RankResult(0, "h", c, 0.2 * t, t, 2, compute_s_per_step=0.1, made_s=(*made[:steps], *held))


def test_batches_read_ahead_before_the_window_are_not_what_the_loader_made_in_it() -> None:
    """Two workers making 7 batches a second together for a step that takes 10: 70 % busy, however
    many batches they had ready when the window opened. Counting the 4 read ahead as the window's
    called it 77 % at 20 steps; where the workers outpace the step, the loop's own figure stands."""
    starved = _loader_window(make_s=2 / 7, steps=20)
    assert starved.cell.steps * 0.1 / starved.cell.elapsed_s > 0.76  # what the handed batches say
    assert starved.busy().value == pytest.approx(0.7, abs=0.01), starved.busy()
    assert starved.throughput().value == pytest.approx(0.7 * 80, rel=0.01)
    # and its wait share: the loop's own steps, at the rate the loader made (not its own 0.2)
    assert starved.cell.wait_share().value < 0.24
    assert starved.wait_share().value == pytest.approx(0.3, abs=0.01), starved.wait_share()
    fed = _loader_window(make_s=0.15, steps=20)
    assert fed.busy().value == pytest.approx(1.0, abs=0.01)
    assert fed.throughput().value == pytest.approx(fed.cell.throughput().value)  # its queue never drained
    no_record = RankResult(0, "h", starved.cell, 1.0, starved.cell.elapsed_s, 2, compute_s_per_step=0.1)
    assert no_record.busy().value > 0.76  # a file from before the makings were recorded: as it was


def test_a_host_wide_counter_is_taken_once_per_host_not_once_per_rank() -> None:
    from dataclasses import replace

    from ioprof.core.counts import Fetched

    count = _count(2, 0.0)
    host_wide = tuple(
        replace(r, cell=replace(r.cell, fetched=Fetched(3_000_000, "nfs-mountstats"))) for r in count.per_rank
    )
    assert replace(count, per_rank=host_wide).fetched_bytes() == 3_000_000  # not 6 MB
    two_hosts = (host_wide[0], replace(host_wide[1], host="other"))
    assert replace(count, per_rank=two_hosts).fetched_bytes() == 6_000_000
    assert count.fetched_bytes() == 2_000_000  # each rank's own reads still add up
    # and their intervals: each rank's own (from its window's segments) added, a host-wide one
    # taken once per host, as its bytes are; none where a rank's window was not cut
    assert count.fetched_bandwidth() is None

    def cut(r: RankResult, spread: float) -> RankResult:
        total = r.cell.fetched.bytes or 0
        rates = [1 + spread * (-1) ** i for i in range(6)]
        segments = tuple((r.cell.elapsed_s / 6, round(total / 6 * x)) for x in rates)
        return replace(r, cell=replace(r.cell, fetched_segments=segments))

    own = replace(count, per_rank=tuple(cut(r, 0.1) for r in count.per_rank))
    one, two = (r.cell.fetched_bandwidth() for r in own.per_rank)
    both = own.fetched_bandwidth()
    assert one is not None and two is not None and both is not None
    assert both.value == pytest.approx(own.fetched_mb_per_s())
    assert both.high - both.low == pytest.approx((one.high - one.low) + (two.high - two.low), rel=0.01)
    shared = replace(count, per_rank=(cut(host_wide[0], 0.1), cut(host_wide[1], 0.3)))
    single = shared.per_rank[0].cell.fetched_bandwidth()  # the host's count, as its first rank read it
    total = shared.fetched_bandwidth()
    assert (
        single is not None
        and total is not None
        and total.rel_half_width == pytest.approx(single.rel_half_width)
    )


def test_when_every_count_is_busy_the_next_is_projected_and_said_to_be() -> None:
    # 2 ranks use 0.5 cores each of 2: the cores feed 4 ranks, the storage (10 MB/s for ~1 MB/s) about 10
    r = conclude(
        _result(
            _count(1, 0.0, cores=0.5, storage_img_per_s=100), _count(2, 0.0, cores=0.5, storage_img_per_s=100)
        )
    )
    limit = r.conclusion.regimes[0].limit
    assert limit.projected and limit.stage == "cores" and limit.at_ranks == 5
    assert limit.ranks_by_cores == pytest.approx(4.0)
    assert limit.ranks_by_storage is not None and limit.ranks_by_storage > 4
    text = render_scale_markdown(r)
    assert "Projected, not measured" in text and "`--ranks 5`" in text


def test_a_straddling_count_is_borderline_not_blamed() -> None:
    r = conclude(_result(_count(1, 0.0), _count(2, 0.0, waits=[0.011, 0.011])))
    counts = r.conclusion.regimes[0].counts
    # wait 0.011 of 0.111 s ≈ 9.9 % with a spread: its interval straddles 10 %
    assert counts[1].status == "borderline"
    assert r.conclusion.regimes[0].limit.stage == "borderline"
    assert "borderline" in headline(r)[0]


def test_a_failed_count_keeps_its_reason_and_the_rest() -> None:
    failed = RankCountResult(2, "cold", "failed", "rank 1: killed by SIGKILL", 3.0, ())
    r = conclude(_result(_count(1, 0.0), failed))
    rc = r.conclusion.regimes[0]
    assert rc.largest_busy == 1 and rc.limit.stage == "failed"
    assert "rank 1: killed by SIGKILL" in headline(r)[0]
    assert "failed: rank 1: killed by SIGKILL" in render_scale_markdown(r)


def test_a_count_that_failed_beyond_a_borderline_one_is_said_in_the_headline() -> None:
    """The limit is the first count above the busy ones that is not busy: here a borderline count
    of 2, below the 3 that failed. The headline says the failure as well, not the table alone."""
    failed = RankCountResult(3, "cold", "failed", "rank 1: killed by SIGKILL", 3.0, ())
    r = conclude(_result(_count(1, 0.0), _count(2, 0.0, waits=[0.011, 0.011]), failed))
    assert r.conclusion.regimes[0].limit.stage == "borderline"
    (line,) = headline(r)
    assert "2 ranks are borderline" in line and "3 ranks failed (rank 1: killed by SIGKILL)." in line, line


def test_failure_reasons_come_from_the_rank_or_torchrun() -> None:
    summary = """Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 6637)  (SIGKILL)
  traceback : Signal 9 (SIGKILL) received by PID 6637"""
    assert failure_reason(summary, 1) == "rank 1: killed by SIGKILL"
    own = "noise\nioprof-rank-error: rank 0: StorageLost: /mnt/x: the storage is gone\n" + summary
    assert failure_reason(own, 1) == "rank 0: StorageLost: /mnt/x: the storage is gone"
    assert failure_reason("", None) == "did not finish in time"


def _wide_storage(concurrency: int) -> object:
    """A storage reading of 1 MB/s whose interval is wide (reads that came in fast and slow
    stretches): what it gives these readers is not known to better than about ± 25 %."""
    import dataclasses
    import itertools

    gaps = [0.07 if block % 2 else 0.13 for block in range(8) for _ in range(10)]
    done = tuple(itertools.accumulate(gaps))
    return dataclasses.replace(
        builders.storage(concurrency, 10.0, files=len(done)),
        completed_s=done,
        elapsed_s=done[-1],
        stopped_by="seconds",
    )


def test_no_straggler_is_blamed_while_the_storage_may_be_what_stopped_the_ranks() -> None:
    """Two ranks that fetched what the storage's own reading says it gives, one of them waiting
    longer (as ranks sharing a link do): with that reading too wide to tell whether they drew all
    of it, the count says the storage may have stopped it — not that a straggler did."""
    wide = _wide_storage(4)
    per = tuple(_rank(i, w, fetched_bytes=1_500_000) for i, w in enumerate([0.0, 0.06]))
    two = RankCountResult(2, "cold", "ok", "", 5.0, per, wide)  # type: ignore[arg-type]
    r = conclude(_result(_count(1, 0.0), two))
    (rc,) = r.conclusion.regimes
    v = rc.counts[1]
    band = wide.bandwidth()  # type: ignore[attr-defined]
    assert v.stragglers == (1,) and band.high > 1.15 * band.value, (v, band)
    assert v.storage_use is not None and v.storage_use < 0.85 <= (v.storage_use_point or 0.0), v
    assert rc.limit is not None and rc.limit.stage == "storage-undecided"
    text = render_scale_markdown(r)
    assert "at 2 ranks, the storage may have stopped it (its reading too wide to tell)" in text
    assert "a reading too wide to tell whether they drew all it gives" in text
    assert "stopped it: rank(s) 1 waited" not in text
    # the same count with a storage reading that closed: the storage is decided, or ruled out
    closed = RankCountResult(2, "cold", "ok", "", 5.0, per, builders.storage(4, 10.0))
    assert conclude(_result(_count(1, 0.0), closed)).conclusion.regimes[0].limit.stage == "storage"
