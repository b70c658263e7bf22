"""A /dev/shm too small for the batches in flight (Docker's default is 64 MB), built for real: a
small tmpfs mounted over /dev/shm in a mount namespace of the test's own (root). The sweep skips
the cells that cannot fit and says why; ``ioprof run`` warns at the first batch and, when the
script dies of it, says so in one line naming /dev/shm and the fixes, with the report kept."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import paths
import pytest
from cli import ioprof

from ioprof.datasets.synth import DatasetSpec, generate

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.link,  # a namespace of its own, nothing timed against the host: a core will do
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None,
        reason="needs root and unshare for a mount namespace",
    ),
]


def with_small_shm(size: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m ioprof ARGV`` with a ``size`` tmpfs as /dev/shm, in a mount namespace of its own
    (forked from a CLI server started there: one a size)."""
    script = 'mount -t tmpfs -o size="$0" tmpfs /dev/shm && exec "$@"'
    prefix = ("unshare", "-m", "--propagation", "private", "sh", "-c", script, size)
    return ioprof(*argv, timeout=600, prefix=prefix)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shmdata")
    for split, n in (("train", 64), ("val", 16)):
        generate(DatasetSpec(256, 192, n, seed=len(split)), root / split)
    return root


def test_the_sweep_skips_cells_whose_batches_cannot_fit_and_says_why(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    p = with_small_shm(
        "2m",
        "sweep",
        "--workers",
        "2",
        "--data",
        str(folder / "train"),
        *"--batch-size 8 --steps 3 --compute sim:100 --out".split(),
        str(out),
    )
    assert p.returncode == 0, p.stderr
    r = json.loads((out / "results.json").read_text())
    cells = {c["workers"]: c for c in r["cells"]}
    assert cells[0]["status"] == "ok"  # the serial loader needs no /dev/shm
    skipped = cells[2]
    assert skipped["status"] == "failed" and skipped["error"].startswith(
        "skipped before it ran: the DataLoader's batches in flight need 19.3 MB of /dev/shm"
    )
    assert "--shm-size" in skipped["error"] and "num_workers=0" in skipped["error"]
    report = (out / "report.md").read_text()
    assert "/dev/shm" in report and r["analysis"]["overall_bottleneck"] != "unknown"


def test_run_says_in_one_line_that_a_worker_died_for_want_of_dev_shm(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = with_small_shm(
        "2m",
        "run",
        "--no-probe",
        "--out",
        str(out),
        "--",
        sys.executable,
        str(paths.IMAGENET_LIKE),
        str(folder),
        *"-j 2 -b 8 -a squeezenet1_1".split(),
    )
    assert p.returncode == 1, p.stderr  # the script's own exit code
    lines = p.stderr.strip().splitlines()
    ours = [
        line
        for line in lines
        if line.startswith("ioprof: a DataLoader worker ran out of shared memory: /dev/shm has")
    ]
    assert len(ours) == 1 and "--shm-size" in ours[0]
    assert lines[-1].startswith(
        "ioprof: your script failed (exit code 1) because a DataLoader worker ran out of shared memory"
    )
    r = json.loads((out / "results.json").read_text())
    assert r["script"]["shm_failure"] and "shm-too-small" in {f["kind"] for f in r["analysis"]["findings"]}
    assert (
        "Your script failed because a DataLoader worker ran out of shared memory"
        in (out / "report.md").read_text()
    )


def test_run_warns_at_the_first_batch_when_the_batches_in_flight_would_not_fit(
    folder: Path, tmp_path: Path
) -> None:
    """Room for a few batches (393 kB each at 64 px) but not for 2 workers × prefetch_factor 24."""
    out = tmp_path / "run"
    p = with_small_shm(
        "16m",
        "run",
        "--no-probe",
        "--steps",
        "4",
        "--out",
        str(out),
        "--",
        sys.executable,
        str(paths.IMAGENET_LIKE),
        str(folder),
        *"-j 2 -b 8 --crop 64 --prefetch-factor 24 -a squeezenet1_1".split(),
    )
    warning = "ioprof: warning: loader 1: the DataLoader's batches in flight need 18.9 MB of /dev/shm (0.39 MB a batch × prefetch_factor 24 × 2 workers)"
    assert any(line.startswith(warning) for line in p.stderr.splitlines()), p.stderr
    r = json.loads((out / "results.json").read_text())
    assert r["script"]["shm_warnings"] and "shm-too-small" in {f["kind"] for f in r["analysis"]["findings"]}
    # whether or not the script then died of it, the last line says how it ended, and why if it did
    assert p.returncode == 0 or "ran out of shared memory" in p.stderr.strip().splitlines()[-1]
