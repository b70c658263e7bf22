"""The first training step after loader workers fork, with and without the C heap's free memory
handed back first (``host.processes.release_free_heap``, which every multiprocess cell now calls).

After a fork every page the training process writes while a worker lives is copied first; the
first step after it pays for every page the step writes, the allocator's reused free memory
among them. A sweep pays that once per multiprocess cell, in its warm-up step. This measures the
first step after a fork of one idle child, side by side in one run (the two kinds alternating),
with ioprof's own ResNet-50 step at the CPU sweep's batch, and the page faults each took.

Not a test: it prints and saves its figures (reports/benchmarks/fork_warmup.json).

    python benchmarks/bench_fork_warmup.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402


def _minor_faults() -> int:
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[7])


def _after_fork(step: Any, images: Any, labels: Any, release: bool) -> tuple[float, float, int]:
    """The first and second step after forking an idle child, and the first's minor faults."""
    from ioprof.host.processes import release_free_heap

    if release:
        release_free_heap()
    pid = os.fork()
    if pid == 0:  # an idle worker: it holds the parent's pages, as a loader worker does
        time.sleep(600)
        os._exit(0)
    try:
        f0, t0 = _minor_faults(), time.perf_counter()
        step(images, labels)
        t1, f1 = time.perf_counter(), _minor_faults()
        step(images, labels)
        t2 = time.perf_counter()
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return t1 - t0, t2 - t1, f1 - f0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    import torch

    from ioprof.core.config import CPU_RUN_LENGTH
    from ioprof.measure.compute import RealTrainStep

    step = RealTrainStep("resnet50", torch.device("cpu"), 1000, False, "fp32", channels_last=True)
    batch = CPU_RUN_LENGTH.batch_size
    images = torch.randn(batch, 3, 224, 224)
    labels = torch.randint(0, 1000, (batch,))
    for _ in range(3):  # the allocator's working set grows to its steady size first
        step(images, labels)
    runs: dict[str, list[tuple[float, float, int]]] = {"kept": [], "released": []}
    for _ in range(args.rounds):
        for kind in ("kept", "released"):
            runs[kind].append(_after_fork(step, images, labels, kind == "released"))
    out: dict[str, Any] = {
        "benchmark": "first ResNet-50 step after a loader-like fork, free heap kept or released",
        "command": f"python benchmarks/bench_fork_warmup.py --rounds {args.rounds}",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.python_version()}, torch {torch.__version__}",
        "batch": batch,
    }
    for kind, rows in runs.items():
        out[kind] = {
            "first_step_s_median": round(statistics.median(r[0] for r in rows), 3),
            "second_step_s_median": round(statistics.median(r[1] for r in rows), 3),
            "first_step_minor_faults_median": int(statistics.median(r[2] for r in rows)),
            "first_step_s": [round(r[0], 3) for r in rows],
        }
    kept, released = out["kept"], out["released"]
    extra = kept["first_step_s_median"] - kept["second_step_s_median"]
    extra_released = released["first_step_s_median"] - released["second_step_s_median"]
    out["extra_first_step_s"] = {"kept": round(extra, 3), "released": round(extra_released, 3)}
    out["released_over_kept_extra"] = round(extra_released / extra, 2) if extra > 0 else None
    figures.save(out, REPO / "reports" / "benchmarks" / "fork_warmup.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
