"""CUDA-event step timing: the pure resolution, and run_cell's use of it with a fake asynchronous GPU."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from ioprof.core.config import LoaderSetting, RunLength
from ioprof.core.results import CellResult
from ioprof.datasets.dataset import Dataset, load_datasets
from ioprof.host.telemetry import UnavailableSampler
from ioprof.measure.cell import CellPlan, Failures, run_cell
from ioprof.measure.steptiming import StepEvents, resolve


class Ev:
    """An event that completed at ``t_ms`` on the GPU's clock."""

    def __init__(self, t_ms: float) -> None:
        self.t_ms = t_ms

    def elapsed_time(self, end_event: Ev) -> float:
        return end_event.t_ms - self.t_ms


def steps_at(*spans: tuple[float, float, float]) -> list[StepEvents]:
    return [StepEvents(Ev(a), Ev(b), Ev(c)) for a, b, c in spans]


def test_gpu_busy_back_to_back_has_no_stall_even_when_the_host_waited() -> None:
    # the host waited 30 ms per batch, but the GPU still had queued work: no idle, no stall
    t = resolve(Ev(0), steps_at((0, 1, 50), (50, 51, 100), (100, 101, 150)), [0.03, 0.03, 0.03])
    assert t.idle_s == (0.0, 0.0, 0.0)
    assert t.data_stall_s == (0.0, 0.0, 0.0)
    assert t.copy_s == pytest.approx((0.001,) * 3)
    assert t.compute_s == pytest.approx((0.049,) * 3)
    assert t.elapsed_s == pytest.approx(0.150)


def test_idle_gap_is_data_stall_only_while_the_host_waited_for_data() -> None:
    # gaps of 20 ms before each step; the host waited 30, 5 and 0 ms for those batches
    t = resolve(Ev(0), steps_at((20, 21, 40), (60, 61, 80), (100, 101, 120)), [0.030, 0.005, 0.0])
    assert t.idle_s == pytest.approx((0.020, 0.020, 0.020))
    assert t.data_stall_s == pytest.approx((0.020, 0.005, 0.0))
    means = t.mean_s()
    assert means["data_stall"] == pytest.approx(0.025 / 3)
    assert means["host_overhead"] == pytest.approx(0.035 / 3)
    parts = sum(t.idle_s) + sum(t.copy_s) + sum(t.compute_s)
    assert parts == pytest.approx(t.elapsed_s)  # the parts tile the GPU's timeline


def test_mismatched_waits_are_refused() -> None:
    with pytest.raises(ValueError, match="2 steps' events but 1 host waits"):
        resolve(Ev(0), steps_at((0, 1, 2), (2, 3, 4)), [0.0])


class QueuedGpu:
    """A training step that, like CUDA, only enqueues: a step takes ``compute_s`` on the "GPU"
    once the GPU is free, and the host returns at once."""

    simulated = False
    label = "fake queued GPU"

    def __init__(self, compute_s: float) -> None:
        self.compute_s = compute_s
        self.free_at = time.perf_counter()

    def _now_ms(self) -> float:
        return max(time.perf_counter(), self.free_at) * 1e3

    def mark(self) -> Ev:
        return Ev(self._now_ms())  # completes when the work before it has

    def drain(self) -> None:
        time.sleep(max(0.0, self.free_at - time.perf_counter()))

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> StepEvents:
        start = self._now_ms()
        self.free_at = start / 1e3 + self.compute_s
        return StepEvents(Ev(start), Ev(start), Ev(self.free_at * 1e3))


def dataset(path: Path) -> Dataset:
    (ds,) = load_datasets(str(path), (), 0, seed=0, cache_dir=None, progress=print)
    return ds


def _cell(data: Path, gpu: QueuedGpu, workers: int, steps: int = 12) -> CellResult:
    plan = CellPlan(
        dataset=dataset(data),
        setting=LoaderSetting.multiprocess(workers),
        run=RunLength(
            batch_size=4, warmup_steps=2, min_steps=steps, max_steps=steps, max_seconds=None, fixed=True
        ),
        crop_px=32,
        regime="warm",
    )
    return run_cell(plan, gpu, gpu=UnavailableSampler("test"), failures=Failures())


