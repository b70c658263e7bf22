"""The GPU figures issue 4 asks for, in one run on a machine with an NVIDIA GPU.

Not a test: it runs the real thing and prints and saves what it saw.

1. the ``gpu``-marked tests (NVML matched to torch's device, sampling on a real GPU);
2. the compute ceiling with the default (tuned) settings and with a naive fp32 NCHW step,
   against the GPU's published ResNet-50 figure;
3. the default ``python -m ioprof sweep --workers 1,4,8`` on CUDA, whose report folder is the
   example report (``<out>/<gpu-name>/``), with per-cell NVML utilization, the sampler's cost,
   the transfer ceiling and each cell's CUDA-event timeline.

    python benchmarks/bench_gpu.py --out reports/examples      # figures: <out>/gpu.json

``--seconds S`` caps each sweep cell (the sweep's own ``--seconds``; without it, the sweep's
default on CUDA: a cell stops once its answer is decided, the slowest at the cap).
``--skip-compute`` leaves out the two compute probes (the sweep measures the tuned ceiling too).

Refuses (exit 2) where torch sees no CUDA device.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from figures import save

REPO = Path(__file__).resolve().parent.parent


def slug(name: str) -> str:
    """A folder name from a GPU's name: "NVIDIA H100 80GB HBM3" → "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run(cmd: list[str], env: dict[str, str]) -> tuple[int, float, str]:
    """Runs ``cmd``, its output passed on as it comes (a run cut short still leaves its log)."""
    print("$", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.stdout is not None
    lines = []
    for line in p.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    rc = p.wait()
    return rc, time.perf_counter() - t0, "".join(lines)


def compute_figures(results_json: Path) -> dict[str, Any]:
    r = json.loads(results_json.read_text())
    c = r["compute"]
    return {
        "img_per_s": round(c["img_per_s"], 1),
        "label": c["label"],
        "batch_size": c["batch_size"],
        "steps": len(c["step_s"]),
        "interval": [c.get("img_per_s_low"), c.get("img_per_s_high")],
        "against_published": (r.get("analysis") or {}).get("compute_reference"),
    }


def sweep_figures(results_json: Path) -> dict[str, Any]:
    r = json.loads(results_json.read_text())
    cells = {}
    for c in r["cells"]:
        util = c["gpu"]["gpu_util_pct"]
        cuda = c.get("cuda") or {}
        n = max(1, len(cuda.get("idle_s", [])))
        cells[f"{c['dataset']} {c['loader']} {c['workers']}"] = {
            "status": c["status"],
            "img_per_s": round(c["img_per_s"], 1),
            "img_per_s_interval": [c.get("img_per_s_low"), c.get("img_per_s_high")],
            "data_wait_share": round(c["data_wait_share"], 3),
            "fetched_mb_per_s": c.get("fetched_mb_per_s"),
            "fetched_method": (c.get("fetched") or {}).get("method"),
            "cache_verified": c["cache"]["verified"],
            "gpu_util_mean_pct": round(sum(util) / len(util), 1) if util else None,
            "gpu_util_samples": len(util),
            "gpu_telemetry": "ok" if c["gpu"]["available"] else c["gpu"]["reason"],
            "mean_ms": {
                k: round(sum(cuda.get(f"{k}_s", [])) / n * 1e3, 2)
                for k in ("data_stall", "idle", "copy", "compute")
            },
        }
    shares = [
        c["gpu"]["sampler_cpu_s"] / c["gpu"]["sampled_s"]
        for c in r["cells"]
        if c["gpu"]["available"] and c["gpu"]["sampled_s"] > 0
    ]
    return {
        "gpu": r["machine"]["gpu"],
        "driver": r["machine"]["gpu_driver"],
        "config": {
            k: r["config"].get(k) for k in ("precision", "channels_last", "pin_memory", "non_blocking")
        },
        "compute_img_per_s": round(r["compute"]["img_per_s"], 1) if r.get("compute") else None,
        "transfer": [
            {
                "pinned": t["pinned"],
                "gb_per_s": round(t["gb_per_s"], 2),
                "img_per_s": round(t["img_per_s"], 1),
            }
            for t in r["transfer"]
        ],
        "sampler_core_share_max": round(max(shares), 5) if shares else None,
        "verdict": {
            k: (r.get("analysis") or {}).get(k)
            for k in ("overall_bottleneck", "overall_input_bound", "overall_dataset")
        },
        "cells": cells,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", default=str(REPO / "reports" / "examples"), help="where gpu.json and the example go"
    )
    ap.add_argument("--skip-sweep", action="store_true", help="tests and compute ceilings only")
    ap.add_argument("--skip-compute", action="store_true", help="no separate compute probes")
    ap.add_argument("--seconds", type=float, help="the sweep's --seconds: the most each cell runs")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print(
            "bench_gpu: torch sees no CUDA device here; run it on a machine with an NVIDIA GPU",
            file=sys.stderr,
        )
        return 2
    gpu = torch.cuda.get_device_name(0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {
        "benchmark": "GPU proof (issue 16)",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    with tempfile.TemporaryDirectory(prefix="ioprof-gpu-") as tmp:
        env = {**os.environ, "IOPROF_CACHE_DIR": str(Path(tmp) / "cache"), "PYTHONPATH": str(REPO)}
        env.setdefault("PYTHONUNBUFFERED", "1")
        rc, took, text = run(
            [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider"], env
        )
        found["gpu_tests"] = {"rc": rc, "s": round(took, 1), "summary": text.strip().splitlines()[-1:]}
        for name, extra in (
            ()
            if args.skip_compute
            else (("tuned", []), ("naive_fp32_nchw", ["--precision", "fp32", "--no-channels-last"]))
        ):
            run_dir = Path(tmp) / f"compute-{name}"
            rc, took, _ = run(
                [
                    sys.executable,
                    "-m",
                    "ioprof",
                    "probe",
                    "compute",
                    "--device",
                    "cuda",
                    "--out",
                    str(run_dir),
                    *extra,
                ],
                env,
            )
            found[f"compute_{name}"] = compute_figures(run_dir / "results.json") if rc == 0 else {"rc": rc}
        if not args.skip_sweep:
            example = out / slug(gpu)
            cap = [] if args.seconds is None else ["--seconds", f"{args.seconds:g}"]
            cmd = [sys.executable, "-m", "ioprof", "sweep", "--workers", "1,4,8", *cap, "--out", str(example)]
            rc, took, _ = run(cmd, env)
            found["sweep"] = {
                "rc": rc,
                "wall_s": round(took, 1),
                "folder": str(example),
                "command": " ".join(["python -m ioprof sweep --workers 1,4,8", *cap]),
            }
            if (example / "results.json").exists():
                found["sweep"].update(sweep_figures(example / "results.json"))
    save(found, out / "gpu.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
