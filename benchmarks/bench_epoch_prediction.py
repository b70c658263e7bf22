"""``ioprof profile``'s epoch prediction against a real epoch, on datasets that run one in about a minute.

Not a test: prints and saves its figures (reports/benchmarks/epoch_prediction.json). Goal: within
10 % (the seed study's prediction was 40 % off). Two configurations: compute-bound (ResNet-18 at
64 px, 2 workers, 2,000 generated 256x192 images) and input-bound (the tiny CNN at 32 px, one
worker, 2,000 generated 500x375 images). Each runs ``ioprof profile --check-epoch``: the profile,
the prediction from it, then one real epoch from cold.

    python benchmarks/bench_epoch_prediction.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402

from ioprof.datasets.synth import DatasetSpec, generate  # noqa: E402

GOAL = 0.10
CONFIGS = {
    "compute-bound: resnet18, 64 px, 2 workers, 2000 x 256x192": (
        (256, 192, 2000),
        ["--model", "resnet18", "--crop-px", "64", "--workers", "2"],
    ),
    "input-bound: tiny CNN, 32 px, 1 worker, 2000 x 500x375": (
        (500, 375, 2000),
        ["--model", "tiny", "--crop-px", "32", "--workers", "1"],
    ),
}


def main() -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rows = []
    with tempfile.TemporaryDirectory(prefix="ioprof-epoch-") as tmp:
        for name, ((w, h, n), extra) in CONFIGS.items():
            data = Path(tmp) / f"{w}x{h}"
            if not data.exists():
                generate(DatasetSpec(w, h, n), data)
            out = Path(tmp) / f"out-{w}x{h}"
            t0 = time.perf_counter()
            p = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ioprof",
                    "profile",
                    "--data",
                    str(data),
                    *extra,
                    "--check-epoch",
                    "--out",
                    str(out),
                ],
                env=env,
                capture_output=True,
                text=True,
            )
            if p.returncode != 0:
                print(p.stderr, file=sys.stderr)
                return p.returncode
            r = json.loads((out / "results.json").read_text())
            cold = next(x for x in r["prediction"]["predictions"] if x["regime"] == "cold")
            m = r["measured_epoch"]
            error = r["prediction"]["check_error"]
            rows.append(
                {
                    "config": name,
                    "predicted_s": round(cold["total_s"], 2),
                    "measured_s": round(m["seconds"], 2),
                    "input_s": round(cold["input_s"], 2),
                    "compute_s": round(cold["compute_s"], 2),
                    "startup_s": round(cold["startup_s"], 3),
                    "error": round(error, 4),
                    "within_goal": abs(error) <= GOAL,
                    "hooks_cost": round(r["prediction"]["hooks_cost"], 4),
                    "top_layer": r["prediction"]["top_layer"],
                    "wall_s": round(time.perf_counter() - t0, 1),
                }
            )
            print(
                f"{name}: predicted {cold['total_s']:.1f} s, measured {m['seconds']:.1f} s, error {error:+.1%}",
                flush=True,
            )
    figures.save(
        {
            "benchmark": "ioprof profile's epoch prediction vs a real epoch (from cold), --check-epoch",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "goal": f"within {GOAL:.0%}",
            "rows": rows,
        },
        REPO / "reports" / "benchmarks" / "epoch_prediction.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
