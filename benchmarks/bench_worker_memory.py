"""Worker memory on scripts nobody here wrote, run again and again (needs root).

Not a test: it prints and saves its figures (reports/benchmarks/worker_memory.json). The rig is the
tests' own (tests/support/netfs.py): an sshfs mount behind an 8 Mbit/s link. Each script runs
unchanged under `ioprof run`, ``--repeats`` times (5 by default), while every process of it is read
from outside (psutil's ``smaps_rollup`` reader, ``tests/support/groundtruth.Smaps``):

- the PyTorch examples' ImageNet script and a dataset reading members of one zip: workers forked
  again each epoch — no run may get a memory-growth finding; the peak ioprof says a worker of the
  first pass reaches is set beside the most any of them reached, and that of later passes' workers
  beside theirs;
- timm's train.py: persistent workers — what ioprof says each keeps from epoch to epoch, beside
  their USS at the end of each epoch.

    sudo python benchmarks/bench_worker_memory.py [--repeats 5] [--epochs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import figures  # noqa: E402
import netfs  # noqa: E402
from groundtruth import Smaps  # noqa: E402

RATE_MBIT = 8.0
EXAMPLE = REPO / "tests" / "scripts" / "thirdparty" / "pytorch_examples_imagenet" / "main.py"


def _argv(name: str, served: netfs.Served, work: Path, epochs: int) -> tuple[list[str], str]:
    """The script's command line and the part of it that finds its processes."""
    if name == "example":
        argv = [
            str(EXAMPLE),
            str(served.data),
            *f"-a shufflenet_v2_x0_5 -b 4 -j 2 --epochs {epochs} --no-accel".split(),
        ]
        return argv, "pytorch_examples_imagenet/main.py"
    argv = netfs.script_argv(name, served, work)
    argv[argv.index("--epochs") + 1] = str(epochs)
    return argv, {"zip": "train_archive.py", "timm": "timm_train/train.py"}[name]


