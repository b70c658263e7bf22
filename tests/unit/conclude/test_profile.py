"""The epoch a profile predicts, and the layer table, from hand-built phases."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from ioprof.conclude.profile import predict
from ioprof.core.config import LoaderSetting
from ioprof.core.results_profile import PhaseTimes
from ioprof.datasets.dataset import load_datasets
from ioprof.runners.profile import measure


class _SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def, override]
        return x.clone()

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def, override]
        time.sleep(0.03)  # as max-pooling's backward once took 98 % of a backward pass
        return grad


class PlantedSlowBackward(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _SlowBackward.apply(x)


# a layer's time is read off the host's clock: beside another test, a preemption of a scheduler's
# slice lands on whichever layer runs, and a few on one layer can outweigh the planted sleep
@pytest.mark.rig
def test_a_planted_slow_layer_is_named_first_and_the_layers_add_up(small_set: Path, tmp_path: Path) -> None:
    (ds,) = load_datasets(str(small_set), (), 0, seed=0, cache_dir=None, progress=print)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(inplace=True),
        PlantedSlowBackward(),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )
    m = measure(
        model,
        ds,
        device=torch.device("cpu"),
        setting=LoaderSetting.multiprocess(1),
        batch_size=4,
        crop_px=32,
        steps=6,
        trace_path=tmp_path / "trace.json",
    )
    ranked = sorted(m.layers, key=lambda layer: layer.mean_s(), reverse=True)
    assert ranked[0].name == "2" and ranked[0].kind == "PlantedSlowBackward"
    n = len(m.hooked.backward_s)
    # a sleep is never shorter than asked; how much longer depends on the host's load at that
    # moment, so its upper bound is the backward phase it sits in, timed around the whole pass
    planted = sum(ranked[0].backward_s) / n
    assert 0.03 * 0.98 <= planted <= sum(m.hooked.backward_s) / n
    # every layer's forward and backward add up to the measured phases (the rest: loss, engine)
    layers = sum(layer.mean_s() for layer in m.layers)
    phases = (sum(m.hooked.forward_s) + sum(m.hooked.backward_s)) / n
    assert 0.85 * phases <= layers <= 1.0 * phases
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert trace["traceEvents"] and any(o.name == "_SlowBackwardBackward" for o in m.operators)


def test_the_epoch_prediction_is_the_step_means_times_the_steps() -> None:
    # 4 steps of 0.01 s waiting and 0.09 s computing (0.05 + 0.02 + 0.01 + 0.01 + 0.0)
    p = PhaseTimes((0.01,) * 4, (0.01,) * 4, (0.05,) * 4, (0.02,) * 4, (0.01,) * 4, (0.0,) * 4, (8,) * 4)
    e = predict(p, "cold", images=8000, batch=8, startup_s=0.5)
    assert e.steps == 1000 and e.input_s == pytest.approx(10.0) and e.compute_s == pytest.approx(90.0)
    assert e.total_s == pytest.approx(100.5)
