"""Failures provoked for real: Ctrl-C, a killed worker, a full disk, bad files, read-only data —
nothing lost, one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import cliserver
import paths
import psutil
import pytest
from cli import ioprof, ioprof_start
from paths import tree_digest

REPO = paths.REPO

# each run survives a failure or leaves the data as it was: nothing timed against the host
pytestmark = pytest.mark.shares_cores

FIXTURES = REPO / "datasets_fixtures" / "awkward"


# slow emulated storage makes each cell last a few seconds, long enough to interfere with
# end-to-end cells only (--no-probe): these tests are about what survives a failure, not ceilings
SLOW = [
    *"--no-probe --loaders multiprocess --compute sim:5000 --storage-profile custom:0.15 --batch-size 4 --steps 12 --warmup-steps 1 --model tiny --crop-px 32".split(),
]


def start(*args: str) -> cliserver.Started | subprocess.Popen[str]:
    return ioprof_start("sweep", *args)


def wait_for_line(
    p: cliserver.Started | subprocess.Popen[str], needle: str, timeout_s: float = 300
) -> list[str]:
    assert p.stderr is not None
    lines = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"never saw {needle!r}; got:\n{''.join(lines)}")


@pytest.mark.slow
def test_ctrl_c_keeps_finished_cells_and_resume_completes(small_set: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["--data", str(small_set), "--workers", "1,2", *SLOW, "--out", str(out)]
    p = start(*args)
    wait_for_line(p, "[2/2]")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    data = json.loads((out / "results.json").read_text())
    assert data["run"]["interrupted"] is True
    first_run, first_cells_s = data["run"]["started_at"], data["phases_s"]["cells"]
    finished = [c for c in data["cells"] if c["status"] == "ok"]
    assert len(finished) == 1 and len(data["cells"]) < 2
    assert "**This run was interrupted.**" in (out / "report.md").read_text()

    refused = ioprof("sweep", *args[:3], "1", *SLOW, "--resume", str(out))
    assert refused.returncode == 1
    assert "configuration differs" in refused.stderr and "workers" in refused.stderr
    assert "Traceback" not in refused.stderr

    p = start(*args[:-2], "--resume", str(out))
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "kept from the earlier run" in err
    data = json.loads((out / "results.json").read_text())
    assert data["run"]["interrupted"] is False
    assert [c["workers"] for c in data["cells"]] == [1, 2]
    assert data["ceilings"] == [] and data["config"]["stages"] == ["compute", "transfer", "end-to-end"]
    assert data["cells"][0]["img_per_s"] == finished[0]["img_per_s"]  # kept, not measured again
    # the record says so, and the time the answer took is both runs'
    assert (data["run"]["resumed_from"], data["run"]["kept_cells"]) == (first_run, 1)
    assert data["phases_s"]["cells"] > first_cells_s
    assert (
        f"(resumed: 1 cell(s) and the ceilings it had measured kept from the run started {first_run})"
        in (out / "report.md").read_text()
    )
    assert "where the time went (the run it resumed included):" in err


@pytest.mark.slow
def test_killed_worker_fails_its_cell_and_the_sweep_goes_on(small_set: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = start("--data", str(small_set), "--workers", "2,1", *SLOW, "--out", str(out))
    wait_for_line(p, "[1/2]")
    workers: list[psutil.Process] = []
    deadline = time.monotonic() + 60
    while len(workers) < 2 and time.monotonic() < deadline:
        workers = psutil.Process(p.pid).children()
        time.sleep(0.05)
    assert len(workers) >= 2, "the loader's workers never appeared"
    time.sleep(0.5)
    workers[0].send_signal(signal.SIGKILL)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    data = json.loads((out / "results.json").read_text())
    first, second = data["cells"]
    assert first["status"] == "failed" and "worker" in first["error"].lower(), first["error"]
    assert second["status"] == "ok" and second["img_per_s"] > 0
    assert "failed" in (out / "report.md").read_text()


@pytest.mark.root
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mount") is None, reason="needs root to mount a tiny tmpfs"
)
def test_full_disk_is_a_clear_error(small_set: Path, tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(full)], check=True)
    try:
        p = ioprof(
            *"sweep --data".split(),
            str(small_set),
            *"--workers 1,2 --compute sim:2000 --batch-size 4 --steps 3 --no-probe --out".split(),
            str(full / "o"),
        )
    finally:
        subprocess.run(["umount", str(full)], check=False)
    assert p.returncode == 1, p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("ioprof: error: cannot write")
    assert "No space left on device" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_bad_files_are_counted_listed_and_bounded(tmp_path: Path) -> None:
    common = [
        "--data",
        str(FIXTURES),
        # cells only: the files are counted where the loader reads them, no ceiling needed
        *"--workers 2 --compute sim:2000 --batch-size 4 --steps 4 --model tiny --crop-px 32 --no-probe".split(),
    ]
    p = ioprof("sweep", *common, "--out", str(tmp_path / "a"))
    assert p.returncode == 1
    assert "could not be decoded, more than --max-failed-share 0.05" in p.stderr
    assert "finished cells are kept" in p.stderr and "Traceback" not in p.stderr

    p = ioprof("sweep", *common, "--max-failed-share", "1", "--out", str(tmp_path / "b"))
    assert p.returncode == 0, p.stderr
    report = (tmp_path / "b" / "report.md").read_text()
    assert "could not be read or decoded and were skipped" in report
    assert "were not RGB" in report and "converted" in report
    assert any(
        name in report for name in ("truncated.JPEG", "zero_bytes.JPEG", "not_an_image.JPEG", "bomb.png")
    )


@pytest.mark.slow
def test_read_only_dataset_is_unchanged_by_sweep_probe_and_place(small_set: Path, tmp_path: Path) -> None:
    data = tmp_path / "readonly"
    shutil.copytree(small_set, data)
    for f in [data, *data.rglob("*")]:
        f.chmod(f.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    before = tree_digest(data)
    # (simulated steps slower than decode: each decode ceiling stops at its first look, above it;
    # place at sim:2000 had its decode ceiling run to its 8 s cap for ±5 %, and the test 17 s)
    small = [
        *"--workers 2 --compute sim:200 --batch-size 4 --steps 3 --model tiny --crop-px 32".split(),
    ]
    cand = tmp_path / "cand"
    cand.mkdir()
    place = [
        "place",
        "--data",
        str(data),
        "--candidates",
        str(cand),
        *"--workers 2 --compute sim:200 --batch-size 4 --model tiny --crop-px 32".split(),
    ]
    for cmd in (
        ["sweep", "--data", str(data), *small],
        ["probe", "storage", "--data", str(data), "--workers", "2"],
        place,
    ):
        p = ioprof(*cmd, "--out", str(tmp_path / cmd[0]))
        assert p.returncode == 0, p.stderr
    assert tree_digest(data) == before
    swept = json.loads((tmp_path / "sweep" / "results.json").read_text())["datasets"][0]
    assert (swept["label"], swept["generated"]) == (str(data), False)
    for f in [data, *data.rglob("*")]:
        f.chmod(f.stat().st_mode | stat.S_IWUSR)
