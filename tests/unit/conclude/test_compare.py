"""``ioprof compare``'s conclusion on hand-built runs, and ``ioprof.load`` into pandas."""

from __future__ import annotations

import os

import builders
import paths
import pytest
from builders import cell, sweep_result

from ioprof.conclude.compare import compare, compare_cells, match

REPO = paths.REPO


ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_cells_are_matched_exactly_then_by_loader_in_worker_order() -> None:
    a = [cell("serial", 0), cell("multiprocess", 1)]
    b = [cell("serial", 0), cell("multiprocess", 2)]
    pairs, unmatched = match(a, b)
    assert [(x.setting.label, y.setting.label) for x, y in pairs] == [
        ("serial (in-process)", "serial (in-process)"),
        ("1 worker", "2 workers"),
    ]
    assert unmatched == []


def test_a_change_counts_only_beyond_both_intervals_and_the_minimum_effect() -> None:
    slow = cell(wait=0.05, step=0.05, jitter=0.002, steps=30)
    fast = cell(wait=0.0, step=0.05, jitter=0.0, steps=30)
    assert compare_cells(slow, fast).change == "faster" and compare_cells(fast, slow).change == "slower"
    nearly = cell(wait=0.048, step=0.05, jitter=0.002, steps=30)  # 2 % apart: not a change
    assert compare_cells(slow, nearly).change == "within-noise"
    c = compare([("a", sweep_result((slow,))), ("b", sweep_result((fast,)))])
    (run,) = c.runs
    assert run.settings == () and run.cells[0].ratio == pytest.approx(2.0, rel=0.02)


def test_a_run_loads_into_pandas_with_units_in_the_column_names() -> None:
    import ioprof

    run = ioprof.load(REPO / "reports" / "examples" / "cpu-2core-sim-h100")
    assert run.kind == "sweep" and run.verdict.startswith("Verdict: highly input-bound")
    cells = run.cells
    assert len(cells) == 12 and {
        *"img_per_s img_per_s_low img_per_s_high data_wait_share fetched_mb_per_s".split(),
    } <= set(cells.columns)
    assert (cells["img_per_s_low"] <= cells["img_per_s"]).all() and (
        cells["img_per_s"] <= cells["img_per_s_high"]
    ).all()
    ceilings = run.ceilings
    assert set(ceilings["stage"]) == {"compute", "decode", "storage"}
    # results.csv is the same frame
    csv = (REPO / "reports" / "examples" / "cpu-2core-sim-h100" / "results.csv").read_text().splitlines()
    assert csv[0] == ",".join(cells.columns)


def test_schema_1_results_load_into_pandas_through_the_migration() -> None:
    import ioprof

    run = ioprof.load(paths.DATA / "schema1_results.json")
    assert len(run.cells) == 4 and run.cells["fetched_method"].eq("block-io").all()


def test_only_declared_repeats_raise_the_noise_floor() -> None:
    from dataclasses import replace

    ref = sweep_result((cell(wait=0.05, step=0.05, jitter=0.002, steps=30),))
    repeat = replace(ref, cells=(cell(wait=0.035, step=0.05, jitter=0.002, steps=30),))  # 18 % faster
    changed = replace(
        ref,
        config={**ref.config, "workers": [2]},
        cells=(cell(wait=0.03, step=0.05, jitter=0.002, steps=30),),
    )
    c = compare([("a", ref), ("two", changed)], repeats=[("again", repeat)])
    assert c.repeats == 1 and c.min_effect == pytest.approx(0.1 / 0.085 - 1, rel=0.01)
    # 25 % faster than the reference, but the repeat alone moved 18 %: still beyond that floor
    assert c.runs[0].cells[0].change == "faster" and c.outcome == "same"
    # a run with the same options is not a repeat unless declared: it is compared, and it is faster
    c = compare([("a", ref), ("again", repeat), ("two", changed)])
    assert c.repeats == 0 and c.min_effect == 0.10
    assert [r.cells[0].change for r in c.runs] == ["faster", "faster"]


def test_slower_beyond_the_noise_and_inconclusive_are_outcomes() -> None:
    from dataclasses import replace

    ref = sweep_result((cell(wait=0.0, step=0.05, jitter=0.002, steps=30),))
    slower = replace(ref, cells=(cell(wait=0.05, step=0.05, jitter=0.002, steps=30),))
    assert compare([("a", ref), ("b", slower)]).outcome == "slower"
    assert compare([("a", ref), ("b", ref)]).outcome == "same"
    nothing = replace(ref, cells=(cell(wait=0.0, step=0.05, jitter=0.002, steps=1),))  # no interval
    assert compare([("a", ref), ("b", nothing)]).outcome == "inconclusive"


def test_a_cell_wholly_above_a_slow_one_whose_interval_reaches_zero_is_faster() -> None:
    """A slow cell of few batches may have an interval down to 0 (no lower end to speak of): a
    cell wholly above its upper end is still decided faster — not 'within the noise'."""
    from unittest import mock

    from ioprof.core.stats import Interval

    slow, fast = cell(step=0.1, steps=6), cell(step=0.01, steps=30)
    with mock.patch.object(type(slow), "throughput", autospec=True) as tp:
        tp.side_effect = lambda c: (
            Interval(37.0, 0.0, 41.0, 3) if c is slow else Interval(312.0, 279.0, 345.0, 30)
        )
        got = compare_cells(slow, fast)
    assert got.change == "faster" and got.ratio_low is None


def test_a_window_that_drained_a_read_ahead_queue_is_compared_by_what_its_workers_made() -> None:
    """A loop whose first steps took batches its workers read ahead before the window took 123 img/s
    where they made 100: against the same pipeline measured without that queue, the loop's own
    figure said 23 % faster and waiting less. The report shows what the workers made (``rates``),
    and so do the comparison, the notebook's frame and results.json beside its interval."""
    from ioprof.core import resultfile
    from ioprof.render.frames import cells_frame

    drained = builders.drained_cell()
    steady = cell(workers=4, wait=0.03, step=0.05, steps=40, jitter=0.002)
    assert drained.img_per_s > 1.2 * steady.img_per_s and drained.rates().method == "drained"
    c = compare_cells(steady, drained)
    assert c.ratio == pytest.approx(1.0, abs=0.02) and c.change == "within-noise"
    assert c.wait_share_b == pytest.approx(c.wait_share_a, abs=0.02)
    (row,) = cells_frame(sweep_result((drained,))).to_dict("records")
    assert row["img_per_s_low"] <= row["img_per_s"] <= row["img_per_s_high"]
    assert row["data_wait_share_low"] <= row["data_wait_share"] <= row["data_wait_share_high"]
    (written,) = resultfile.to_jsonable(sweep_result((drained,)))["cells"]
    assert written["rate_from"] == "drained"
    assert written["img_per_s_low"] <= written["delivered_img_per_s"] <= written["img_per_s_high"]