def _one(name: str, served: netfs.Served, work: Path, epochs: int, i: int) -> dict[str, Any]:
    argv, match = _argv(name, served, work, epochs)
    out = work / f"{name}-{i}"
    cmd = [sys.executable, "-m", "ioprof", "run", "--probe-seconds", "2", "--warmup-steps", "1"]
    cmd += ["--out", str(out), "--", sys.executable, *argv]
    with Smaps(match) as smaps:
        p = subprocess.run(
            cmd, cwd=work, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True
        )
    if p.returncode != 0:
        raise SystemExit(p.stderr[-3000:])
    result = json.loads((out / "results.json").read_text())
    (observed,) = [json.loads(f.read_text()) for f in sorted((out / "observed").glob("*.json"))][:1]
    training = next(lo for lo in observed["loaders"] if lo["role"] == "training")
    cell = next(c for c in result["cells"] if c["dataset"] == "loader 1")
    m = cell["inside"]["memory"]
    workers = sorted({int(k.split("/")[0]) for k in training["cpu"]["thread_cpu_s"]} - {observed["pid"]})
    row: dict[str, Any] = {
        "growth_finding": any(f["kind"] == "worker-memory-grows" for f in result["analysis"]["findings"]),
        "persistent": m["persistent_workers"],
    }
    if m["persistent_workers"]:
        kept, stretches = [], []
        for pid in workers:
            # its USS at the end of each of the epochs ioprof saw: the stretches of work that held
            # the most CPU time (an evaluation loader's blips between them are far smaller)
            ends = smaps.epoch_ends(pid, epochs=m["epochs_seen"])
            stretches.append(len(ends))
            if len(ends) == m["epochs_seen"] >= 2:
                kept.append((ends[-1][1] - ends[0][1]) / (len(ends) - 1) / 1e6)
        row |= {
            "ioprof_kept_mb_per_epoch": None
            if m["epoch_growth_bytes"] is None
            else round(m["epoch_growth_bytes"] / 1e6, 2),
            "ioprof_interval_mb": [
                None if m["epoch_growth_low"] is None else round(m["epoch_growth_low"] / 1e6, 2),
                None if m["epoch_growth_high"] is None else round(m["epoch_growth_high"] / 1e6, 2),
            ],
            "smaps_kept_mb_per_epoch": [round(k, 2) for k in kept],
            "smaps_stretches_of_work": stretches,
            "epochs_seen": m["epochs_seen"],
        }
    else:
        # the training loader's workers of its window (forked again each epoch: the lives ioprof read),
        # in the order they started: the first pass's workers, then later passes' (ioprof says each apart)
        lives = sorted(
            (smaps.readings[pid][0][0], max(u for _, u, _ in smaps.readings[pid]) / 1e6)
            for pid in workers
            if smaps.readings.get(pid)
        )
        first = training["settings"]["num_workers"] if m.get("life_first_pass") else 0
        later = m.get("later_life_peak_bytes")
        row |= {
            "ioprof_first_pass": bool(m.get("life_first_pass")),
            # the first pass's workers' own, where they were told apart (older results: the most of all)
            "ioprof_peak_mb": None
            if (peak := m.get("first_life_peak_bytes") or m.get("life_peak_bytes")) is None
            else round(peak / 1e6, 1),
            "ioprof_later_peak_mb": None if later is None else round(later / 1e6, 1),
            "smaps_most_any_worker_reached_mb": round(max(u for _, u in lives[:first] or lives), 1)
            if lives
            else None,
            "smaps_most_a_later_worker_reached_mb": round(max(u for _, u in lives[first:]), 1)
            if first and lives[first:]
            else None,
            "smaps_worker_processes_read": len(lives),
        }
    print(name, i, row, flush=True)
    return row


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _holds(row: dict[str, Any]) -> bool:
    truth = statistics.mean(row["smaps_kept_mb_per_epoch"])
    low, high = row["ioprof_interval_mb"]
    inside = low is not None and high is not None and low <= truth <= high
    return abs(row["ioprof_kept_mb_per_epoch"] - truth) <= 0.30 * abs(truth) or inside


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "runs": len(rows),
        "runs_with_a_growth_finding": sum(r["growth_finding"] for r in rows),
    }
    if rows and rows[0]["persistent"]:
        out["ioprof_kept_mb_per_epoch_median"] = _median(
            [r["ioprof_kept_mb_per_epoch"] for r in rows if r["ioprof_kept_mb_per_epoch"] is not None]
        )
        # each run against its own workers, read over the same epochs: ioprof's figure over the
        # workers' mean, and whether it lies within 30 % of it or its interval holds it
        paired = [
            r for r in rows if r["ioprof_kept_mb_per_epoch"] is not None and r["smaps_kept_mb_per_epoch"]
        ]
        out["ioprof_over_smaps"] = [
            round(r["ioprof_kept_mb_per_epoch"] / statistics.mean(r["smaps_kept_mb_per_epoch"]), 2)
            for r in paired
        ]
        out["runs_within_30_percent_or_interval"] = sum(_holds(r) for r in paired)
        out["runs_compared"] = len(paired)
    else:
        pairs = [
            (r["ioprof_peak_mb"], r["smaps_most_any_worker_reached_mb"])
            for r in rows
            if r["ioprof_peak_mb"] is not None and r["smaps_most_any_worker_reached_mb"]
        ]
        # rows from before the first pass was told apart pool every worker in the one peak
        out["ioprof_peak_over_smaps_peak"] = [round(a / b, 2) for a, b in pairs]
        later = [
            (r["ioprof_later_peak_mb"], r["smaps_most_a_later_worker_reached_mb"])
            for r in rows
            if r.get("ioprof_later_peak_mb") is not None and r.get("smaps_most_a_later_worker_reached_mb")
        ]
        if later:
            out["ioprof_later_peak_over_smaps_later_peak"] = [round(a / b, 2) for a, b in later]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--scripts", default="example,zip,timm")
    args = ap.parse_args()
    why = netfs.unavailable()
    if why:
        print(f"bench_worker_memory: {why}", file=sys.stderr)
        return 2
    runs: dict[str, list[dict[str, Any]]] = {}
    with netfs.served_rig("ioprof-memory-", RATE_MBIT) as (served, work):
        for name in args.scripts.split(","):
            epochs = args.epochs + (name == "timm")
            runs[f"{name}, {epochs} epochs"] = [
                _one(name, served, work, epochs, i) for i in range(args.repeats)
            ]
    out = REPO / "reports" / "benchmarks" / "worker_memory.json"
    if out.exists():  # the scripts (and epochs) not run this time keep their last runs
        runs = {**json.loads(out.read_text()).get("runs", {}), **runs}
    summary = {name: _summary(rows) for name, rows in runs.items()}
    figures.save(
        {
            "benchmark": "worker memory under `ioprof run` on an 8 Mbit/s sshfs link, each script run again and "
            "again, against each worker's smaps_rollup read from outside",
            "command": "python benchmarks/bench_worker_memory.py --repeats R --epochs E --scripts S: "
            "each run is kept under its script and epochs (timm runs one epoch more than --epochs)",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "summary": summary,
            "runs": runs,
        },
        out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
