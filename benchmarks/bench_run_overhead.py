"""The cost of ``ioprof run`` to the training it watches: the script's own training rate with
ioprof attached ÷ without, in the steady state. Goal: ≥ 0.98.

Not a test: prints and saves its figures (reports/benchmarks/run_overhead.json). The script is
the PyTorch examples' ImageNet script, unchanged (tests/scripts/thirdparty/pytorch_examples_imagenet:
mobilenet_v3_small, batch 16, 2 workers, on the CPU), on a generated ImageFolder on local disk —
storage waits would hide ioprof's per-batch cost. The steady-state rate is read from the
script's own per-batch times (``-p 1`` prints each batch's ``Time``): each epoch's batches after
its first five, so the workers' start-up and ioprof's probe (which runs in the pause after the
first epoch's last batch) are in no batch's time.

Rounds of one-epoch runs — plain, watched (every batch timed: a window longer than the run, no
probe — the worst case), and watched without the look inside the workers (``--no-inside``) — each
arm first in turn; the median of the pairs' ratios is the figure,
since this shared machine drifts by ±10 % between runs. Beside it, the precise figure: ioprof's
own code around each ``next()``, which the watched runs measure themselves, as a share of the
time per batch. One run as users run it (two epochs, window of 100 batches, then the probe)
gives the probe's pause, stated apart.

    python benchmarks/bench_run_overhead.py [--pairs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402

from ioprof.datasets.synth import DatasetSpec, generate  # noqa: E402

SCRIPT = REPO / "tests" / "scripts" / "thirdparty" / "pytorch_examples_imagenet" / "main.py"
GOAL = 0.98
BATCH = 16
ARGS = ["-a", "mobilenet_v3_small", "-b", str(BATCH), "-j", "2", "--epochs", "1", "--no-accel", "-p", "1"]
SKIP = 5  # batches of each epoch left out: the workers' start-up
BATCH_LINE = re.compile(r"Epoch: \[(\d+)\]\[\s*(\d+)/\s*\d+\]\s+Time\s+([0-9.]+)")


def steady_rate(out: str) -> float:
    """img/s over each epoch's batches after the first SKIP, from the script's own per-batch times."""
    times = [float(t) for _, i, t in BATCH_LINE.findall(out) if int(i) > SKIP]
    if not times:
        raise RuntimeError(f"the script printed no batch times:\n{out[-2000:]}")
    return BATCH * len(times) / sum(times)


def _watched(cmd: list[str], env: dict[str, str], cwd: str, out: Path) -> tuple[float, dict[str, object]]:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=cwd)
    return steady_rate(p.stdout), json.loads((out / "results.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    pairs = parser.parse_args().pairs
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="ioprof-overhead-") as tmp:
        data = Path(tmp) / "data"
        for split, n in (("train", 640), ("val", 32)):
            generate(DatasetSpec(500, 375, n, seed=len(split)), Path(tmp) / split)
            shutil.move(str(Path(tmp) / split), str(data / split))
        plain = [sys.executable, str(SCRIPT), str(data), *ARGS]
        out = Path(tmp) / "o"
        every = [
            sys.executable,
            "-m",
            "ioprof",
            "run",
            "--out",
            str(out),
            "--no-probe",
            "--steps",
            "100000",
            "--seconds",
            "100000",
            "--",
            *plain,
        ]
        # the third arm: watched, but nothing timed inside the workers (--no-inside): what the
        # stage timing in the user's workers costs, apart from the readings around next()
        outside = [*every[: every.index("--")], "--no-inside", *every[every.index("--") :]]
        rates: dict[str, list[float]] = {"plain": [], "every_batch": [], "no_inside": []}
        own: list[float] = []
        arms = ["plain", "every_batch", "no_inside"]
        for i in range(pairs):
            for name in arms[i % 3 :] + arms[: i % 3]:  # each arm first, second and third in turn
                if name == "plain":
                    p = subprocess.run(plain, env=env, capture_output=True, text=True, check=True, cwd=tmp)
                    rates[name].append(steady_rate(p.stdout))
                else:
                    rate, r = _watched(every if name == "every_batch" else outside, env, tmp, out)
                    rates[name].append(rate)
                    if name == "every_batch":
                        own.append(_own_share(r))
            print(
                f"round {i + 1}: plain {rates['plain'][-1]:.1f} img/s, watched {rates['every_batch'][-1]:.1f} "
                f"img/s (without the look inside the workers {rates['no_inside'][-1]:.1f}), ioprof's own code "
                f"{own[-1]:.3%} of the time per batch",
                flush=True,
            )
        default_out = Path(tmp) / "d"
        two_epochs = [a if a != "1" or plain[i - 1] != "--epochs" else "2" for i, a in enumerate(plain)]
        default_rate, d = _watched(
            [sys.executable, "-m", "ioprof", "run", "--out", str(default_out), "--", *two_epochs],
            env,
            tmp,
            default_out,
        )
    ratios = sorted(w / p for p, w in zip(rates["plain"], rates["every_batch"], strict=True))
    median = _median(ratios)
    outside_ratios = sorted(w / p for p, w in zip(rates["plain"], rates["no_inside"], strict=True))
    figures.save(
        {
            "benchmark": "ioprof run's cost in the steady state: the PyTorch examples' ImageNet script's own img/s "
            "(batches after each epoch's first 5, from its per-batch times) with ioprof timing every batch / "
            f"without; mobilenet_v3_small, batch {BATCH}, 2 workers, one epoch of 640 generated 500x375 JPEGs on "
            f"local disk, CPU; {pairs} pairs of runs in alternating order",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "img_per_s": rates,
            "pair_ratios": [round(r, 4) for r in ratios],
            "median_pair_ratio": round(median, 4),
            "no_inside_pair_ratios": [round(r, 4) for r in outside_ratios],
            "no_inside_median_pair_ratio": round(_median(outside_ratios), 4),
            "own_code_share_of_batch_time": own,
            "default_run": {
                "steady_img_per_s": default_rate,
                "probe_pause_s": d["script"]["probe_pause_s"],
                "verdict": d["analysis"]["overall_bottleneck"],
            },
            "goal": f">= {GOAL}",
            "within_goal": median >= GOAL,
        },
        REPO / "reports" / "benchmarks" / "run_overhead.json",
    )
    return 0


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def _own_share(r: dict[str, object]) -> float:
    """ioprof's own code per batch ÷ the loop's time per batch, for the training loader."""
    loaders = r["loaders"]
    cells = r["cells"]
    assert isinstance(loaders, list) and isinstance(cells, list)
    lo = next(x for x in loaders if x["role"] == "training")
    cell = next(c for c in cells if c["dataset"] == lo["key"])
    return float(lo["own_s_per_batch"]) / (cell["elapsed_s"] / cell["steps"])


if __name__ == "__main__":
    sys.exit(main())
