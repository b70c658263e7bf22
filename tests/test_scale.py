"""``ioprof scale``: N torchrun ranks on one storage — the conclusion (pure, hand-built ranks), the
launcher's failure reasons, and the real command with 1 and 2 gloo ranks: on local files, with a
rank killed mid-run, under torchrun itself (two rendezvousing agents, as two nodes), and on a slow
network filesystem where the storage must be what stops the second rank."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import builders
import netfs
import psutil
import pytest

from ioprof.conclude.scale import conclude
from ioprof.core import resultfile
from ioprof.core.results import SCHEMA_VERSION, RankCountResult, RankResult, ScaleResult
from ioprof.render.scale import headlines as headline
from ioprof.render.scale import render_scale_markdown
from ioprof.runners.torchrun import failure_reason

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


# -- the conclusion, from hand-built ranks --------------------------------------------------------


def _rank(
    rank: int, wait: float, cores: float = 0.2, fetched_bytes: int = 1_000_000, host: str = "h"
) -> RankResult:
    cell = builders.cell(workers=1, wait=wait, step=0.1, steps=20, jitter=0.002, fetched=fetched_bytes)
    # the simulated accelerator (80 img/s) computes a batch of 8 in 0.1 s: the whole step here
    return RankResult(
        rank,
        host,
        cell,
        cpu_s=cores * cell.elapsed_s,
        wall_s=cell.elapsed_s,
        host_cores=2,
        compute_s_per_step=0.1,
    )


def _count(
    ranks: int,
    wait: float,
    *,
    cores: float = 0.2,
    storage_img_per_s: float | None = None,
    fetched_bytes: int = 1_000_000,
    regime: str = "cold",
    waits: list[float] | None = None,
) -> RankCountResult:
    waits = waits or [wait] * ranks
    per = tuple(_rank(i, w, cores, fetched_bytes) for i, w in enumerate(waits))
    storage = builders.storage(ranks, storage_img_per_s) if storage_img_per_s else None
    return RankCountResult(ranks, regime, "ok", "", 5.0, per, storage)


def _result(*counts: RankCountResult) -> ScaleResult:
    return ScaleResult(
        SCHEMA_VERSION,
        "scale",
        builders.RUN,
        builders.MACHINE,
        {},
        builders.dataset_info(),
        "simulated 80 img/s",
        80.0,
        "gloo",
        1,
        0,
        counts,
    )


def test_the_stage_that_stops_the_next_rank_is_read_from_that_count() -> None:
    # every step of a cell moves 1 MB: a 2-s window per rank; 4 ranks fetch ~1.7 MB/s, the storage gave 20 files/s × 100 kB
    fetched = 4_000_000
    storage_bound = _result(
        _count(1, 0.0), _count(2, 0.001), _count(4, 0.05, fetched_bytes=fetched, storage_img_per_s=20)
    )
    rc = conclude(storage_bound).conclusion.regimes[0]
    assert rc.largest_busy == 2
    assert (rc.limit.stage, rc.limit.at_ranks, rc.limit.projected) == ("storage", 4, False)
    core_bound = _result(_count(1, 0.0), _count(2, 0.05, cores=0.9, storage_img_per_s=10_000))
    rc = conclude(core_bound).conclusion.regimes[0]
    assert (rc.largest_busy, rc.limit.stage) == (1, "cores")
    idle = _result(_count(1, 0.05, cores=0.3, storage_img_per_s=10_000))
    rc = conclude(idle).conclusion.regimes[0]
    assert (rc.largest_busy, rc.limit.stage, rc.limit.at_ranks) == (0, "workers", 1)
    assert "not even 1 rank" in headline(conclude(idle))[0]


def test_one_slow_rank_is_named_a_straggler() -> None:
    r = conclude(_result(_count(1, 0.0), _count(3, 0.0, waits=[0.0, 0.0, 0.06], storage_img_per_s=10_000)))
    rc = r.conclusion.regimes[0]
    assert rc.counts[1].stragglers == (2,)
    assert rc.limit.stage == "straggler"
    assert "rank(s) 2 straggled" in render_scale_markdown(r)


def _rotating(ranks: int, stall: float, steps: int = 30) -> RankCountResult:
    """Each step one rank in turn waits ``stall`` for its batch; DDP holds the others at the
    all-reduce that long. Compute is 0.1 s a step (batch 8 at the simulated 80 img/s)."""
    from dataclasses import replace

    per = []
    for r in range(ranks):
        waits = tuple(stall if k % ranks == r else 0.0 for k in range(steps))
        held = tuple(0.1 + (0.0 if k % ranks == r else stall) for k in range(steps))  # in the all-reduce
        c = replace(builders.cell(workers=1, steps=steps), wait_s=waits, step_s=held)
        elapsed = sum(waits) + sum(held)
        c = replace(c, elapsed_s=elapsed, img_per_s=c.images / elapsed, data_wait_share=sum(waits) / elapsed)
        per.append(
            RankResult(r, "h", c, cpu_s=0.2 * elapsed, wall_s=elapsed, host_cores=2, compute_s_per_step=0.1)
        )
    return RankCountResult(ranks, "cold", "ok", "", 5.0, tuple(per), builders.storage(ranks, 10_000))


def test_ranks_that_wait_for_each_other_are_not_busy() -> None:
    """A planted rotating straggler: each rank in turn waits 30 ms for a batch. Every rank's own data
    wait is under 8 %, so '1 − own wait' called each of them 92 % busy; the accelerators computed
    0.1 s of every 0.13 s: 77 %, as the scaling efficiency says."""
    r = conclude(_result(_count(1, 0.0, storage_img_per_s=10_000), _rotating(3, 0.03)))
    one, three = r.conclusion.regimes[0].counts
    assert one.status == "busy" and three.status == "starved"
    assert all(x.cell.data_wait_share < 0.08 for x in _rotating(3, 0.03).per_rank)
    assert three.busy_mean == pytest.approx(0.1 / 0.13, rel=0.01)
    assert three.efficiency is not None and three.busy_mean == pytest.approx(
        three.busy_from_efficiency, rel=0.02
    )
    limit = r.conclusion.regimes[0].limit
    assert (limit.stage, limit.at_ranks) == ("lockstep", 3)
    text = render_scale_markdown(r)
    assert "ranks waiting for each other" in text and "efficiency says" in text


def test_a_host_wide_counter_is_taken_once_per_host_not_once_per_rank() -> None:
    from dataclasses import replace

    from ioprof.core.results import Fetched

    count = _count(2, 0.0)
    host_wide = tuple(
        replace(r, cell=replace(r.cell, fetched=Fetched(3_000_000, "nfs-mountstats"))) for r in count.per_rank
    )
    assert replace(count, per_rank=host_wide).fetched_bytes() == 3_000_000  # not 6 MB
    two_hosts = (host_wide[0], replace(host_wide[1], host="other"))
    assert replace(count, per_rank=two_hosts).fetched_bytes() == 6_000_000
    assert count.fetched_bytes() == 2_000_000  # each rank's own reads still add up


def test_when_every_count_is_busy_the_next_is_projected_and_said_to_be() -> None:
    # 2 ranks use 0.5 cores each of 2: the cores feed 4 ranks, the storage (10 MB/s for ~1 MB/s) about 10
    r = conclude(
        _result(
            _count(1, 0.0, cores=0.5, storage_img_per_s=100), _count(2, 0.0, cores=0.5, storage_img_per_s=100)
        )
    )
    limit = r.conclusion.regimes[0].limit
    assert limit.projected and limit.stage == "cores" and limit.at_ranks == 5
    assert limit.ranks_by_cores == pytest.approx(4.0)
    assert limit.ranks_by_storage is not None and limit.ranks_by_storage > 4
    text = render_scale_markdown(r)
    assert "Projected, not measured" in text and "`--ranks 5`" in text


def test_a_straddling_count_is_borderline_not_blamed() -> None:
    r = conclude(_result(_count(1, 0.0), _count(2, 0.0, waits=[0.011, 0.011])))
    counts = r.conclusion.regimes[0].counts
    # wait 0.011 of 0.111 s ≈ 9.9 % with a spread: its interval straddles 10 %
    assert counts[1].status == "borderline"
    assert r.conclusion.regimes[0].limit.stage == "borderline"
    assert "borderline" in headline(r)[0]


def test_a_failed_count_keeps_its_reason_and_the_rest() -> None:
    failed = RankCountResult(2, "cold", "failed", "rank 1: killed by SIGKILL", 3.0, ())
    r = conclude(_result(_count(1, 0.0), failed))
    rc = r.conclusion.regimes[0]
    assert rc.largest_busy == 1 and rc.limit.stage == "failed"
    assert "rank 1: killed by SIGKILL" in headline(r)[0]
    assert "failed: rank 1: killed by SIGKILL" in render_scale_markdown(r)


def test_failure_reasons_come_from_the_rank_or_torchrun() -> None:
    summary = """Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 6637)  (SIGKILL)
  traceback : Signal 9 (SIGKILL) received by PID 6637"""
    assert failure_reason(summary, 1) == "rank 1: killed by SIGKILL"
    own = "noise\nioprof-rank-error: rank 0: StorageLost: /mnt/x: the storage is gone\n" + summary
    assert failure_reason(own, 1) == "rank 0: StorageLost: /mnt/x: the storage is gone"
    assert failure_reason("", None) == "did not finish in time"


# -- the real command ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ioprof.datasets.synth import DatasetSpec, generate

    root = tmp_path_factory.mktemp("scale")
    generate(DatasetSpec(160, 120, 160), root / "d")
    return root / "d"


def _scale(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ioprof", "scale", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
    )


@pytest.mark.slow
def test_one_and_two_gloo_ranks_each_measured_and_gathered(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    p = _scale(
        "--data",
        str(tiny),
        "--compute",
        "sim:40",
        "--ranks",
        "1,2",
        "--steps",
        "15",
        "--crop-px",
        "64",
        "--cache",
        "warm",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr[-3000:]
    r = resultfile.load(out)
    assert isinstance(r, ScaleResult)
    assert [(c.ranks, c.status, [x.rank for x in c.per_rank]) for c in r.counts] == [
        (1, "ok", [0]),
        (2, "ok", [0, 1]),
    ]
    one, two = r.counts
    # simulated 40 img/s per rank, fed easily: two ranks do about twice the work of one
    assert 1.7 < two.aggregate().value / one.aggregate().value < 2.2
    for x in two.per_rank:
        assert x.cell.steps == 15 and x.cell.cache.regime == "warm" and x.cores_used > 0
    assert (out / "report.md").read_text().startswith("# ioprof scale")
    assert (out / "scale.png").stat().st_size > 0
    assert "Warm:" in p.stdout


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
def test_a_killed_rank_fails_its_count_with_the_reason_and_the_run_goes_on(
    tiny: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ioprof",
            "scale",
            "--data",
            str(tiny),
            "--compute",
            "sim:40",
            "--ranks",
            "2,1",
            "--steps",
            "40",
            "--crop-px",
            "64",
            "--cache",
            "warm",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    killed = _kill_rank_when_running(1, 120)
    _, stderr = proc.communicate(timeout=400)
    assert killed is not None
    assert proc.returncode == 0, stderr[-3000:]
    r = resultfile.load(out)
    assert isinstance(r, ScaleResult)
    two, one = r.counts
    assert (two.ranks, two.status, two.reason) == (2, "failed", "rank 1: killed by SIGKILL")
    assert (one.ranks, one.status) == (1, "ok") and one.per_rank[0].cell.steps == 40
    assert "2 ranks failed (rank 1: killed by SIGKILL)" in (out / "report.md").read_text()
    assert (out / "logs" / "ranks-2-warm.log").exists()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun is not on PATH")
def test_under_torchrun_two_nodes_rendezvous_and_rank_0_writes_one_report(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    port = 29400 + os.getpid() % 500
    command = [
        "torchrun",
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        "t",
        "-m",
        "ioprof",
        "scale",
        "--data",
        str(tiny),
        "--compute",
        "sim:40",
        "--steps",
        "10",
        "--crop-px",
        "64",
        "--cache",
        "warm",
        "--out",
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


# -- on a slow network filesystem, the storage stops the second rank --------------------------------

RATE_MBIT = 16


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(bool(netfs.unavailable()), reason=netfs.unavailable() or "ok")
def test_on_slow_network_storage_the_second_rank_is_stopped_by_the_storage(tmp_path: Path) -> None:
    from ioprof.datasets.synth import DatasetSpec

    with netfs.net_mount(tmp_path / "net", RATE_MBIT) as m:
        data = m.serve(DatasetSpec(500, 375, 160), "data")
        plain = netfs.plain_read(data, files=40)
        link_b_per_s = plain.bytes_per_s
        # each rank consumes 70 % of what the link carries: one rank is fed, two are not
        rate = 0.7 * link_b_per_s / plain.mean_file_bytes
        out = tmp_path / "o"
        p = _scale(
            "--data",
            str(data),
            "--compute",
            f"sim:{rate:.1f}",
            "--ranks",
            "1,2",
            "--workers",
            "2",
            "--batch-size",
            "4",
            "--steps",
            "20",
            "--cache",
            "cold",
            "--out",
            str(out),
            timeout=600,
        )
        assert p.returncode == 0, p.stderr[-3000:]
    r = resultfile.load(out)
    assert isinstance(r, ScaleResult)
    rc = conclude(r).conclusion.regimes[0]
    one, two = r.counts
    assert one.per_rank[0].cell.fetched.method == "cold-reads"
    assert rc.counts[0].status == "busy", render_scale_markdown(conclude(r))
    assert (rc.largest_busy, rc.limit.stage, rc.limit.at_ranks) == (1, "storage", 2), render_scale_markdown(
        conclude(r)
    )
    # the two ranks together fetched about what the link gives, not twice what one rank did
    fetched_two = two.fetched_mb_per_s()
    assert fetched_two is not None and fetched_two < 1.15 * link_b_per_s / 1e6
    print(
        json.dumps(
            {
                "link_mb_per_s": link_b_per_s / 1e6,
                "sim_img_per_s": rate,
                "fetched_mb_per_s": [c.fetched_mb_per_s() for c in r.counts],
            }
        )
    )
