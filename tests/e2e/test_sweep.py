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


def _paced_by_the_step(c: dict) -> None:  # type: ignore[type-arg]
    """A cell paced by its 0.4 s step: its class follows its data-wait share's interval by the
    classes' bars (5 %, 20 %): not input-bound, and the step the bottleneck, where the whole
    interval lies under 5 % — the usual case. A serial loader reads and decodes in series with the
    step, and a batch the host makes late (100 ms or so on a loaded CI host) lifts the share (a CI
    run read borderline not/moderately, decode): the class then says what the waits say."""
    v = c["verdict"]
    low, high = v["wait_share_low"], v["wait_share_high"]
    assert low <= v["data_wait_share"] <= high, v

    def klass(share: float) -> str:
        return "highly" if share >= 0.20 else "moderately" if share >= 0.05 else "not"

    assert v["input_bound_range"] == [klass(low), klass(high)], v
    if klass(high) == "not":
        assert (v["bottleneck"], v["input_bound"]) == ("compute", "not"), v


@pytest.mark.slow
def test_sweep_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # a step far slower than any loader here (sim:10, 0.4 s a batch of 4): every cell compute-bound
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
        _paced_by_the_step(c)
        assert c["requested_bytes"] > 0 and c["fetched"]["method"] in ("block-io", "ram")
        assert c["gpu"]["available"] is False and c["gpu"]["reason"]
        # the window's seconds since the epoch, within the run's, as long as the window
        start, end = c["window_wall_s"]
        assert begun <= start < end <= time.time() and end - start == pytest.approx(c["elapsed_s"], abs=0.05)
    # each dataset's verdict is its least waiting cell's: compute-bound where one of its cells is
    paced = {c["dataset"] for c in data["cells"] if c["verdict"]["input_bound"] == "not"}
    verdict = "compute-bound" if paced == {"64x48", "256x192"} else ""
    overall = (data["analysis"]["overall_bottleneck"], data["analysis"]["overall_input_bound"])
    assert (overall == ("compute", "not")) == (verdict == "compute-bound"), overall
    assert data["compute"]["simulated"] is True and data["compute"]["img_per_s"] == pytest.approx(
        10.0, rel=0.05
    )
    m = data["machine"]
    assert m["cpu_cores_logical"] >= 1 and m["ram_bytes"] > 0 and m["torch"] and m["torchvision"]
    assert data["datasets"][0]["fs_type"] and data["datasets"][0]["fs_kind"]
    assert data["run"]["device"] == "cpu" and data["schema_version"] == 2
    report = (out / "report.md").read_text()
    assert report.startswith("# ioprof sweep") and f"**Verdict: {verdict}" in report
    assert "![Training throughput against loader workers](throughput.png)" in report
    assert (out / "throughput.png").stat().st_size > 10_000
    assert len((out / "results.csv").read_text().splitlines()) == 5
    assert "[4/4]" in p.stderr  # progress was shown
    assert p.stdout.startswith(f"Verdict: {verdict}")

    (out / "report.md").unlink()
    p = ioprof("report", str(out))  # the folder will do
    assert p.returncode == 0, p.stderr
    assert (out / "report.md").read_text() == report
