"""The serial loader's decode ceiling in small batches and in the training's, against its own cell.

A decode ceiling may read in fewer images a batch than the training (``decode.probe_batch``) to
get more batches into its seconds. Where a batch is handed over by workers, its cost per image
was measured side by side (``bench_decode_batch.py``); the serial loader hands nothing over, and
was read in batches of 32 on the assumption that its work per image does not depend on the batch.
This checks that against the cell it predicts: in one process, in turn, the serial ceiling in
batches of ``--small`` and of the training's ``--batch``, then the serial cell at that batch from
the page cache (no storage in it) with a simulated accelerator's step — whose rate the ceilings
predict as the ceiling and the step in series. The figure per batch is the median of the rounds'
cell ÷ prediction: 1.00 where the ceiling does the cell's work per image.

Not a test: prints and saves its figures (reports/benchmarks/serial_batch.json).

    python benchmarks/bench_serial_batch.py [--rounds 3] [--resolutions 256x192,500x375]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402

from ioprof.commands.values import parse_compute  # noqa: E402
from ioprof.core.config import LoaderSetting, RunLength  # noqa: E402
from ioprof.datasets.dataset import load_datasets  # noqa: E402
from ioprof.datasets.synth import DatasetSpec, generate  # noqa: E402
from ioprof.host.telemetry import UnavailableSampler  # noqa: E402
from ioprof.measure.cell import CellPlan, Failures, run_cell  # noqa: E402
from ioprof.measure.compute import SimulatedStep  # noqa: E402
from ioprof.measure.decode import probe_decode  # noqa: E402
from ioprof.measure.sample import load_sample  # noqa: E402

CROP = 224
COMPUTE = "sim:h200"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--resolutions", default="256x192,500x375")
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--small", type=int, default=32)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--span-s", type=float, default=5.0, help="each ceiling's seconds")
    a = ap.parse_args()
    compute = parse_compute(COMPUTE)
    step = SimulatedStep(compute)
    rate = compute.sim_img_per_s or 0.0
    serial = LoaderSetting.serial()
    run = RunLength(
        batch_size=a.batch, warmup_steps=1, min_steps=5, max_steps=5, max_seconds=None, fixed=True
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="ioprof-serial-batch-") as tmp:
        for res in a.resolutions.split(","):
            w, h = (int(x) for x in res.split("x"))
            root = Path(tmp) / res
            generate(DatasetSpec(w, h, a.images), root)
            (ds,) = load_datasets(str(root), (), 0, seed=0, cache_dir=None, progress=lambda *_: None)
            sample = load_sample(ds.images, ds.fs, seed=0)
            plan = CellPlan(dataset=ds, setting=serial, run=run, crop_px=CROP, regime="warm", inside=False)
            rounds = []
            for r in range(a.rounds):
                got = {}
                for b in (a.small, a.batch) if r % 2 == 0 else (a.batch, a.small):
                    d = probe_decode(
                        sample,
                        serial,
                        crop_px=CROP,
                        batch_size=b,
                        seed=r,
                        min_seconds=a.span_s,
                        max_seconds=a.span_s,
                    )
                    got[b] = d.img_per_s
                cell = run_cell(plan, step, gpu=UnavailableSampler("cpu"), failures=Failures())
                predicted = {b: 1 / (1 / v + 1 / rate) for b, v in got.items()}
                rounds.append(
                    {
                        f"ceiling_batch_{a.small}_img_per_s": round(got[a.small], 1),
                        f"ceiling_batch_{a.batch}_img_per_s": round(got[a.batch], 1),
                        "cell_img_per_s": round(cell.img_per_s, 1),
                        f"cell_over_predicted_from_{a.small}": round(cell.img_per_s / predicted[a.small], 3),
                        f"cell_over_predicted_from_{a.batch}": round(cell.img_per_s / predicted[a.batch], 3),
                    }
                )
                print(f"{res} round {r + 1}: {rounds[-1]}", flush=True)
            row = {"resolution": res, "sample_files": sample.files, "rounds": rounds}
            for b in (a.small, a.batch):
                key = f"cell_over_predicted_from_{b}"
                row[f"{key}_median"] = statistics.median(x[key] for x in rounds)
            rows.append(row)
            print(
                f"{res}: cell ÷ predicted, median of {a.rounds}: from batches of {a.small} "
                f"{row[f'cell_over_predicted_from_{a.small}_median']:.3f}, of {a.batch} "
                f"{row[f'cell_over_predicted_from_{a.batch}_median']:.3f}",
                flush=True,
            )
    figures.save(
        {
            "benchmark": f"the serial loader's decode ceiling in batches of {a.small} and {a.batch} against its cell at "
            f"{a.batch} from the page cache with {COMPUTE}'s step, in turn in one process, {a.rounds} rounds; "
            "cell ÷ (ceiling and step in series)",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": f"{os.cpu_count()} cores",
            "command": "python benchmarks/bench_serial_batch.py " + " ".join(sys.argv[1:]),
            "rows": rows,
        },
        REPO / "reports" / "benchmarks" / "serial_batch.json",
    )


if __name__ == "__main__":
    main()
