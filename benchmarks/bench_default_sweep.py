"""Times the default ``python -m ioprof sweep --workers 1,4,8`` from an empty dataset cache, and
where its time went (the sweep's own phase times, kept in its results.json); with ``--sim-gpu``,
the sweep a CPU user runs to ask what an H200 would meet (two resolutions, ``--compute sim:h200
--batch-size 256``), with the dataset cache made first and not timed.

Not a test: it prints its figures and saves them under reports/benchmarks/. Goal on the
project's 2-core CPU-only machines: 150 s each, first-time dataset generation included for the
default sweep (aim 120 s; 100 s for the simulated GPU's). The sweep's length follows the host's
pace (its cells stop once their answer is decided, or at their cap), so each run also keeps that
pace (the compute ceiling), how its cells stopped and whether every cell was decided (class not
borderline, rate within ± 10 %), and the file keeps every earlier run's line beside the newest.

    python benchmarks/bench_default_sweep.py [--sim-gpu]
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


SIM_GPU = ["--resolutions", "256x192,500x375", "--compute", "sim:h200", "--batch-size", "256"]
SIM_GOAL_S, SIM_AIM_S = 150.0, 100.0


def main() -> int:
    sim = "--sim-gpu" in sys.argv[1:]
    out_dir = REPO / "reports" / "benchmarks"
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ioprof-bench-") as tmp:
        env = {**os.environ, "IOPROF_CACHE_DIR": str(Path(tmp) / "cache"), "PYTHONPATH": str(REPO)}
        base = [sys.executable, "-m", "ioprof", "sweep", "--workers", "1,4,8", *(SIM_GPU if sim else [])]
        if sim:  # the datasets made first (the sweep's 2,000 images each): timed over a warm cache
            gen = [sys.executable, "-m", "ioprof", "probe", "storage", *SIM_GPU[:2], "--images", "2000"]
            made = subprocess.run([*gen, "--out", str(Path(tmp) / "gen")], env=env, capture_output=True)
            if made.returncode != 0:
                return made.returncode
        t0 = time.perf_counter()
        p = subprocess.run([*base, "--out", str(Path(tmp) / "run")], env=env, capture_output=True, text=True)
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
        report = (Path(tmp) / "run" / "report.md").read_text()
    goal, aim = (SIM_GOAL_S, SIM_AIM_S) if sim else (GOAL_S, AIM_S)
    found = {
        "benchmark": "simulated H200 sweep, batch 256 (dataset cache made first)"
        if sim
        else "default sweep, first run (empty dataset cache)",
        "command": " ".join(["python -m ioprof sweep --workers 1,4,8", *(SIM_GPU if sim else [])]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{results['machine']['cpu_model']}, {results['machine']['cpu_cores_usable']} cores, "
        f"{platform.python_version()}",
        "device": results["run"]["device"],
        "wall_s": round(wall_s, 1),
        "dataset_generation_s": round(gen_s, 1),
        "cells": len(results["cells"]),
        "phases_s": {k: round(v, 1) for k, v in results.get("phases_s", {}).items()},
        "goal_s": goal,
        "aim_s": aim,
        "within_goal": wall_s < goal,
        "compute_img_per_s": round(results["compute"]["img_per_s"], 2),
        "cells_stopped": stops(results["cells"]),
        "undecided_cells": undecided(results["cells"], report),
        "img_per_s_by_cell": {
            f"{c['dataset']} {c['loader']} {c['workers']}": round(c["img_per_s"], 2) for c in results["cells"]
        },
        "interval_by_cell": {
            f"{c['dataset']} {c['loader']} {c['workers']}": f"±{half(c) * 100:.1f} %"
            for c in results["cells"]
        },
    }
    path = out_dir / ("sim_h200_sweep.json" if sim else "default_sweep.json")
    found["history"] = [*earlier(path), line(found)]
    figures.save(found, path)
    return 0


def half(c: dict) -> float:
    """A cell's rate interval's half width relative to its rate, as results.json writes it."""
    low, high, value = c.get("img_per_s_low"), c.get("img_per_s_high"), c["img_per_s"]
    if low is None or high is None or not value:
        return float("inf")
    return (high - low) / 2 / value


def undecided(cells: list[dict], report: str) -> list[str]:
    """Cells whose answer the sweep did not decide: a rate beyond ± 10 %, or a borderline class."""
    out = [f"{c['dataset']} {c['loader']} {c['workers']}" for c in cells if half(c) > 0.10]
    if "borderline (" in report:
        out.append("a borderline class in the report")
    return out


def stops(cells: list[dict]) -> dict[str, int]:
    """How many cells stopped after how many steps, and by what (interval, seconds, steps)."""
    out: dict[str, int] = {}
    for c in cells:
        key = f"{c['steps']} steps ({c['stopped_by']})"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def line(found: dict) -> dict:
    """One run in the file's history: when, how long, at what pace, how its cells stopped."""
    keys = ("date", "wall_s", "compute_img_per_s", "cells_stopped", "undecided_cells")
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
