"""The slow samples' share of the loop's wait (``core.handover``) against the truth, in several
shapes of loop: the loop of ``tests/scripts/train_slow_samples.py`` (one sample in 50 twenty
times the others, in ``time.sleep``) under ``ioprof run``, against the same loop run alone with
and without its slow path — its own waits over the very batches of ioprof's window.

With ``in_order=False`` (batches handed over as they are made): the wait the replay gives
against the loop's own, run so alone, over the same batch positions.

Shapes: two workers the loop waits for (loader-bound); three workers a little ahead of a 20 ms
step; four workers well ahead of a 30 ms step (the loop waits only behind slow batches, and a
batch that is there costs it a receive whose time the replay takes from the run).

Not a test: it prints and saves its figures (reports/benchmarks/slow_samples.json).

    python benchmarks/bench_slow_samples.py [--rounds 2]
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

import figures  # noqa: E402

SCRIPT = REPO / "tests" / "scripts" / "train_slow_samples.py"
SHAPES = {
    "2 workers, loader-bound (step 15 ms)": ("--workers", "2", "--step", "0.015"),
    "3 workers, step 20 ms": ("--workers", "3", "--step", "0.02"),
    "4 workers, ahead of a 30 ms step": ("--workers", "4", "--step", "0.03"),
}
ENV = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}


def _loop(work: Path, name: str, *args: str, under_ioprof: bool) -> tuple[list[float], dict[str, Any] | None]:
    """The loop's own waits, and ioprof's results where it ran under ``ioprof run``."""
    record = work / f"{name}.json"
    command = [sys.executable, str(SCRIPT), "--record", str(record), "--samples", "1200", *args]
    if under_ioprof:
        out = work / name
        command = [sys.executable, "-m", "ioprof", "run", "--no-probe", "--out", str(out), "--", *command]
    subprocess.run(command, check=True, env=ENV, capture_output=True, timeout=600)
    waits = json.loads(record.read_text())["waits"]
    return waits, json.loads((out / "results.json").read_text()) if under_ioprof else None


def _one(work: Path, tag: str, args: tuple[str, ...]) -> dict[str, Any]:
    without, _ = _loop(work, f"{tag}-alone", *args, "--slow", "1", under_ioprof=False)
    unordered, _ = _loop(work, f"{tag}-unordered", *args, "--in-order", "0", under_ioprof=False)
    waits, result = _loop(work, f"{tag}-ioprof", *args, under_ioprof=True)
    assert result is not None
    (loader,) = result["loaders"]
    cell = next(c for c in result["cells"] if c["dataset"] == "loader 1")
    first, n = loader["before"]["batches"], len(cell["wait_s"])
    waited, alone = sum(waits[first : first + n]), sum(without[first : first + n])
    as_made = sum(unordered[first : first + n])
    slow = cell["inside"]["stages"]["per_sample"]["slow"]
    truth = 1 - alone / waited
    w = slow["wait"]
    return {
        "truth_share_of_wait": round(truth, 3),
        "ioprof_share_of_wait": round(w["value"], 3),
        "interval": [round(w["low"], 3), round(w["high"], 3)],
        "covers": w["low"] <= truth <= w["high"],
        "ratio": round(w["value"] / truth, 3) if truth > 0 else None,
        "loop_wait_s": [round(waited, 2), round(alone, 2)],
        "replayed_vs_measured_s": [round(slow["replayed_wait_s"], 2), round(slow["measured_wait_s"], 2)],
        # in_order=False: the wait the replay gives against the loop's own, run so
        "in_order_false_replayed_vs_loop_s": [round(slow["unordered_s"], 2), round(as_made, 2)],
        "batches": n,
        "finding": any(f["kind"] == "slow-samples" for f in result["analysis"]["findings"]),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    out = figures.shapes("slow_samples", "python benchmarks/bench_slow_samples.py", SHAPES, _one, a.rounds)
    figures.save(out, REPO / "reports" / "benchmarks" / "slow_samples.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
