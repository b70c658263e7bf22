"""``ioprof whatif`` on planted cases whose winner is known, and its scratch folder always removed."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from cli import ioprof, ioprof_start
from paths import tree_digest


def whatif(*args: str) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    out = Path(args[args.index("--out") + 1])
    p = ioprof("whatif", *args, timeout=900)
    assert p.returncode == 0, p.stderr
    return p, json.loads((out / "results.json").read_text())


def ranked(data: dict) -> list[tuple[str, float, bool]]:  # type: ignore[type-arg]
    return [(r["name"], r["gain"], r["beyond_noise"]) for r in data["ranking"]["ranked"]]


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith("ioprof-whatif-")]


@pytest.mark.slow
def test_on_storage_with_per_file_latency_shards_win(small_set: Path, tmp_path: Path) -> None:
    # 20 ms a file before its transfer, as network and object storage add: loose files pay it each
    _, data = whatif(
        "--data",
        str(small_set),
        *"--workers 2 --compute sim:5000 --storage-profile custom:500:20 --seconds 1 --scratch".split(),
        str(tmp_path),
        "--out",
        str(tmp_path / "o"),
    )
    assert data["ranking"]["best"] == "shards"
    shards = next(r for r in data["ranking"]["ranked"] if r["name"] == "shards")
    assert shards["gain"] > 2 and shards["beyond_noise"]
    assert not leftovers(tmp_path)


@pytest.mark.slow
def test_large_images_on_one_decode_bound_worker_prefer_a_pre_resized_copy(
    large_set: Path, tmp_path: Path
) -> None:
    _, data = whatif(
        "--data",
        str(large_set),
        *"--workers 1 --compute sim:5000 --seconds 1 --scratch".split(),
        str(tmp_path),
        "--out",
        str(tmp_path / "o"),
    )
    assert data["ranking"]["best"] in ("resized-256", "resized-320")
    gains = {n: g for n, g, _ in ranked(data)}
    beyond = {n: b for n, _, b in ranked(data)}
    # both copies decode far faster than the originals; which of the two wins is not asserted: with
    # the step's fixed costs per image their rates differ by 10-30 % here, and two CI runs measured
    # 320 px above 256 px, one second each: 3.7x against 3.1x; then 256 px's interval topped at
    # 233 img/s, below 320 px's floor of 239. They gain 3-4x on a quiet host; the CI machine once
    # measured every alternative a sixth below the baseline's second (cache and prefetch 0.83x)
    # and 256 px at 1.81x: held to 1.5x and beyond the noise, a copy that did not help still fails
    assert gains["resized-256"] > 1.5 and gains["resized-320"] > 1.5, gains
    assert beyond["resized-256"] and beyond["resized-320"], data["ranking"]
    resized = next(a for a in data["alternatives"] if a["name"] == "resized-256")
    # the scratch folder is on the data's own filesystem here: no control needed, the gain is measured there
    assert resized["prep_bytes"] < resized["sample_bytes"] and resized["where"] == "data"
    assert "loose-on-scratch" not in gains
    report = (tmp_path / "o" / "report.md").read_text()
    assert "## What to change" in report and "pre-resized to a 256 px short side" in report


@pytest.mark.slow
def test_a_compute_bound_run_is_told_nothing_helps(small_set: Path, tmp_path: Path) -> None:
    p, data = whatif(
        "--data",
        str(small_set),
        # a step at half what 2 workers decoded on a host with AVX2 alone: at 80 img/s its baseline
        # waited 4.6 % [3.1–6.1] there, borderline, where a faster host waited none. At 40 img/s a
        # batch still costs the loop about 4 ms to take (2 % of a step), and 5 steps (1 s) let one
        # slower take widen that to [0–6.2]: borderline again, in 2 CI runs of about 20; 10 steps hold it
        *"--workers 2 --compute sim:40 --seconds 2 --scratch".split(),
        str(tmp_path),
        "--out",
        str(tmp_path / "o"),
    )
    assert data["ranking"]["best"] == "" and data["ranking"]["compute_bound"] is True
    assert p.stdout.startswith("Nothing beats your current setting") and "compute-bound" in p.stdout
    names = {a["name"]: a for a in data["alternatives"]}
    assert names["gpu_decode"]["why_not"] == "needs-cuda" and names["pin_memory"]["measured"] is False


@pytest.mark.slow
def test_ctrl_c_removes_the_scratch_folder_and_the_data_is_only_read(large_set: Path, tmp_path: Path) -> None:
    before = tree_digest(large_set)
    proc = ioprof_start(
        *"whatif --data".split(),
        str(large_set),
        *"--workers 1 --compute sim:5000 --seconds 1 --scratch".split(),
        str(tmp_path),
        "--out",
        str(tmp_path / "o"),
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "resized-256: measuring" in line:
            break
    assert any("scratch: up to" in s and "removed afterwards" in s for s in seen)  # told beforehand
    assert leftovers(tmp_path), "the copies should exist while they are measured"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert not leftovers(tmp_path)
    assert tree_digest(large_set) == before
