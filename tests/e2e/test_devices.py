"""``ioprof devices`` as a user runs it: the CPU rows measured, GPU rows said not measured without a
GPU."""

from __future__ import annotations

import os
from pathlib import Path

import paths
import pytest
import torch
from cli import ioprof

from ioprof.core import resultfile
from ioprof.core.results_devices import DevicesResult

REPO = paths.REPO


ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.mark.slow
def test_the_command_measures_the_cpu_rows_and_reports_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "o"
    p = ioprof(
        *"devices --models mlp,lenet5,lstm --batch-sizes 8,32 --seconds 3 --out".split(),
        str(out),
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    r = resultfile.load(out)
    assert isinstance(r, DevicesResult)
    cpu = [c for c in r.cells if c.setup == "cpu"]
    assert [(c.model, c.batch_size) for c in cpu] == [
        (m, b) for m in ("mlp", "lenet5", "lstm") for b in (8, 32)
    ]
    assert all(c.measured and c.throughput().known for c in cpu)
    if not torch.cuda.is_available():
        gpu = [c for c in r.cells if c.setup != "cpu"]
        assert gpu and all(not c.measured and "no CUDA device" in c.why_not for c in gpu)
        assert "Measured here: cpu only" in p.stdout
    assert (out / "devices.png").stat().st_size > 0
    assert "## Each model on each device" in (out / "report.md").read_text()
