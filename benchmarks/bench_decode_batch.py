"""Decode ceilings in smaller batches against one in the training's batch (256), side by side.

Not a test: prints the figures and saves them to reports/benchmarks/decode_batch.json.
The question (issue 31): a decode ceiling may read in fewer images a batch than the training
(``decode.probe_batch``) so that its interval has whole turns of the workers to read; what does a
smaller batch cost per image? Decode, augment and the collate's copy are per image; the collate's
allocation and the hand-over of the batch to the main process are per batch. Each batch size runs
the same in-memory sample at the same setting for the same span after its start-up burst, in turn,
``--repeats`` times (the order reversed every other time); the medians are compared with the
largest's, and every run's rate is kept with its interval. Each row also says which batch ioprof
picks there, from the row before's rate per reader (as a sweep's ceilings run: in this order).

    python benchmarks/bench_decode_batch.py                      # a GPU host's settings
    python benchmarks/bench_decode_batch.py --settings 256x192:0,256x192:2 --span-s 4 --batches 8,32
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

import ioprof.measure.decode as decode  # noqa: E402
from ioprof.core.config import LoaderSetting  # noqa: E402
from ioprof.datasets.discover import find_images  # noqa: E402
from ioprof.datasets.synth import DatasetSpec, generate  # noqa: E402
from ioprof.host.pagecache import filesystem_of  # noqa: E402
from ioprof.measure.sample import load_sample  # noqa: E402

CROP = 224


def one(sample, setting: LoaderSetting, batch: int, span_s: float, seed: int) -> dict:
    decode.DECODE_PROBE_MIN_BATCH = batch  # with no rate before it, probe_decode reads in this many
    d = decode.probe_decode(
        sample, setting, crop_px=CROP, batch_size=batch, seed=seed, min_seconds=span_s, max_seconds=span_s
    )
    t = d.throughput()
    return {
        "img_per_s": round(d.img_per_s, 1),
        "low": round(t.low, 1) if t.known else None,
        "high": round(t.high, 1) if t.known else None,
        "batches": len(d.batch_s),
        "elapsed_s": round(d.elapsed_s, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--settings", default="256x192:1,256x192:8,1024x768:8", help="WxH:workers,...")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--span-s", type=float, default=12.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batches", default="32,128,256", help="batch sizes; the last is the training's")
    ap.add_argument("--out", default=str(REPO / "reports" / "benchmarks" / "decode_batch.json"))
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    big = batches[-1]
    picks, least = decode.probe_batch, decode.DECODE_PROBE_MIN_BATCH  # ``one`` moves the least batch
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ioprof-batch-") as tmp:
        samples = {}
        for item in a.settings.split(","):
            res, workers = item.split(":")
            if res not in samples:
                w, h = (int(x) for x in res.split("x"))
                root = Path(tmp) / res
                generate(DatasetSpec(w, h, a.images), root)
                samples[res] = load_sample(find_images(root), filesystem_of(root), seed=0)
            setting = LoaderSetting.multiprocess(int(workers)) if int(workers) else LoaderSetting.serial()
            before = rows[-1] if rows and rows[-1]["resolution"] == res else None
            per_reader = (
                before[f"batch_{big}_median_img_per_s"] / max(1, before["workers"]) if before else None
            )
            decode.DECODE_PROBE_MIN_BATCH = least
            chosen = picks(big, setting, per_reader)
            runs: dict[int, list[dict]] = {b: [] for b in batches}
            for r in range(a.repeats):
                for batch in batches if r % 2 == 0 else batches[::-1]:
                    runs[batch].append(one(samples[res], setting, batch, a.span_s, seed=r))
            med = {b: statistics.median(x["img_per_s"] for x in v) for b, v in runs.items()}
            row: dict = {
                "resolution": res,
                "workers": int(workers),
                "sample_files": samples[res].files,
                "ioprof_picks": chosen,
            }
            for b in batches:
                row[f"batch_{b}_median_img_per_s"] = med[b]
                row[f"batch_{b}_to_{big}"] = round(med[b] / med[big], 3)
            for b in batches:
                row[f"batch_{b}_runs"] = runs[b]
            rows.append(row)
            print(
                f"{res} {workers} workers (ioprof picks {row['ioprof_picks']}): "
                + ", ".join(f"batch {b} {med[b]:,.1f} img/s ({med[b] / med[big]:.3f})" for b in batches),
                flush=True,
            )
    figures.save(
        {
            "benchmark": f"decode ceiling in batches of {a.batches}, same in-memory sample, crop {CROP}, "
            f"{a.span_s:g} s each after the burst, medians of {a.repeats} alternating runs",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": f"{os.cpu_count()} cores",
            "command": "python benchmarks/bench_decode_batch.py " + " ".join(sys.argv[1:]),
            "rows": rows,
        },
        Path(a.out),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
