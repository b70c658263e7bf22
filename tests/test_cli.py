"""The whole CLI end to end, as a user runs it: ``python -m ioprof …`` in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TINY = ["--model", "tiny", "--crop-px", "32", "--batch-size", "4", "--steps", "3", "--images", "24"]


def ioprof(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "ioprof", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=env,
        timeout=600,
    )


@pytest.mark.slow
def test_sweep_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = ioprof("sweep", "--workers", "1,2", "--resolutions", "64x48,128x96,256x192", *TINY, "--out", str(out))
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "results.json").read_text())
    cells = {(c["dataset"], c["loader"], c["workers"]) for c in data["cells"]}
    assert cells == {
        (r, lo, w)
        for r in ("64x48", "128x96", "256x192")
        for lo, w in (("serial", 0), ("multiprocess", 1), ("multiprocess", 2))
    }
    for c in data["cells"]:
        assert c["status"] == "ok" and c["steps"] == 3 and len(c["wait_s"]) == 3
        assert c["img_per_s"] > 0 and 0 <= c["data_wait_share"] <= 1
        assert c["verdict"]["bottleneck"] in ("storage", "decode", "transfer", "compute")
        assert c["verdict"]["input_bound"] in ("highly", "moderately", "not")
        assert c["io"]["read_chars"] > 0  # the loader's processes were really counted
        assert c["gpu"]["available"] is False and c["gpu"]["reason"]
    m = data["machine"]
    assert m["cpu_cores_logical"] >= 1 and m["ram_bytes"] > 0 and m["torch"] and m["torchvision"]
    assert data["datasets"][0]["fs_type"]
    assert data["run"]["device"] == "cpu" and data["schema_version"] == 1
    report = (out / "report.md").read_text()
    assert report.startswith("# ioprof sweep")
    assert "![Training throughput against loader workers](throughput.png)" in report
    assert (out / "throughput.png").stat().st_size > 10_000
    assert len((out / "results.csv").read_text().splitlines()) == 10
    assert "[9/9]" in p.stderr  # progress was shown

    (out / "report.md").unlink()
    p = ioprof("report", str(out / "results.json"))
    assert p.returncode == 0, p.stderr
    assert (out / "report.md").read_text() == report


@pytest.mark.slow
def test_user_data_is_only_read(tmp_path: Path, small_set: Path) -> None:
    import hashlib

    def digest() -> str:
        h = hashlib.sha256()
        for f in sorted(small_set.rglob("*")):
            if f.is_file():
                h.update(f.read_bytes())
                h.update(str(f.stat().st_mtime_ns).encode())
        return h.hexdigest()

    before = digest()
    p = ioprof("sweep", "--workers", "2", "--data", str(small_set), *TINY, "--out", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    assert digest() == before
    data = json.loads((tmp_path / "o" / "results.json").read_text())
    assert data["datasets"][0]["label"] == str(small_set)
    assert data["datasets"][0]["generated"] is False


@pytest.mark.parametrize(
    "args, needle",
    [
        (["sweep", "--data", "/nonexistent/images"], "--data /nonexistent/images: no such directory"),
        (["report", "/nonexistent/results.json"], "/nonexistent/results.json: no such file"),
        (["sweep", "--precision", "fp16", "--device", "cpu"], "--precision fp16 needs a CUDA device"),
        (
            ["place", "--candidates", "/tmp", "--precision", "tf32", "--device", "cpu"],
            "--precision tf32 needs",
        ),
    ],
)
def test_user_errors_are_one_line_exit_1(args: list[str], needle: str, tmp_path: Path) -> None:
    p = ioprof(*args, cwd=tmp_path)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert lines[-1] == f"ioprof: error: {needle}" or lines[-1].startswith(f"ioprof: error: {needle}")
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "reports").exists()  # nothing made before the input was checked


def test_empty_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    p = ioprof("sweep", "--data", str(tmp_path / "empty"), cwd=tmp_path)
    assert p.returncode == 1 and "holds no images" in p.stderr and "Traceback" not in p.stderr


def test_bad_usage_exit_2(tmp_path: Path) -> None:
    p = ioprof("sweep", "--workers", "a,b", cwd=tmp_path)
    assert p.returncode == 2 and "positive integers" in p.stderr


def test_env_says_why_no_gpu() -> None:
    p = ioprof("env")
    assert p.returncode == 0
    assert "GPU telemetry (NVML):" in p.stdout and "CPU:" in p.stdout


def test_gen_writes_manifest(tmp_path: Path) -> None:
    p = ioprof("gen", "--resolutions", "64x48", "--images", "8", "--out", str(tmp_path / "g"))
    assert p.returncode == 0, p.stderr
    manifest = json.loads((tmp_path / "g" / "manifest.json").read_text())
    assert manifest["datasets"][0]["files"] == 8
    assert len(list((tmp_path / "g" / "64x48").rglob("*.jpg"))) == 8


@pytest.mark.skipif(shutil.which("ioprof") is None, reason="the package is not installed (pip install -e .)")
def test_console_script_is_the_same_program() -> None:
    p = subprocess.run(["ioprof", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("ioprof ")


@pytest.mark.parametrize("stage", ["compute", "decode", "storage"])
def test_probe_measures_one_stage(stage: str, small_set: Path, tmp_path: Path) -> None:
    out = tmp_path / stage
    p = ioprof("probe", stage, "--data", str(small_set), "--workers", "2", "--compute", "sim:500",
               "--batch-size", "4", "--model", "tiny", "--crop-px", "32", "--out", str(out))  # fmt: skip
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "results.json").read_text())
    assert data["cells"] == []
    assert (data["compute"] is not None) == (stage == "compute")
    if stage != "compute":
        ceilings = data["ceilings"][0]
        assert bool(ceilings["decode"]) == (stage == "decode") and bool(ceilings["storage"]) == (
            stage == "storage"
        )
    report = (out / "report.md").read_text()
    assert "## Stage ceilings" in report and "![Training throughput" not in report
    # a probe is one ceiling, said so; not a sweep whose cells all failed
    assert report.startswith(f"# ioprof probe {stage} — ")
    assert f"**The {stage} ceiling alone**" in report
    assert "no cell finished" not in report and "## Every cell" not in report


def test_probe_compute_reads_and_generates_no_dataset(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env_cmd = ["probe", "compute", "--model", "tiny", "--crop-px", "32", "--cache-dir", str(cache)]
    p = ioprof(*env_cmd, "--out", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    assert not cache.exists() or not any(cache.iterdir())
    assert json.loads((tmp_path / "out" / "results.json").read_text())["datasets"] == []
