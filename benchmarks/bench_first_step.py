"""A loop whose first step is a set-up while its workers fill their queue (``ioprof run``'s
drained-queue rule, ``core.rates``), against the truth: the loop of
``tests/scripts/train_slow_first_step.py`` (each sample and step a ``time.sleep``) under
``ioprof run --no-probe``, its own waits and steps recorded by itself. The truth is its steady
wait share — over the second half of its 900 steps, long after the queue drained —; beside it, the same
loop's own wait share over the very batches of ioprof's window (what counting the loop's
waits alone gives: the queue drains there) and ioprof's figure.

Shapes: 4 workers and 8 workers feeding 88–93 % of the loop, and 4 workers that outpace it
(the queue only fills: the loop's own figures stand).

Not a test: it prints and saves its figures (reports/benchmarks/first_step.json).

    python benchmarks/bench_first_step.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import figures  # noqa: E402
from groundtruth import ioprof_window, own_wait_share  # noqa: E402

SCRIPT = REPO / "tests" / "scripts" / "train_slow_first_step.py"
SHAPES = {
    "4 workers, 22.5 ms a sample, 40 ms step": ("--workers", "4"),
    "8 workers, 22.2 ms a sample, 20 ms step": ("--workers", "8", "--sample", "0.0222", "--step", "0.02"),
    "4 workers ahead of a 60 ms step": ("--workers", "4", "--step", "0.06"),
}
STEPS = 900  # the truth is the second half: the queue drains at the share of the step the workers
# cannot feed, 8 % of a batch a step at 8 workers: 16 batches take some 200 steps


def _one(tmp: Path, name: str, args: tuple[str, ...]) -> dict[str, Any]:
    out = tmp / name
    out.mkdir()
    record = out / "own.json"
    cmd = [sys.executable, "-m", "ioprof", "run", "--no-probe", "--out", str(out), "--"]
    cmd += [sys.executable, str(SCRIPT), "--steps", str(STEPS), "--record", str(record), *args]
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    own = json.loads(record.read_text())
    cell, window = ioprof_window(json.loads((out / "results.json").read_text()))
    v = cell["verdict"]
    return {
        "truth_wait_share": round(own_wait_share(own, slice(STEPS // 2, None)), 4),
        "loop_own_in_window": round(own_wait_share(own, window), 4),
        "ioprof_wait_share": [
            round(v[k], 4) for k in ("data_wait_share", "wait_share_low", "wait_share_high")
        ],
        "ioprof_class": v["input_bound"],
        "window": [window.start, window.stop],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    out = figures.shapes("first_step", "python benchmarks/bench_first_step.py", SHAPES, _one, a.rounds)
    figures.save(out, REPO / "reports" / "benchmarks" / "first_step.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
