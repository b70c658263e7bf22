"""Whether another GPU pays, from hand-built device cells; the DDP runner's plumbing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import builders
import paths
import pytest
import torch

from ioprof.conclude.devices import payoff
from ioprof.core.results import SCHEMA_VERSION
from ioprof.core.results_devices import DeviceCell, DevicesResult
from ioprof.measure.models import device_model
from ioprof.render.devices import render_devices_markdown
from ioprof.runners.devices import measure_ddp, measure_one

REPO = paths.REPO


ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _cell(
    setup: str, devices: int, samples_per_s: float, steps: int = 12, spread: float = 0.02
) -> DeviceCell:
    step = 32 * devices / samples_per_s
    times = tuple(step * (1 + spread * (i % 3 - 1)) for i in range(steps))
    return DeviceCell("resnet152", setup, devices, 32, True, "", times, 32 * devices, 60_000_000, 240_000_000)


@pytest.mark.parametrize(
    ("two_gpus", "pays"),
    [(1900.0, "yes"), (1100.0, "barely"), (990.0, "no")],
)
def test_a_second_gpu_pays_off_only_when_it_keeps_most_of_perfect_scaling(two_gpus: float, pays: str) -> None:
    p = payoff([_cell("cpu", 1, 20.0), _cell("1 gpu", 1, 1000.0), _cell("2 gpus", 2, two_gpus)])
    assert p.pays == pays
    assert p.gpu_speedup == pytest.approx(50.0, rel=0.01)
    assert p.efficiency is not None and p.efficiency.value == pytest.approx(two_gpus / 2000.0, rel=0.01)
    # the 2-GPU step is longer than the 1-GPU step by what communication and waiting took
    assert p.communication_share == pytest.approx(1 - two_gpus / 2000.0, abs=0.02)


def test_rows_not_measured_say_why_in_the_report() -> None:
    cells = (
        _cell("cpu", 1, 20.0),
        DeviceCell("resnet152", "1 gpu", 1, 32, False, "no CUDA device on this machine"),
        DeviceCell("resnet152", "2 gpus", 2, 32, False, "no CUDA device on this machine"),
    )
    r = DevicesResult(SCHEMA_VERSION, "devices", builders.RUN, builders.MACHINE, {"seconds": 30}, 0, cells)
    text = render_devices_markdown(r)
    assert "Measured here: cpu only" in text
    assert "[1] no CUDA device on this machine" in text


def test_a_machine_with_one_gpu_says_both_rows_were_measured_cpu_first() -> None:
    """Seen on an H100: the headline read "Measured here: 1 gpu, cpu only" (sorted by spelling)."""
    cells = (
        _cell("cpu", 1, 20.0),
        _cell("1 gpu", 1, 1000.0),
        DeviceCell("resnet152", "2 gpus", 2, 32, False, "1 GPU on this machine; DDP needs 2 or more"),
    )
    r = DevicesResult(SCHEMA_VERSION, "devices", builders.RUN, builders.MACHINE, {"seconds": 30}, 1, cells)
    assert "**Measured here: cpu and 1 gpu only** — this machine has one GPU" in render_devices_markdown(r)


def test_a_cell_too_slow_for_the_time_allowed_is_skipped_with_what_it_needs() -> None:
    c = measure_one("resnet152", 64, torch.device("cpu"), seconds=1.0, seed=0)
    assert not c.measured and "raise --seconds" in c.why_not
    assert c.params > 50_000_000


def test_the_probe_doubles_its_batch_until_a_gpus_fixed_step_cost_no_longer_misleads() -> None:
    """A GPU-like step (50 ms fixed, 0.2 ms a sample): scaled from batch 2 it reads 6.4 s at batch
    256 (7 steps ≈ 45 s: skipped); doubling, the probe reaches batch 64 and reads 0.25 s (7 steps
    fit 3 s: measured).
    A CPU-like step (0.35 s a sample) stops doubling where the next probe would cost more than a step
    the probes could afford (--seconds), and its figure is still an upper bound."""
    from ioprof.runners.devices import predicted_step_s

    probed: list[int] = []

    def gpu(b: int) -> float:
        probed.append(b)
        return 0.05 + 0.0002 * b

    assert 7 * gpu(2) / 2 * 256 > 3.0  # scaled from batch 2 alone: skipped at --seconds 3
    probed.clear()
    need = predicted_step_s(gpu, 256, 3.0)
    assert 7 * need <= 3.0 and need >= 0.05 + 0.0002 * 256  # fits: measured; still an upper bound
    assert probed == [2, 4, 8, 16, 32, 64]
    probed.clear()
    assert predicted_step_s(gpu, 256, 0.0) == pytest.approx(
        (0.05 + 0.0002 * 2) * 128
    )  # no room to probe more
    probed.clear()

    def cpu(b: int) -> float:
        probed.append(b)
        return 0.35 * b

    need = predicted_step_s(cpu, 256, 10.0)
    assert need == pytest.approx(0.35 * 256) and max(probed) == 4  # 3 x 0.7 + 3 x 1.4 s, then 8.4 s more: no


def test_ddp_over_two_gloo_ranks_times_every_step(tmp_path: Path) -> None:
    c = measure_ddp(
        "lenet5", 16, 2, backend="gloo", steps=8, workdir=tmp_path, seed=0, timeout_s=180, threads_per_rank=1
    )
    assert c.measured, c.why_not
    assert (c.devices, c.samples_per_step, len(c.step_s)) == (2, 32, 8)
    assert all(s > 0 for s in c.step_s)
    assert c.gradient_bytes == 4 * sum(p.numel() for p in device_model("lenet5").build().parameters())


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["--models", "vgg16"], 2, "--models: must be a comma-separated list of mlp"),
        (["--batch-sizes", "0"], 2, "--batch-sizes: must be a comma-separated list of positive integers"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], code: int, needle: str) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "ioprof", "devices", *argv], capture_output=True, text=True, env=ENV
    )
    assert p.returncode == code and needle in p.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_gpus_that_are_not_there_names_the_fix(tmp_path: Path, in_process) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = in_process("devices", "--gpus", "2", "--out", str(tmp_path / "o"))
    assert rc == 1
    assert err.strip().splitlines() == [
        "ioprof: error: --gpus 2: this machine has no GPU; leave --gpus out to measure what is here"
    ]
