"""What looking inside the loader costs a sweep's cells, and whether its stages add up.

1. Overhead: the default sweep's resolutions (256x192, 500x375, 1024x768, generated), the serial
   loader and 2 workers, and a simulated step far faster than any loader here (sim:100000), so a
   cell's rate is the loader's own — the worst case for a per-sample cost. In one process, cells
   with the look inside and without (``CellPlan.inside``, what ``--no-inside`` sets) alternate
   within seconds of each other, 60 steps each (fixed windows), in both orders: this shared VM
   drifts ±10 % over minutes, so sweeps run minutes apart cannot show a 2 % cost. The figure per
   setting is the median of the pairs' img/s ratios (with ÷ without). Goal: ≥ 0.98. Beside it,
   the precise figure: the timers' own cost, measured in each worker, as a share of its time.
2. Sums: the workers' time per sample from the stage rows (every stage, ``rest of __getitem__``
   included) ÷ the time per sample the cell itself measured — the serial loader's waits per
   image; 2 workers × the window's seconds per image (both busy all the window).

Not a test: prints and saves its figures (reports/benchmarks/inside.json).

    python benchmarks/bench_inside.py [--pairs 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402

from ioprof.commands.values import parse_compute  # noqa: E402
from ioprof.core.config import LoaderSetting, RunLength  # noqa: E402
from ioprof.core.results import CellResult  # noqa: E402
from ioprof.datasets.dataset import load_datasets  # noqa: E402
from ioprof.datasets.synth import DatasetSpec, generate  # noqa: E402
from ioprof.host.telemetry import UnavailableSampler  # noqa: E402
from ioprof.measure.cell import CellPlan, Failures, run_cell  # noqa: E402
from ioprof.measure.compute import SimulatedStep  # noqa: E402

GOAL = 0.98
RESOLUTIONS = ((256, 192), (500, 375), (1024, 768))
STEPS = 60
BATCH = 16


def measured_per_sample(cell: CellResult) -> float:
    if cell.workers == 0:
        return sum(cell.wait_s) / cell.images
    return cell.workers * cell.elapsed_s / cell.images


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=8)
    pairs = ap.parse_args().pairs
    step = SimulatedStep(parse_compute("sim:100000"))
    run = RunLength(
        batch_size=BATCH, warmup_steps=3, min_steps=STEPS, max_steps=STEPS, max_seconds=None, fixed=True
    )
    ratios: dict[str, list[float]] = {}
    costs: dict[str, list[float]] = {}
    sums: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="ioprof-inside-") as tmp:
        for w, h in RESOLUTIONS:
            root = Path(tmp) / f"{w}x{h}"
            generate(DatasetSpec(w, h, 192), root)
            (ds,) = load_datasets(str(root), (), 0, seed=0, cache_dir=None, progress=lambda *_: None)
            for setting in (LoaderSetting.serial(), LoaderSetting.multiprocess(2)):
                key = f"{w}x{h} {setting.label}"
                plan = CellPlan(dataset=ds, setting=setting, run=run, crop_px=224, regime="warm")
                for i in range(pairs):
                    got = {}
                    for inside in (True, False) if i % 2 == 0 else (False, True):
                        got[inside] = run_cell(
                            replace(plan, inside=inside),
                            step,
                            gpu=UnavailableSampler("cpu"),
                            failures=Failures(),
                        )
                    ratios.setdefault(key, []).append(got[True].img_per_s / got[False].img_per_s)
                    stages = got[True].inside.stages if got[True].inside else None
                    if stages is not None:
                        costs.setdefault(key, []).append(
                            stages.timing_cost_s_per_sample / stages.worker_s_per_sample
                        )
                        sums.setdefault(key, []).append(
                            stages.worker_s_per_sample / measured_per_sample(got[True])
                        )
                print(
                    f"{key}: median ratio {statistics.median(ratios[key]):.3f} over {pairs} pairs", flush=True
                )
    medians = {k: statistics.median(v) for k, v in ratios.items()}
    figures.save(
        {
            "benchmark": "a sweep cell's cost of looking inside the loader: img/s with stage timing, memory and "
            "thread readings ÷ without, loader-bound cells (sim:100000), the default resolutions generated, "
            f"batch {BATCH}, {STEPS} steps a cell, serial and 2 workers; {pairs} pairs of cells alternating in one "
            "process; and the workers' time per sample from the stage rows ÷ the time per sample the cell measured",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "goal_with_over_without": GOAL,
            "img_per_s_ratio_median": medians,
            "img_per_s_ratios": ratios,
            "worst_median": min(medians.values()),
            "meets_goal": min(medians.values()) >= GOAL,
            "timers_cost_share_median": {k: statistics.median(v) for k, v in costs.items()},
            "stage_sum_over_measured_median": {k: statistics.median(v) for k, v in sums.items()},
        },
        REPO / "reports" / "benchmarks" / "inside.json",
    )


if __name__ == "__main__":
    main()
