"""What looking inside the loader costs the sweep, and whether its stages add up.

1. Overhead: the default sweep's resolutions (256x192, 500x375, 1024x768), serial and 2 workers,
   with a simulated step far faster than any loader here (sim:100000), so every cell's rate is
   the loader's own — the worst case for a per-sample cost. Sweeps with and without
   ``--no-inside`` alternate; the figure per cell is the median of the pairs' img/s ratios
   (with ÷ without). Goal: ≥ 0.98.
2. Sums: in those loader-bound cells, the workers' time per sample from the stage rows (every
   stage, ``rest of __getitem__`` included) ÷ the time per sample the cell itself measured: the
   serial loader's waits per image, and 2 workers × the window's seconds per image (both busy all
   the window). Near 1.0 where the loader is all that runs; above 1 where workers share the 2
   cores with each other and the training process (their clocks then count time off a core).

Not a test: prints and saves its figures (reports/benchmarks/inside.json).

    python benchmarks/bench_inside.py [--pairs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402

GOAL = 0.98
SWEEP = [
    *[
        "sweep",
        "--workers",
        "2",
        "--no-probe",
        "--compute",
        "sim:100000",
        "--batch-size",
        "16",
        "--images",
        "192",
    ],
    *["--resolutions", "256x192,500x375,1024x768"],
]


def sweep(out: Path, inside: bool) -> dict[str, dict[str, float]]:
    cmd = [sys.executable, "-m", "ioprof", *SWEEP, "--out", str(out), *([] if inside else ["--no-inside"])]
    subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
    cells = json.loads((out / "results.json").read_text())["cells"]
    return {f"{c['dataset']} {c['workers']}w": c for c in cells if c["status"] == "ok"}


def sums(cell: dict) -> float | None:  # type: ignore[type-arg]
    stages = (cell.get("inside") or {}).get("stages")
    if not stages or not cell["images"]:
        return None
    if cell["workers"] == 0:
        measured = sum(cell["wait_s"]) / cell["images"]
    else:
        measured = cell["workers"] * cell["elapsed_s"] / cell["images"]
    return stages["worker_s_per_sample"] / measured


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    pairs = ap.parse_args().pairs
    ratios: dict[str, list[float]] = {}
    sum_ratios: dict[str, list[float]] = {}
    costs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            got = {inside: sweep(Path(tmp) / f"{i}-{inside}", inside) for inside in order}
            for key, cell in got[True].items():
                plain = got[False].get(key)
                if plain:
                    ratios.setdefault(key, []).append(cell["img_per_s"] / plain["img_per_s"])
                s = sums(cell)
                if s is not None:
                    sum_ratios.setdefault(key, []).append(s)
                    st = cell["inside"]["stages"]
                    costs.setdefault(key, []).append(
                        st["timing_cost_s_per_sample"] / st["worker_s_per_sample"]
                    )
            print(
                f"pair {i + 1}/{pairs}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in ratios.items()),
                flush=True,
            )
    medians = {k: statistics.median(v) for k, v in ratios.items()}
    figures.save(
        {
            "benchmark": "the sweep's cost of looking inside the loader: img/s with stage timing, memory and "
            "thread readings ÷ without (--no-inside), loader-bound cells (sim:100000), the default resolutions, "
            f"batch 16, serial and 2 workers; {pairs} pairs of sweeps in alternating order; and the workers' "
            "time per sample from the stage rows ÷ the time per sample the cell measured",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "goal_with_over_without": GOAL,
            "img_per_s_ratio_median": medians,
            "img_per_s_ratios": ratios,
            "worst_median": min(medians.values()),
            "meets_goal": min(medians.values()) >= GOAL,
            "timers_cost_share_median": {k: statistics.median(v) for k, v in costs.items()},
            "stage_sum_over_measured_median": {k: statistics.median(v) for k, v in sum_ratios.items()},
        },
        REPO / "reports" / "benchmarks" / "inside.json",
    )


if __name__ == "__main__":
    main()
