"""``ioprof profile`` as a user runs it: phases, layers, operators and the epoch it predicts, checked
against a real epoch."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import paths
import pytest
from cli import ioprof

REPO = paths.REPO


@pytest.mark.slow
def test_the_profile_command_writes_the_report_the_csv_the_trace_and_the_plot(
    small_set: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    p = ioprof(
        *"profile --data".split(),
        str(small_set),
        *"--model tiny --crop-px 32 --steps 4 --workers 1 --check-epoch --out".split(),
        str(out),
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert (
        "USDT" not in p.stderr and "gpuGetDeviceCount" not in p.stderr
    )  # the profiler's native noise is not shown
    r = json.loads((out / "results.json").read_text())
    assert (
        r["kind"] == "profile"
        and r["measured_epoch"]["images"] == 48
        and r["prediction"]["check_error"] is not None
    )
    rows = list(csv.DictReader(io.StringIO((out / "profile.csv").read_text())))
    phases = {row["phase"] for row in rows}
    assert {"data_wait", "copy", "forward", "backward", "update", "loss_read"} <= phases
    layers = {row["layer"] for row in rows if row["kind"] != "step"}
    assert layers == {"0", "1", "2", "3", "4"}  # tiny: conv, relu, pool, flatten, linear
    report = (out / "report.md").read_text()
    assert (
        report.startswith("# ioprof profile")
        and "## The epoch, predicted" in report
        and "It cannot know" in report
    )
    # the arithmetic the step ran in, stated (on an H100 it was TF32 convolutions, unsaid)
    arithmetic = "fp32, no autocast, NCHW (the sweep's compute ceiling, by default, trains channels-last)"
    assert r["config"]["precision"] == arithmetic and f"; arithmetic: {arithmetic}." in report
    assert (out / "profile.png").stat().st_size > 5_000 and json.loads((out / "trace.json").read_text())[
        "traceEvents"
    ]
    (out / "report.md").unlink()
    assert (
        subprocess.run(
            [sys.executable, "-m", "ioprof", "report", str(out)],
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        ).returncode
        == 0
    )
    assert (out / "report.md").read_text() == report
