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
    the window."""
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
    assert cores.cpu_busy_cores is not None and cores.window_s == pytest.approx(cell.elapsed_s, rel=0.15)
