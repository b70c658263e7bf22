"""CUDA-event step timing on a real GPU (skipped without one)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ioprof.core.config import LoaderSetting, RunLength
from ioprof.datasets.dataset import Dataset, load_datasets
from ioprof.host.telemetry import UnavailableSampler
from ioprof.measure.cell import CellPlan, Failures, run_cell


def dataset(path: Path) -> Dataset:
    (ds,) = load_datasets(str(path), (), 0, seed=0, cache_dir=None, progress=print)
    return ds


@pytest.mark.gpu
def test_real_cuda_steps_are_enqueued_and_timed_by_events(small_set: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from ioprof.measure.compute import RealTrainStep

    step = RealTrainStep("resnet18", torch.device("cuda:0"), 1000, non_blocking=True, precision="bf16")
    plan = CellPlan(
        dataset=dataset(small_set),
        setting=LoaderSetting.multiprocess(2),
        run=RunLength(
            batch_size=16, warmup_steps=3, min_steps=10, max_steps=10, max_seconds=None, fixed=True
        ),
        crop_px=112,
        regime="warm",
        pin_memory=True,
    )
    cell = run_cell(plan, step, gpu=UnavailableSampler("test"), failures=Failures())
    assert cell.cuda is not None and cell.steps == 10
    t = cell.cuda
    assert all(c > 0 for c in t.compute_s) and all(c >= 0 for c in t.copy_s)
    parts = sum(t.idle_s) + sum(t.copy_s) + sum(t.compute_s)
    assert parts == pytest.approx(t.elapsed_s, rel=1e-3)
    assert cell.img_per_s == pytest.approx(cell.images / t.elapsed_s)  # the rate is on the GPU's clock
