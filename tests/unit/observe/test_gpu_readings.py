"""The NVML readings of a window `run` measured: only those taken in its measured stretches.

A window can pause (evaluation, a checkpoint between batches: left out) and can be left partial
(the pass ends before it fills); the sampler, started when the window opens, runs on through both
until it is stopped. On a GPU that left a short run's window holding the readings of its
evaluation and of the probe's pause: the GPU looked idle in a loop that was not. No GPU here:
a sampler of NVML's shape, reading a clock."""

from __future__ import annotations

import time
from typing import ClassVar

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import ioprof
from ioprof.host.telemetry import GpuSample, ThreadSampler
from ioprof.observe.observer import Watcher

STEP_S = 0.02


class _Driver:
    """The driver's buffer: a sample every 0.05 s, stamped on the wall clock as NVML stamps them."""

    def start(self) -> None:
        self.last = time.time()

    def read(self) -> list[tuple[float, float]]:
        now = time.time()
        out = []
        while self.last + 0.05 <= now:
            self.last += 0.05
            out.append((self.last, 50.0))
        return out


class _Sampler(ThreadSampler):
    """Readings every 0.01 s; remembers when it started on the test's own clock."""

    started: ClassVar[list[float]] = []

    def __init__(self) -> None:
        super().__init__(
            lambda t: GpuSample(t, 50, 0, 0, 0, 0), "Fake GPU", interval_s=0.01, driver=_Driver()
        )

    def start(self) -> None:
        _Sampler.started.append(time.perf_counter())
        super().start()


def test_readings_from_a_pause_and_after_a_partial_window_are_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Watcher, "gpu_sampler", lambda self: _Sampler())
    _Sampler.started.clear()
    loader = DataLoader(TensorDataset(torch.zeros(60, 4)), batch_size=2)  # 30 batches: one pass
    pause = after = (0.0, 0.0)
    with ioprof.watch(steps=100, seconds=None, probe=False) as w:  # more than the pass holds
        for n, _ in enumerate(loader):
            time.sleep(STEP_S)
            if n == 18:  # evaluation between two batches
                t = time.perf_counter()
                time.sleep(1.0)
                pause = (t, time.perf_counter())
        t = time.perf_counter()
        time.sleep(1.0)  # the script runs on: the window, partial, is no longer measured
        after = (t, time.perf_counter())
    r = w.result()
    (cell,) = r.cells
    (lo,) = r.loaders
    assert lo.window == "partial" and lo.gaps_left_out == 1, (lo.window, lo.gaps_left_out)
    g = cell.gpu
    assert g.available and _Sampler.started, g.reason
    t0 = _Sampler.started[0]
    taken = [t0 + t for t in g.t_s] + [t0 + t for t in g.driver_t_s]
    assert g.driver_t_s and len(g.driver_t_s) == len(g.driver_util_pct)
    for a, b in (pause, after):
        inside = [t for t in taken if a + 0.005 < t < b - 0.005]
        assert not inside, (len(inside), a, b)
    # what is kept is the window's own time: about one reading each 0.01 s of it
    measured = sum(cell.wait_s) + sum(cell.step_s)
    assert len(g.t_s) <= measured / 0.01 + 5, (len(g.t_s), measured)


def test_a_window_that_goes_on_into_later_passes_keeps_their_readings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`run` saves what it observed at each pass's end; the window goes on in the next pass. On a
    GPU the save stopped the sampler: a 100-batch window over three passes kept the readings of
    its first 29 batches alone."""
    monkeypatch.setattr(Watcher, "gpu_sampler", lambda self: _Sampler())
    _Sampler.started.clear()
    loader = DataLoader(TensorDataset(torch.zeros(40, 4)), batch_size=2)  # 20 batches a pass
    passes = []
    with ioprof.watch(steps=45, seconds=None, probe=False) as w:  # the window: three passes
        for _ in range(3):
            t = time.perf_counter()
            for _ in loader:
                time.sleep(STEP_S)
            passes.append((t, time.perf_counter()))
            w.watcher.observation()  # saved at the pass's end, as `run` does
            time.sleep(0.3)  # evaluation between passes
    r = w.result()
    (cell,) = r.cells
    g = cell.gpu
    assert len(cell.step_s) >= 40 and g.available, (len(cell.step_s), g.reason)
    t0 = _Sampler.started[0]
    taken = [t0 + t for t in g.t_s]
    for a, b in passes[1:]:  # each later pass's stretch has its readings
        assert sum(a < t < b for t in taken) >= (b - a) / 0.01 / 3, (a, b, len(taken))
    measured = sum(cell.wait_s) + sum(cell.step_s)
    assert measured / 0.01 / 2 <= len(g.t_s) <= measured / 0.01 + 5, (len(g.t_s), measured)
