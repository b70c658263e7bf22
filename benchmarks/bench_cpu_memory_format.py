"""The real training step on the CPU in NCHW (contiguous) against NHWC (channels-last), side by side.

Not a test: it prints its figures and saves them under reports/benchmarks/. ioprof's compute
ceiling trains "as a tuned trainer on the device does"; this says which memory format that is on
the CPU it runs on. Rounds alternate the two formats (ABAB…), each round a fresh model timed over
``STEPS`` steps after ``WARMUP`` untimed ones, so that a drift of the host's pace falls on both.

    python benchmarks/bench_cpu_memory_format.py [--models resnet50,resnet18,tiny] [--rounds 4]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import figures
import torch

from ioprof.measure.compute import RealTrainStep

REPO = Path(__file__).resolve().parent.parent
WARMUP = 2
STEPS = 6


def one_round(model: str, channels_last: bool, batch: int, crop_px: int) -> list[float]:
    step = RealTrainStep(model, torch.device("cpu"), 1000, False, "fp32", channels_last)
    x = torch.randn(batch, 3, crop_px, crop_px)
    y = torch.randint(0, 1000, (batch,))
    times = []
    for i in range(WARMUP + STEPS):
        t0 = time.perf_counter()
        step(x, y)
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,resnet18,tiny")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--crop-px", type=int, default=224)
    a = ap.parse_args()
    found: dict[str, object] = {
        "benchmark": "real training step on the CPU: NCHW against channels-last, rounds alternated",
        "command": "python benchmarks/bench_cpu_memory_format.py",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"torch {torch.__version__}",
        "batch_size": a.batch_size,
        "crop_px": a.crop_px,
        "models": {},
    }
    for model in a.models.split(","):
        steps: dict[str, list[float]] = {"nchw": [], "channels_last": []}
        for _ in range(a.rounds):
            for key, cl in (("nchw", False), ("channels_last", True)):
                steps[key].extend(one_round(model, cl, a.batch_size, a.crop_px))
        per = {
            key: {
                "img_per_s": round(a.batch_size * len(ts) / sum(ts), 2),
                "step_cv": round(statistics.stdev(ts) / statistics.mean(ts), 3),
                "steps": len(ts),
            }
            for key, ts in steps.items()
        }
        speedup = per["channels_last"]["img_per_s"] / per["nchw"]["img_per_s"]
        found["models"][model] = {**per, "channels_last_speedup": round(speedup, 3)}  # type: ignore[index]
    figures.save(found, REPO / "reports" / "benchmarks" / "cpu_memory_format.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
