"""``ioprof run`` on a real network filesystem, with training scripts as users run them (root only).

One sshfs mount whose link carries 8 Mbit/s (about 1 MB/s) serves an ImageFolder of 240
photo-like JPEGs of 40 kB (train) and 40 (val): any script that decodes and trains faster than
25 img/s is held back by the link, so the truth is **storage**. Two runs share the mount:

- the PyTorch examples' ImageNet script, unchanged (``tests/scripts/thirdparty``; nobody here wrote it):
  a validation loader between epochs, non-persistent workers, a checkpoint each epoch;
- this project's ImageNet-like script under ``torchrun`` with two ranks (DDP over gloo), which
  also validates every epoch: the storage is read alone once for the host at both ranks'
  readers, and the FUSE daemon's host-wide count is shared between the ranks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import netfs
import paths
import pytest

from ioprof.datasets.synth import DatasetSpec

REPO = paths.REPO


IMAGENET_EXAMPLE = paths.IMAGENET_EXAMPLE


OWN_SCRIPT = paths.IMAGENET_LIKE


ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


RATE_MBIT = 8.0


pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.skipif(bool(netfs.unavailable()), reason=netfs.unavailable() or "available"),
]


def _run(out: Path, cwd: Path, *command: str) -> dict[str, Any]:
    p = subprocess.run(
        [sys.executable, "-m", "ioprof", "run", "--probe-seconds", "2", "--out", str(out), "--", *command],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return {"result": json.loads((out / "results.json").read_text()), "stderr": p.stderr, "out": out}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    work = tmp_path_factory.mktemp("runnet")
    with netfs.net_mount(work, RATE_MBIT) as mount:
        data = mount.serve(DatasetSpec(256, 192, 240, seed=0), "data/train").parent
        mount.serve(DatasetSpec(256, 192, 40, seed=1), "data/val")
        plain = netfs.plain_read(data / "train", 120)
        cwd = work / "cwd"  # the example writes its checkpoints into the current folder
        cwd.mkdir()
        example = _run(
            work / "example",
            cwd,
            sys.executable,
            str(IMAGENET_EXAMPLE),
            str(data),
            *"-a mobilenet_v3_small -b 16 -j 2 --epochs 2 --no-accel".split(),
        )
        torchrun = shutil.which("torchrun")
        ddp = None
        if torchrun is not None:
            ddp = _run(
                work / "ddp",
                cwd,
                torchrun,
                "--standalone",
                "--nproc-per-node",
                "2",
                str(OWN_SCRIPT),
                str(data),
                *"--crop 64 -b 8 -j 1 --epochs 2".split(),
            )
        yield {"plain_mb_per_s": plain.bytes_per_s / 1e6, "example": example, "ddp": ddp}


def _cell(result: dict[str, Any], key: str) -> dict[str, Any]:
    return next(c for c in result["cells"] if c["dataset"] == key)


def test_the_imagenet_example_on_a_slow_link_is_storage_bound(runs: Any) -> None:
    r = runs["example"]["result"]
    train, val = r["loaders"]
    assert (train["role"], val["role"]) == ("training", "evaluation")
    assert (train["persistent_workers"], train["num_workers"], train["passes"]) == (False, 2, 2)
    cell = _cell(r, "loader 1")
    assert (cell["verdict"]["bottleneck"], cell["verdict"]["input_bound"]) == ("storage", "highly")
    assert (r["analysis"]["overall_bottleneck"], r["analysis"]["overall_dataset"]) == ("storage", "loader 1")
    # the bytes of the loader's own spans over their own seconds: the link's rate, not more
    fetched = cell["fetched_mb_per_s"]
    assert cell["fetched"]["method"] == "fuse-daemon"
    assert fetched == pytest.approx(runs["plain_mb_per_s"], rel=0.15)
    assert cell["io"]["read_chars"] > 0 and cell["requested_mb_per_s"] == pytest.approx(fetched, rel=0.15)
    # its decode ceiling came from memory, far above the storage's: storage is not hidden in it
    (ceilings,) = [c for c in r["ceilings"] if c["dataset"] == "loader 1"]
    assert all(d["cache"]["regime"] == "memory" for d in ceilings["decode"])
    assert min(d["img_per_s"] for d in ceilings["decode"]) > 3 * ceilings["storage"][0]["img_per_s"]
    assert not any(f["kind"] == "fetched-above-storage" for f in r["analysis"]["findings"])
    # inside its workers the network read leads, charged to read — not to decode, though PIL reads
    # the pixels only when it decodes them
    stages = cell["inside"]["stages"]
    assert stages["worker"][0]["name"] == "read" and stages["worker"][0]["share"] > 0.5, stages["worker"]
    report = (runs["example"]["out"] / "report.md").read_text()
    assert report.startswith("# ioprof run") and "the bottleneck is storage**: loader 1" in report
    assert "in memory: " in report and "| loader 2 | evaluation |" in report


def test_ddp_ranks_share_one_storage_probe_and_the_hosts_counter(runs: Any) -> None:
    if runs["ddp"] is None:
        pytest.skip("torchrun is not on PATH")
    r = runs["ddp"]["result"]
    assert r["script"]["ranks"] == 2
    roles = {lo["key"]: lo["role"] for lo in r["loaders"]}
    assert roles["rank 0 · loader 1"] == roles["rank 1 · loader 1"] == "training"
    assert roles["rank 0 · loader 2"] == roles["rank 1 · loader 2"] == "evaluation"
    cells = [_cell(r, f"rank {k} · loader 1") for k in (0, 1)]
    # in lockstep (DDP's all-reduce) one rank may spend its wait in the collective rather than in next():
    # its own data wait is then small and it reads as not input-bound; the other waits on the link.
    # Neither may be blamed on decode, and the headline is the rank that waits for data.
    verdicts = [c["verdict"]["bottleneck"] for c in cells]
    assert "storage" in verdicts and set(verdicts) <= {"storage", "compute"}, verdicts
    # one storage probe for the host, at both ranks' readers, shared by both
    storage = [s for c in r["ceilings"] if c["dataset"].endswith("loader 1") for s in c["storage"]]
    assert len(storage) == 2 and {(s["concurrency"], s["shared_by"]) for s in storage} == {(2, 2)}
    assert storage[0]["completed_s"] == storage[1]["completed_s"]  # the same measurement, not two
    # the FUSE daemon counts the host: each rank gets its share, and the shares add up to the link
    total = sum(c["fetched_mb_per_s"] for c in cells)
    assert total == pytest.approx(runs["plain_mb_per_s"], rel=0.15)
    assert all("this rank's share" in c["fetched"]["source"] for c in cells)
    a = r["analysis"]
    assert a["overall_bottleneck"] == "storage" and a["overall_peers"] == 2
