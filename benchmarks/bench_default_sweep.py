"""Times the default ``python -m ioprof sweep --workers 1,4,8`` from an empty dataset cache, and
where its time went (the sweep's own phase times, kept in its results.json).

Not a test: it prints its figures and saves them under reports/benchmarks/. Goal on the
project's 2-core CPU-only machines: 150 s, first-time dataset generation included (aim 120 s).
The sweep's length follows the host's pace (its cells stop at fixed looks, after 5 or 10 steps
of ResNet-50, or at their cap), so each run also keeps that pace (the compute ceiling) and how
its cells stopped, and the file keeps every earlier run's line beside the newest.

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
        "compute_img_per_s": round(results["compute"]["img_per_s"], 2),
        "cells_stopped": stops(results["cells"]),
        "img_per_s_by_cell": {
            f"{c['dataset']} {c['loader']} {c['workers']}": round(c["img_per_s"], 2) for c in results["cells"]
        },
    }
    path = out_dir / "default_sweep.json"
    found["history"] = [*earlier(path), line(found)]
    figures.save(found, path)
    return 0


def stops(cells: list[dict]) -> dict[str, int]:
    """How many cells stopped after how many steps, and by what (interval, seconds, steps)."""
    out: dict[str, int] = {}
    for c in cells:
        key = f"{c['steps']} steps ({c['stopped_by']})"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def line(found: dict) -> dict:
    """One run in the file's history: when, how long, at what pace, how its cells stopped."""
    keys = ("date", "wall_s", "compute_img_per_s", "cells_stopped")
    return {k: found[k] for k in keys if k in found} | {"cells_s": found["phases_s"].get("cells")}


def earlier(path: Path) -> list[dict]:
    """The runs this file held before (the newest of them too, when it had no history yet)."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return list(old.get("history") or [line(old)])


if __name__ == "__main__":
    sys.exit(main())
