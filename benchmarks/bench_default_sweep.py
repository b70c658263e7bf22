"""Times the default ``python -m ioprof sweep --workers 1,4,8`` from an empty dataset cache, and
where its time went (the sweep's own phase times, kept in its results.json).

Not a test: it prints its figures and saves them under reports/benchmarks/. Goal on the
project's 2-core CPU-only machines: 150 s, first-time dataset generation included (aim 120 s).

    python benchmarks/bench_default_sweep.py
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import figures

REPO = Path(__file__).resolve().parent.parent
GOAL_S = 150.0
AIM_S = 120.0


def main() -> int:
    out_dir = REPO / "reports" / "benchmarks"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ioprof-bench-") as tmp:
        env = {**os.environ, "IOPROF_CACHE_DIR": str(Path(tmp) / "cache"), "PYTHONPATH": str(REPO)}
        cmd = [sys.executable, "-m", "ioprof", "sweep", "--workers", "1,4,8", "--out", str(Path(tmp) / "run")]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall_s = time.perf_counter() - t0
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            return p.returncode
        gen_s = sum(
            float(line.split(" in ")[1].split(" s")[0])
            for line in p.stderr.splitlines()
            if "] generated " in line
        )
        results = json.loads((Path(tmp) / "run" / "results.json").read_text())
    found = {
        "benchmark": "default sweep, first run (empty dataset cache)",
        "command": "python -m ioprof sweep --workers 1,4,8",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{results['machine']['cpu_model']}, {results['machine']['cpu_cores_usable']} cores, "
        f"{platform.python_version()}",
        "device": results["run"]["device"],
        "wall_s": round(wall_s, 1),
        "dataset_generation_s": round(gen_s, 1),
        "cells": len(results["cells"]),
        "phases_s": {k: round(v, 1) for k, v in results.get("phases_s", {}).items()},
        "goal_s": GOAL_S,
        "aim_s": AIM_S,
        "within_goal": wall_s < GOAL_S,
        "img_per_s_by_cell": {
            f"{c['dataset']} {c['loader']} {c['workers']}": round(c["img_per_s"], 2) for c in results["cells"]
        },
    }
    figures.save(found, out_dir / "default_sweep.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
