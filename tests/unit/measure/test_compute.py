"""The training step, real or simulated, and the compute ceiling."""

from __future__ import annotations

import pytest
import torch

from ioprof.commands.values import parse_compute
from ioprof.core.errors import IoprofError
from ioprof.core.results import ComputeCeiling
from ioprof.measure.compute import RealTrainStep, SimulatedStep, build_model, probe_compute, resolve_device


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def test_simulated_step_waits_batch_over_rate_exactly() -> None:
    clock = FakeClock()
    step = SimulatedStep(parse_compute("sim:400"), clock=clock, sleep=clock.sleep)
    before = clock.now
    step(torch.zeros(8, 3, 4, 4), torch.zeros(8))
    assert clock.now - before == pytest.approx(8 / 400)
    ceiling = probe_compute(
        step,
        parse_compute("sim:400"),
        "x",
        torch.device("cpu"),
        batch_size=8,
        crop_px=4,
        warmup_steps=1,
        clock=clock,
    )
    assert ceiling.img_per_s == pytest.approx(400.0)
    assert ceiling.simulated and ceiling.model == "simulated"


def test_simulated_compute_holds_its_rate_within_5_percent() -> None:
    spec = parse_compute("sim:400")
    ceiling = probe_compute(
        SimulatedStep(spec),
        spec,
        "x",
        torch.device("cpu"),
        batch_size=8,
        crop_px=8,
        warmup_steps=1,
        min_steps=20,
    )
    assert ceiling.img_per_s == pytest.approx(400.0, rel=0.05)


def test_real_step_trains() -> None:
    torch.manual_seed(0)
    step = RealTrainStep("tiny", torch.device("cpu"), 1000, non_blocking=False)
    before = [p.detach().clone() for p in step.model.parameters()]
    step(torch.randn(4, 3, 32, 32), torch.randint(0, 1000, (4,)))
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))


def test_models() -> None:
    assert sum(p.numel() for p in build_model("resnet50", 1000).parameters()) == 25_557_032
    with pytest.raises(IoprofError, match="--model"):
        build_model("vgg", 10)


def test_device_resolution() -> None:
    dev, reason = resolve_device("cpu")
    assert dev.type == "cpu" and reason == "--device cpu"
    dev, reason = resolve_device("auto")
    assert dev.type == ("cuda" if torch.cuda.is_available() else "cpu") and "--device auto" in reason
    if not torch.cuda.is_available():
        with pytest.raises(IoprofError, match="no CUDA device"):
            resolve_device("cuda")


def test_simulated_step_learns_to_cancel_a_late_wakeup() -> None:
    class LateClock(FakeClock):
        """Punctual while the step calibrates; every wake-up 100 µs late afterwards, so only
        learning while running (not the calibration) can hold the rate."""

        def __init__(self) -> None:
            super().__init__()
            self.punctual = 20  # the calibration's sleeps

        def sleep(self, s: float) -> None:
            late = 0.0 if self.punctual > 0 else 0.0001
            self.punctual -= 1
            super().sleep(s + late)

    clock = LateClock()
    spec = parse_compute("sim:2800")
    step = SimulatedStep(spec, clock=clock, sleep=clock.sleep)
    assert step._overshoot_s == pytest.approx(0.0, abs=1e-9)  # calibrated on punctual sleeps
    ceiling = probe_compute(
        step,
        spec,
        "x",
        torch.device("cpu"),
        batch_size=8,
        crop_px=4,
        warmup_steps=30,
        min_steps=100,
        clock=clock,
    )
    assert ceiling.img_per_s == pytest.approx(2800.0, rel=0.005)  # without learning: 2800 → 2712