def test_host_waits_that_overlap_gpu_work_are_not_counted_as_data_stall(small_set: Path) -> None:
    # each step keeps the "GPU" busy 150 ms; one worker decodes a batch of 4 small images far faster,
    # and the host, which only enqueues, waits for every batch while the GPU still works
    cell = _cell(small_set, QueuedGpu(0.150), workers=1)
    assert cell.cuda is not None
    host_wait = sum(cell.cuda.host_wait_s)
    assert host_wait > 0.02  # the host did wait for its batches…
    assert cell.data_wait_share < 0.05  # …but the GPU never starved: that wait is no stall
    assert sum(cell.wait_s) < 0.2 * host_wait  # the cell's waits are the GPU's stalls, not the host's waits
    assert cell.img_per_s == pytest.approx(4 / 0.150, rel=0.15)


def test_a_starved_gpu_shows_the_stall(large_set: Path) -> None:
    # 1 ms of "GPU" per step against one worker decoding 4 images of 1024x768: the GPU waits
    cell = _cell(large_set, QueuedGpu(0.001), workers=1, steps=6)
    assert cell.cuda is not None
    assert cell.data_wait_share > 0.8
    assert sum(cell.wait_s) == pytest.approx(sum(cell.cuda.data_stall_s))


def test_compute_ceiling_of_an_asynchronous_step_is_timed_on_the_gpu_clock() -> None:
    from ioprof.commands.values import parse_compute
    from ioprof.measure.compute import probe_compute

    # the host enqueues in microseconds; the "GPU" takes 20 ms a step: 8 images / 20 ms = 400 img/s
    c = probe_compute(
        QueuedGpu(0.020),
        parse_compute("real"),
        "fake",
        torch.device("cpu"),
        batch_size=8,
        crop_px=8,
        warmup_steps=1,
    )
    assert c.img_per_s == pytest.approx(400, rel=0.1)
    # a fixed count when steps are only enqueued (the first's idle start, 28 µs here, can leave a
    # few of them out as start-up: MSER-5 over a tail steady to the clock's rounding)
    assert len(c.step_s) + c.startup_steps == 50 and c.startup_steps <= 25


class _WindowSampler:
    """A GPU sampler that records how many steps the training step had taken at start and stop."""

    def __init__(self, step: QueuedGpu) -> None:
        self.step = step
        self.calls: list[tuple[str, int]] = []

    def start(self) -> None:
        self.calls.append(("start", self.step.steps))

    def stop(self):  # type: ignore[no-untyped-def]
        from ioprof.core.gpu import GpuTelemetry

        self.calls.append(("stop", self.step.steps))
        return GpuTelemetry(available=False, reason="test")


class CountingGpu(QueuedGpu):
    def __init__(self, compute_s: float) -> None:
        super().__init__(compute_s)
        self.steps = 0

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> StepEvents:
        self.steps += 1
        return super().__call__(images, labels)


def test_gpu_telemetry_covers_the_measured_window_only(small_set: Path) -> None:
    """Not the workers' start-up nor the warm-up steps: the sampler starts after them."""
    gpu = CountingGpu(0.005)
    sampler = _WindowSampler(gpu)
    plan = CellPlan(
        dataset=dataset(small_set),
        setting=LoaderSetting.multiprocess(2),
        run=RunLength(batch_size=4, warmup_steps=3, min_steps=6, max_steps=6, max_seconds=None, fixed=True),
        crop_px=32,
        regime="warm",
    )
    run_cell(plan, gpu, gpu=sampler, failures=Failures())
    # warm-up: one batch per worker drained untrained (their start-up burst), then 3 trained steps
    assert sampler.calls == [("start", 3), ("stop", 3 + 6)]
