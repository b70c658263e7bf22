"""``python -m ioprof sweep`` end to end in a subprocess: every file written, the verdict, the
interface."""

from __future__ import annotations

import json
import time
from pathlib import Path

import paths
import pytest
from cli import ioprof

REPO = paths.REPO


TINY = ["--model", "tiny", "--crop-px", "32", "--batch-size", "4", "--steps", "10", "--images", "24"]


@pytest.mark.slow
def test_sweep_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # a step far slower than any loader here (sim:10, 0.4 s a batch of 4): every cell compute-bound. A
    # serial loader decodes in series with the step (6 ms of its 0.4 s): 10 steps keep its interval under
    # 5 % through one batch 50 ms late; 3 did not through one 35 ms late (a CI run read decode, borderline)
    begun = time.time()
    p = ioprof(
        *"sweep --workers 2 --resolutions 64x48,256x192 --warmup-steps 1".split(),
        *TINY,
        "--compute",
        "sim:10",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "results.json").read_text())
    cells = {(c["dataset"], c["loader"], c["workers"]) for c in data["cells"]}
    assert cells == {
        (r, lo, w) for r in ("64x48", "256x192") for lo, w in (("serial", 0), ("multiprocess", 2))
    }
    for c in data["cells"]:
        assert (
            c["status"] == "ok" and c["steps"] == 10 and len(c["wait_s"]) == 10 and c["stopped_by"] == "steps"
        )
        assert c["img_per_s"] == pytest.approx(10.0, rel=0.1)  # the simulated step sets the pace
        assert (c["verdict"]["bottleneck"], c["verdict"]["input_bound"]) == ("compute", "not")
        assert c["requested_bytes"] > 0 and c["fetched"]["method"] in ("block-io", "ram")
        assert c["gpu"]["available"] is False and c["gpu"]["reason"]
        # the window's seconds since the epoch, within the run's, as long as the window
        start, end = c["window_wall_s"]
        assert begun <= start < end <= time.time() and end - start == pytest.approx(c["elapsed_s"], abs=0.05)
    assert data["analysis"]["overall_bottleneck"] == "compute"
    assert data["compute"]["simulated"] is True and data["compute"]["img_per_s"] == pytest.approx(
        10.0, rel=0.05
    )
    m = data["machine"]
    assert m["cpu_cores_logical"] >= 1 and m["ram_bytes"] > 0 and m["torch"] and m["torchvision"]
    assert data["datasets"][0]["fs_type"] and data["datasets"][0]["fs_kind"]
    assert data["run"]["device"] == "cpu" and data["schema_version"] == 2
    report = (out / "report.md").read_text()
    assert report.startswith("# ioprof sweep") and "**Verdict: compute-bound**" in report
    assert "![Training throughput against loader workers](throughput.png)" in report
    assert (out / "throughput.png").stat().st_size > 10_000
    assert len((out / "results.csv").read_text().splitlines()) == 5
    assert "[4/4]" in p.stderr  # progress was shown
    assert p.stdout.startswith("Verdict: compute-bound")

    (out / "report.md").unlink()
    p = ioprof("report", str(out))  # the folder will do
    assert p.returncode == 0, p.stderr
    assert (out / "report.md").read_text() == report
