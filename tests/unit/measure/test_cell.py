"""A cell's look inside (its processes' memory and cores) covers its window whatever its warm-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from ioprof.commands.values import parse_compute
from ioprof.core.config import LoaderSetting, RunLength
from ioprof.datasets.dataset import load_datasets
from ioprof.host.telemetry import UnavailableSampler
from ioprof.measure.cell import CellPlan, Failures, run_cell
from ioprof.measure.compute import SimulatedStep
from ioprof.measure.inside import EVERY_S


def test_a_warm_up_longer_than_the_readings_reach_still_has_its_cores_read(small_set: Path) -> None:
    """Seen on an H100: batches of 256 made each cell's warm-up outlast the reach of the reading
    taken before it, and no cell had its cores read ("too short") in a 20 s window. Here a 2.5 s
    warm-up (simulated steps of 4 images at 40 img/s), then 1.2 s measured: the cores are read over
    the window, and a little before it (the reading that opened it), not 2.5 s before."""
    (ds,) = load_datasets(str(small_set), (), 0, seed=0, cache_dir=None, progress=print)
    warmup = 25
    assert warmup * 4 / 40 > EVERY_S  # longer than a reading reaches
    plan = CellPlan(
        dataset=ds,
        setting=LoaderSetting.multiprocess(2),
        run=RunLength(
            batch_size=4, warmup_steps=warmup, min_steps=12, max_steps=12, max_seconds=None, fixed=True
        ),
        crop_px=32,
        regime="warm",
    )
    cell = run_cell(
        plan, SimulatedStep(parse_compute("sim:40")), gpu=UnavailableSampler("test"), failures=Failures()
    )
    assert cell.inside is not None and cell.inside.cores is not None
    cores = cell.inside.cores
    # over the window, and the reading that opened it: it is taken just before the counters start
    # (three processes' memory: 0.19 s on the CI host once, its two cores busy with the workers);
    # without it, the one before the warm-up, 2.5 s back, would not count and none would
    assert cores.cpu_busy_cores is not None
    assert cell.elapsed_s <= cores.window_s <= cell.elapsed_s + 0.5, (cores.window_s, cell.elapsed_s)


def test_a_cold_cells_fetched_bytes_are_cut_into_segments_that_add_up_to_the_window(small_set: Path) -> None:
    """The fetch counters read again at step boundaries a quarter second apart: the segments span
    the window exactly, add up to the bytes fetched, each lasts at least 0.25 s (the last too), and
    the fetched MB/s's interval (from them) holds the figure. Steps of 0.1 s: a reading after
    every third, so that the 22nd ends 0.1 s after the last one — which is dropped, not left to
    make a 0.1 s segment of a batch's bytes."""
    from ioprof.host.fetched import FETCH_SEGMENT_S

    (ds,) = load_datasets(str(small_set), (), 0, seed=0, cache_dir=None, progress=print)
    plan = CellPlan(
        dataset=ds,
        setting=LoaderSetting.multiprocess(2),
        run=RunLength(batch_size=4, warmup_steps=2, min_steps=22, max_steps=22, max_seconds=None, fixed=True),
        crop_px=32,
        regime="cold",
    )
    cell = run_cell(
        plan, SimulatedStep(parse_compute("sim:40")), gpu=UnavailableSampler("test"), failures=Failures()
    )
    segments = cell.fetched_segments
    assert cell.fetched.known and cell.fetched.bytes and len(segments) >= 4, (cell.fetched, segments)
    assert sum(b for _, b in segments) == cell.fetched.bytes
    assert sum(s for s, _ in segments) == pytest.approx(cell.elapsed_s, abs=1e-9)
    assert all(s >= FETCH_SEGMENT_S for s, _ in segments)  # the last one too
    bw = cell.fetched_bandwidth()
    assert bw is not None and bw.known and bw.low < cell.fetched_mb_per_s() < bw.high  # type: ignore[operator]