def test_bf16_channels_last_trains_on_cpu() -> None:
    torch.manual_seed(0)
    step = RealTrainStep("tiny", torch.device("cpu"), 1000, False, precision="bf16", channels_last=True)
    before = [p.detach().clone() for p in step.model.parameters()]
    step(torch.randn(4, 3, 32, 32), torch.randint(0, 1000, (4,)))
    assert any(not torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    assert step.label == "real tiny on cpu, bf16, channels-last"


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_cuda_only_precisions_are_refused_on_cpu(precision: str) -> None:
    with pytest.raises(IoprofError, match=f"--precision {precision} needs a CUDA device"):
        RealTrainStep("tiny", torch.device("cpu"), 1000, False, precision=precision)


class _OomAbove:
    """A step that runs out of device memory above ``limit`` images (the search's logic only)."""

    simulated = False
    label = "fake"

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def mark(self) -> None:
        return None

    def drain(self) -> None:
        return None

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        if images.shape[0] > self.limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_out_of_memory_names_a_batch_size_that_fits() -> None:
    from ioprof.measure.compute import largest_fitting_batch

    assert largest_fitting_batch(_OomAbove(24), 100, 8, torch.device("cpu")) == 12
    assert largest_fitting_batch(_OomAbove(0), 100, 8, torch.device("cpu")) is None
    with pytest.raises(IoprofError, match=r"--batch-size 100: CUDA out of memory .* use --batch-size 12"):
        probe_compute(
            _OomAbove(24),
            parse_compute("real"),
            "x",
            torch.device("cpu"),
            batch_size=100,
            crop_px=8,
            warmup_steps=1,
        )


def test_a_cpu_ceiling_takes_the_serial_cells_steps_over_the_sweep_and_gives_them_back() -> None:
    """On the CPU a serial cell's step is the ceiling's step alone, read later: its steps join the
    ceiling's in the order they ran. A multiprocess cell's (its workers share the cores), a failed
    cell's and a partial batch's do not; pooled again, or kept in results.json, it is the same; a
    resumed sweep starts from the ceiling's own steps; a GPU's or a simulated ceiling is as measured."""
    from dataclasses import replace

    from builders import cell, compute

    from ioprof.core.resultfile import from_jsonable, to_jsonable
    from ioprof.runners.sweep import over_the_sweep

    ceiling = compute(40.0, simulated=False)  # batch 8: 3 steps of 0.2 s
    slower = cell("serial", step=0.4, steps=5)  # the host slowed down: 20 img/s
    partial = replace(cell("serial", step=0.4, steps=2), images_per_step=(8, 3))
    failed = replace(cell("serial", step=1.0, steps=3), status="failed")
    cells = [slower, cell("multiprocess", step=5.0), failed, partial]
    pooled = over_the_sweep(ceiling, cells)
    assert pooled is not None and pooled.alone_steps == 3
    assert pooled.step_s == (0.2,) * 3 + (0.4,) * 5 + (0.4,)
    assert pooled.img_per_s == pytest.approx(8 * 9 / (0.6 + 2.4))
    assert pooled.throughput().high > 20.0  # the slower moments are in its interval
    assert over_the_sweep(pooled, cells) == pooled
    assert from_jsonable(ComputeCeiling, to_jsonable(pooled)) == pooled
    alone = pooled.alone()
    assert alone.step_s == ceiling.step_s and alone.alone_steps == 0
    assert alone.img_per_s == pytest.approx(ceiling.img_per_s)
    assert over_the_sweep(ceiling, [cell("multiprocess", step=5.0)]) == ceiling
    on_gpu = replace(ceiling, device="cuda:0")
    assert over_the_sweep(on_gpu, cells) is on_gpu
    simulated = compute(40.0)
    assert over_the_sweep(simulated, cells) is simulated


class _NoisyStep:
    """A real step's noise on a fake clock: its times cycle through ``times``."""

    simulated = False
    label = "noisy"

    def __init__(self, clock: FakeClock, times: list[float]) -> None:
        self.clock, self.times, self.calls = clock, times, 0

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        self.clock.now += self.times[self.calls % len(self.times)]
        self.calls += 1

    def mark(self) -> None:
        return None

    def drain(self) -> None:
        pass


def test_a_ceiling_the_serial_cells_will_add_to_stops_at_the_width_that_decides() -> None:
    """Alone, the ceiling runs until ±5 %; where the sweep's serial cells will pool their steps
    with it, until ±10 % — and only on the CPU's real step, in a sweep with a serial cell."""
    from dataclasses import replace

    from ioprof.core.config import SweepConfig
    from ioprof.runners.sweep import pooled_later

    def ceiling(target: float) -> ComputeCeiling:
        clock = FakeClock()
        # a cycle as long as MSER-5's batch: no batch of steps looks like a start-up to cut
        step = _NoisyStep(clock, [1.0, 0.8, 1.25, 0.9, 1.1])
        spec = parse_compute("real")
        return probe_compute(
            step,
            spec,
            "x",
            torch.device("cpu"),
            batch_size=4,
            crop_px=4,
            warmup_steps=1,
            clock=clock,
            max_seconds=1000.0,
            target=target,
        )

    alone, decided = ceiling(0.05), ceiling(0.10)
    assert 0.05 < decided.throughput().rel_half_width <= 0.10
    assert alone.throughput().rel_half_width <= 0.05
    assert len(decided.step_s) < len(alone.step_s)
    config = SweepConfig()
    real, sim = _NoisyStep(FakeClock(), [1.0]), SimulatedStep(parse_compute("sim:400"))
    assert pooled_later(config, real, "cpu")
    assert not pooled_later(config, real, "cuda") and not pooled_later(config, sim, "cpu")
    assert not pooled_later(replace(config, loaders=("multiprocess",)), real, "cpu")


class _SettlingStep(_NoisyStep):
    """A fresh model's steps on a fake clock: ``startup`` first (warm-up included), then ``times``
    cycled."""

    def __init__(self, clock: FakeClock, startup: list[float], times: list[float]) -> None:
        super().__init__(clock, times)
        self.startup = startup

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        if self.calls < len(self.startup):
            self.clock.now += self.startup[self.calls]
            self.calls += 1
            return
        self.clock.now += self.times[(self.calls - len(self.startup)) % len(self.times)]
        self.calls += 1


def test_a_ceiling_leaves_out_steps_still_at_a_fresh_models_pace() -> None:
    """ResNet-50 on this CPU, seen in a default sweep: 3 warm-up steps, then 15 more at about
    0.52 s, then 0.42 s a batch of 4 for good. The ceiling is the pace the steps settle at, its
    start-up left out by MSER-5 and said; a step that was steady from the first loses none."""
    noise = [0.42, 0.40, 0.45, 0.41, 0.39, 0.44, 0.43]
    settle = [0.62, 0.44, 0.49, 0.54, 0.51, 0.75, 0.46, 0.45, 0.48, 0.52, 0.49, 0.73, 0.51, 0.53, 0.50]

    def ceiling(startup: list[float]) -> ComputeCeiling:
        clock = FakeClock()
        return probe_compute(
            _SettlingStep(clock, [2.0, 1.9, 1.2, *startup], noise),
            parse_compute("real"),
            "x",
            torch.device("cpu"),
            batch_size=4,
            crop_px=4,
            warmup_steps=3,
            clock=clock,
            max_seconds=1000.0,
        )

    steady = 4 / (sum(noise) / len(noise))
    settling, settled = ceiling(settle), ceiling([])
    assert settling.startup_steps >= 10 and settled.startup_steps == 0, (settling, settled)
    assert settling.img_per_s == pytest.approx(steady, rel=0.03)
    assert settling.throughput().low <= steady <= settling.throughput().high
    assert settled.img_per_s == pytest.approx(steady, rel=0.01)
    from ioprof.render.words import compute_steps, measured

    assert f"its first {settling.startup_steps} steps left out as start-up" in measured(settling)
    assert "start-up" in compute_steps(settling) and "start-up" not in compute_steps(settled)
