"""The cost of ``ioprof run`` to the training it watches: the script's own training rate with
ioprof attached ÷ without. Goal: ≥ 0.98.

Not a test: prints and saves its figures (reports/benchmarks/run_overhead.json). The script is
tests/train_imagenet_like.py (PyTorch's ImageNet example, small: mobilenet_v3_small at 64 px,
batch 8, 2 workers) on a generated ImageFolder; it reports its own img/s over an epoch. Runs
alternate plain / attached; the attached ones time every batch of the epoch (the worst case:
a window longer than the epoch, no probe). Medians of 7 are compared.

    python benchmarks/bench_run_overhead.py
"""

from __future__ import annotations

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

SCRIPT = REPO / "tests" / "train_imagenet_like.py"
REPEATS = 7
GOAL = 0.98
ARGS = ["--crop", "64", "-j", "2", "-b", "8"]


def rate(out: str) -> float:
    m = re.search(r"train ([0-9.]+) img/s", out)
    if not m:
        raise RuntimeError(f"the script printed no rate:\n{out}")
    return float(m.group(1))


def main() -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="ioprof-overhead-") as tmp:
        data = Path(tmp) / "data"
        for split, n in (("train", 640), ("val", 16)):
            generate(DatasetSpec(256, 192, n, seed=len(split)), Path(tmp) / split)
            shutil.move(str(Path(tmp) / split), str(data / split))
        plain_cmd = [sys.executable, str(SCRIPT), str(data), *ARGS]
        watched_cmd = [sys.executable, "-m", "ioprof", "run", "--no-probe", "--steps", "100000", "--seconds", "100000",
                       "--out", str(Path(tmp) / "o"), "--", *plain_cmd]  # fmt: skip
        plain, watched = [], []
        for i in range(REPEATS):
            for cmd, into in (
                ((plain_cmd, plain), (watched_cmd, watched))
                if i % 2 == 0
                else ((watched_cmd, watched), (plain_cmd, plain))
            ):
                p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                into.append(rate(p.stdout))
            print(
                f"run {i + 1}: plain {plain[-1]:.1f} img/s, with ioprof {watched[-1]:.1f} img/s", flush=True
            )
    p_med, w_med = sorted(plain)[REPEATS // 2], sorted(watched)[REPEATS // 2]
    figures.save(
        {
            "benchmark": "ioprof run's cost: the script's own training img/s with ioprof attached (every batch of the "
            "epoch timed, no probe) / without; tests/train_imagenet_like.py, mobilenet_v3_small 64 px, batch 8, "
            f"2 workers, 80 steps an epoch; medians of {REPEATS} alternating runs",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "plain_img_per_s": plain,
            "with_ioprof_img_per_s": watched,
            "ratio_of_medians": round(w_med / p_med, 4),
            "goal": f"≥ {GOAL}",
            "within_goal": w_med / p_med >= GOAL,
        },
        REPO / "reports" / "benchmarks" / "run_overhead.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
