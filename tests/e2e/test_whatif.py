"""``ioprof whatif`` live: shards win on storage with per-file latency, and its scratch folder is
always removed. Its ranking and words on a compute-bound run and on large images are checked on
recorded runs (``tests/unit/recorded/test_whatif.py``)."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
from pathlib import Path

import pytest
from cli import ioprof, ioprof_start
from httpfolder import served
from paths import tree_digest

from ioprof.core.results_whatif import AGAIN_EVERY


def whatif(*args: str) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    out = Path(args[args.index("--out") + 1])
    p = ioprof("whatif", *args, timeout=900)
    assert p.returncode == 0, p.stderr
    return p, json.loads((out / "results.json").read_text())


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
    # the pipeline as it is, first, again after every few alternatives, and last: how far the
    # machine's pace moved over the run
    names = [a["name"] for a in data["alternatives"] if a["measured"] and a["cell"]]
    runs = [i for i, n in enumerate(names) if n == "baseline" or n.startswith("baseline-")]
    assert runs[0] == 0 and runs[-1] == len(names) - 1 and len(runs) >= 3, names
    assert all(b - a <= AGAIN_EVERY + 1 for a, b in itertools.pairwise(runs)), names
    assert data["ranking"]["drift"] is not None
    assert not leftovers(tmp_path)


@pytest.mark.slow
@pytest.mark.shares_cores  # a signal, an exit code, files removed: nothing timed against the host
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


@pytest.mark.slow
def test_on_tar_shards_persistent_workers_are_measured_against_fresh_ones(
    small_set: Path, tmp_path: Path
) -> None:
    """Epochs over tar shards (by URL, from a server here) that end: fresh workers start again at
    each one (a fork each, and their shards opened), kept ones only open their shards again —
    measured side by side in one run."""
    from ioprof.datasets.discover import find_images
    from ioprof.runners.pipelines import write_shards

    images = find_images(small_set)
    made, _, _ = write_shards(images.paths, images.labels, tmp_path / "shards", 50_000)
    with served(str(tmp_path / "shards")) as base:
        _, data = whatif(
            "--data",
            f"{base}/shard-{{00000..{len(made) - 1:05d}}}.tar",
            *"--workers 2 --compute sim:5000 --seconds 1 --only persistent_workers --scratch".split(),
            str(tmp_path),
            "--out",
            str(tmp_path / "o"),
        )
    (p,) = [a for a in data["alternatives"] if a["name"] == "persistent_workers"]
    assert p["measured"], p
    # a worker's start is most of an epoch's start here (fresh 1.9-2.5x kept, a CPU hog beside or
    # not); workers started again either way come out alike (0.96-1.03x)
    assert p["figures"]["startup_fresh_s"] > 1.5 * p["figures"]["startup_persistent_s"] > 0, p["figures"]


@pytest.mark.slow
def test_the_pipeline_read_cold_where_your_data_is_leaves_its_cached_pages_as_they_were(
    tmp_path: Path,
) -> None:
    """``whatif --data`` over files the page cache holds: the pipeline as it is runs cold on the
    data where it is (every file evicted before each run, each again once read), and what the
    cache held is read back once the alternatives are done. ``fincore`` counts, outside ioprof, the
    files gone whole from the cache after it, against as many untouched files cached at the same
    moment (the host's own reclaim takes pages from both)."""
    from groundtruth import CachedBeside

    cache = CachedBeside(tmp_path, 128, 96, 96, seed=5)
    _, r = whatif(
        "--data",
        str(cache.data),
        *"--workers 2 --compute sim:5000 --seconds 1 --only pin_memory --scratch".split(),
        str(tmp_path),
        "--out",
        str(tmp_path / "o"),
    )
    assert cache.as_found(), cache.gone_whole()
    back = r["run"]["read_back"]
    assert back is not None and back["files"] > 0 and back["left_bytes"] == 0, back
    assert "- Page cache: Reading your files cold evicted" in (tmp_path / "o" / "report.md").read_text()
    assert not leftovers(tmp_path)
