"""`in_order=False` against the in-order DataLoader, on a folder where 2 % of the photographs are
far larger than the rest (each takes about 15-20 times the median sample to decode and crop).

Not a test: it prints and saves its figures (reports/benchmarks/in_order.json). It writes the
folder (200 photographs: 196 at 500x375, 4 at 3200x2400), then runs
`ioprof whatif --only in_order` on it, 2 workers, a simulated step fast enough that the loader is
input-bound, and keeps both rates with their intervals and the verdict.

    python benchmarks/bench_in_order.py [--seconds 25] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402

IMAGES, LARGE_EVERY = 200, 50  # one in 50 photographs is large: 2 %


def _folder(root: Path) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for i in range(IMAGES):
        large = i % LARGE_EVERY == 7
        w, h = (3200, 2400) if large else (500, 375)
        folder = root / f"c{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        base = rng.integers(0, 255, (h // 8, w // 8, 3), dtype=np.uint8)
        Image.fromarray(base).resize((w, h), Image.BILINEAR).save(folder / f"{i:04d}.jpg", quality=90)


def _one(data: Path, out: Path, seconds: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "ioprof", "whatif", "--data", str(data), "--workers", "2"]
    cmd += ["--compute", "sim:400", "--only", "in_order", "--seconds", str(seconds), "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(p.stderr[-3000:])
    r = json.loads((out / "results.json").read_text())
    rates = {}
    for a in r["alternatives"]:
        if a["measured"]:
            c = a["cell"]
            rates[a["name"]] = [
                round(c["img_per_s"], 1),
                round(c["img_per_s_low"], 1),
                round(c["img_per_s_high"], 1),
            ]
    ranked = {x["name"]: x for x in r["ranking"]["ranked"]}
    row = {
        "img_per_s [low, high]": rates,
        "gain": round(ranked["in_order"]["gain"], 2),
        "beyond_noise": ranked["in_order"]["beyond_noise"],
        "best": r["ranking"]["best"],
    }
    print(row, flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ioprof-in-order-") as tmp:
        data = Path(tmp) / "data"
        _folder(data)
        rows = [_one(data, Path(tmp) / f"out-{i}", args.seconds) for i in range(args.repeats)]
    figures.save(
        {
            "benchmark": "in_order=False against the in-order DataLoader (ioprof whatif), 2 workers, on 200 "
            "photographs of which 2 % are 3200x2400 and the rest 500x375, a simulated 400 img/s step",
            "command": f"python benchmarks/bench_in_order.py --seconds {args.seconds:g} --repeats {args.repeats}",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "runs": rows,
        },
        REPO / "reports" / "benchmarks" / "in_order.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
