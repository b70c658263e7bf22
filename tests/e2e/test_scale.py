"""``ioprof scale`` for real: 1 and 2 gloo ranks, a killed rank, two torchrun agents as two nodes, slow
network storage."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import netfs
import paths
import psutil
import pytest
from cli import ioprof, ioprof_start

from ioprof.conclude.scale import conclude
from ioprof.core import resultfile
from ioprof.core.results_scale import ScaleResult
from ioprof.render.scale import render_scale_markdown

REPO = paths.REPO


ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ioprof.datasets.synth import DatasetSpec, generate

    root = tmp_path_factory.mktemp("scale")
    generate(DatasetSpec(160, 120, 160), root / "d")
    return root / "d"


def _scale(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return ioprof("scale", *args, timeout=timeout)


def _kill_rank_when_running(rank: int, deadline_s: float) -> int | None:
    """SIGKILL the training process of ``rank`` (a child of torchrun's agent) once it exists."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if "ioprof.runners.rank" not in cmd or "torch.distributed.run" in cmd:
                continue
            try:
                if (
                    proc.environ().get("RANK") == str(rank)
                    and "torch.distributed.run" in proc.parent().cmdline()
                ):
                    time.sleep(3)  # let it start measuring
                    proc.send_signal(signal.SIGKILL)
                    return proc.pid
            except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
                continue
        time.sleep(0.2)
    return None


@pytest.mark.slow
def test_gloo_ranks_each_measured_and_gathered_and_a_killed_rank_fails_its_count_and_the_run_goes_on(
    tiny: Path, tmp_path: Path
) -> None:
    """One run proves both (a run of its own each cost 20 s): a rank of the first count (3 ranks)
    is killed — that count fails with the reason, and the run goes on to 1 and 2 ranks, each
    measured and gathered."""
    out, tmp = tmp_path / "o", tmp_path / "tmp"
    tmp.mkdir()
    proc = ioprof_start(
        *"scale --data".split(),
        str(tiny),
        *"--compute sim:40 --ranks 3,1,2 --steps 15 --crop-px 64 --cache warm --out".split(),
        str(out),
        env={"TMPDIR": str(tmp)},  # torchrun's own folders land here
    )
    killed = _kill_rank_when_running(1, 120)
    stdout, stderr = proc.communicate(timeout=400)
    assert killed is not None
    assert proc.returncode == 0, stderr[-3000:]
    r = resultfile.load(out)
    assert isinstance(r, ScaleResult)
    three, one, two = r.counts
    assert (three.ranks, three.status, three.reason) == (3, "failed", "rank 1: killed by SIGKILL")
    assert "3 ranks failed (rank 1: killed by SIGKILL)" in (out / "report.md").read_text()
    assert (out / "logs" / "ranks-3-warm.log").exists()
    assert [(c.ranks, c.status, [x.rank for x in c.per_rank]) for c in (one, two)] == [
        (1, "ok", [0]),
        (2, "ok", [0, 1]),
    ]
    # simulated 40 img/s per rank, fed easily: two ranks do about twice the work of one
    assert 1.7 < two.aggregate().value / one.aggregate().value < 2.2
    for x in two.per_rank:
        assert x.cell.steps == 15 and x.cell.cache.regime == "warm" and x.cores_used > 0
    assert (out / "report.md").read_text().startswith("# ioprof scale")
    assert (out / "scale.png").stat().st_size > 0
    assert "Warm:" in stdout
    assert not list(tmp.glob("torchelastic_*"))  # torchrun's logs of each launch, left by none


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun is not on PATH")
def test_under_torchrun_two_nodes_rendezvous_and_rank_0_writes_one_report(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    port = 29400 + os.getpid() % 500
    command = [
        *"torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint".split(),
        f"127.0.0.1:{port}",
        *"--rdzv-id t -m ioprof scale --data".split(),
        str(tiny),
        *"--compute sim:40 --steps 10 --crop-px 64 --cache warm --out".split(),
        str(out),
    ]
    nodes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
        for _ in range(2)
    ]
    logs = [n.communicate(timeout=300)[0] for n in nodes]
    assert [n.returncode for n in nodes] == [0, 0], "\n".join(x[-2000:] for x in logs)
    r = resultfile.load(out)
    assert isinstance(r, ScaleResult)
    assert [(c.ranks, sorted(x.rank for x in c.per_rank)) for c in r.counts] == [(2, [0, 1])]
    assert sum("report:" in x for x in logs) == 1  # rank 0 alone writes and says so


RATE_MBIT = 16  # the session rig's link, raised for this test: about 2 MB/s, 50 of its 40 kB JPEGs a second


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.link
@pytest.mark.xdist_group("links")
def test_on_slow_network_storage_the_second_rank_is_stopped_by_the_storage(
    netrig: tuple[netfs.NetMount, netfs.Served], tmp_path: Path
) -> None:
    from ioprof.datasets.synth import DatasetSpec

    mount, _ = netrig
    # enough files that the storage read alone at 4 readers stops at its cap, not at the last file:
    # with 240 its interval stayed near ±10 %, and the saturation it decides (the fetched MB/s over
    # the interval's top, ≥ 0.85) came out 0.84–0.88
    data = mount.serve(DatasetSpec(256, 192, 480, seed=5), "scale")
    rate_before = mount.rate_mbit
    mount.set_rate(RATE_MBIT)
    try:
        plain = netfs.plain_read(data, files=40, skip=8)  # after the link's burst, as the ceiling counts
        link_b_per_s = plain.bytes_per_s
        # each rank consumes 70 % of what the link carries: one rank is fed, two are not
        rate = 0.7 * link_b_per_s / plain.mean_file_bytes
        out = tmp_path / "o"
        p = _scale(
            "--data",
            str(data),
            "--compute",
            f"sim:{rate:.1f}",
            *"--ranks 1,2 --workers 2 --batch-size 4 --steps 20 --cache cold --out".split(),
            str(out),
            timeout=600,
        )
        assert p.returncode == 0, p.stderr[-3000:]
    finally:
        mount.set_rate(rate_before)
    r = resultfile.load(out)
    assert isinstance(r, ScaleResult)
    rc = conclude(r).conclusion.regimes[0]
    one, two = r.counts
    assert one.per_rank[0].cell.fetched.method == "cold-reads"
    assert rc.counts[0].status == "busy", render_scale_markdown(conclude(r))
    # storage — or, where the storage's own reading at 4 readers did not close (a transient its cut
    # missed, seen once in CI: ± 34 %), "may have been the storage", never a straggler: the rank that
    # waits longer is what two ranks sharing one link show
    undecided = rc.limit.stage == "storage-undecided"
    assert (rc.largest_busy, rc.limit.stage if not undecided else "storage", rc.limit.at_ranks) == (
        1,
        "storage",
        2,
    ), render_scale_markdown(conclude(r))
    assert not undecided or (two.storage is not None and two.storage.stopped_by != "interval"), two.storage
    # the storage read alone at each count: its interval closes at a look, not at the last of 480
    # files, and its rate is the link's. Whether a burst is there to leave out depends on the tbf
    # bucket, which the test does not hold full: here MSER-5 cuts 5 files at each count and reads
    # about 100 and 200, but CI's stop 42 found none to cut at 4 readers (0, 406 files read, 6 looks,
    # 1.970 MB/s) — a figure still true, so the cut itself is proven in the unit tests of the probe.
    # Whether the interval closes before the last file is the link's noise that minute (a CI run at
    # 4 readers read all 480, 6 looks, 1.957 MB/s): a reading that ran out of files is still one,
    # with its interval; the stop rule itself is proven in the probe's unit tests
    for c in r.counts:
        assert c.storage is not None
        if undecided and c is two:
            continue
        assert c.storage.stopped_by in ("interval", "files") and c.storage.bandwidth().known, c.storage
        assert c.storage.read_mb_per_s == pytest.approx(link_b_per_s / 1e6, rel=0.1)
    # the two ranks together fetched about what the link gives, not twice what one rank did
    fetched_two = two.fetched_mb_per_s()
    assert fetched_two is not None and fetched_two < 1.15 * link_b_per_s / 1e6
    # each with its interval: every rank's window read again every quarter second, its segments
    # adding up to its bytes, and the count's the ranks' added
    for c in r.counts:
        for x in c.per_rank:
            assert sum(b for _, b in x.cell.fetched_segments) == x.cell.fetched.bytes
        bw = c.fetched_bandwidth()
        assert bw is not None and bw.low < bw.value < bw.high, (c.ranks, bw)
    print(
        json.dumps(
            {
                "link_mb_per_s": link_b_per_s / 1e6,
                "sim_img_per_s": rate,
                "fetched_mb_per_s": [c.fetched_mb_per_s() for c in r.counts],
                "storage_mb_per_s": [c.storage and c.storage.read_mb_per_s for c in r.counts],
                "storage_files_cut_and_read": [
                    c.storage and (c.storage.warmup, c.storage.files) for c in r.counts
                ],
            }
        )
    )
