"""ioprof scale on real shared network storage: how many emulated accelerators an sshfs mount over a
16 Mbit/s link feeds (needs root).

Not a test: it prints and saves its figures (reports/benchmarks/scale_network.json) and writes the
example report reports/examples/scale-sshfs-16mbit/. The mount is the tests' own (tests/netfs.py).
Each rank's emulated accelerator is set to consume 40 % of what a plain reader gets over the link,
so two ranks should be fed and the third stopped by the storage; the figures say whether ioprof
finds that, and how close the ranks' bytes fetched come to the link.

    sudo python benchmarks/bench_scale.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import figures  # noqa: E402
import netfs  # noqa: E402

from ioprof.datasets.synth import DatasetSpec  # noqa: E402

RATE_MBIT = 16
SHARE_PER_RANK = 0.4
EXAMPLE = REPO / "reports" / "examples" / "scale-sshfs-16mbit"


def main() -> int:
    why = netfs.unavailable()
    if why:
        print(f"bench_scale: {why}", file=sys.stderr)
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="ioprof-scale-") as tmp,
        netfs.net_mount(Path(tmp), RATE_MBIT) as m,
    ):
        data = m.serve(DatasetSpec(500, 375, 400), "imagenet-like")
        plain = netfs.plain_read(data, files=60)
        link = plain.bytes_per_s
        rate = SHARE_PER_RANK * link / plain.mean_file_bytes
        shutil.rmtree(EXAMPLE, ignore_errors=True)
        cmd = [
            sys.executable,
            "-m",
            "ioprof",
            "scale",
            "--data",
            str(data),
            "--compute",
            f"sim:{rate:.1f}",
            "--ranks",
            "1,2,3",
            "--workers",
            "2",
            "--batch-size",
            "4",
            "--steps",
            "30",
            "--cache",
            "cold",
            "--out",
            str(EXAMPLE),
        ]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        print(p.stderr[-4000:])
        print(p.stdout)
        if p.returncode != 0:
            return p.returncode
    shutil.rmtree(EXAMPLE / "logs", ignore_errors=True)
    r = json.loads((EXAMPLE / "results.json").read_text())
    counts = {
        str(c["ranks"]): {
            "status": c["status"],
            "aggregate_img_per_s": round(c["aggregate_img_per_s"], 1) if c["status"] == "ok" else None,
            "fetched_mb_per_s": round(c["fetched_mb_per_s"], 2) if c.get("fetched_mb_per_s") else None,
            "storage_alone_mb_per_s": round(c["storage"]["read_mb_per_s"], 2) if c.get("storage") else None,
            "data_wait_per_rank": [round(x["cell"]["data_wait_share"], 3) for x in c["per_rank"]],
        }
        for c in r["counts"]
    }
    figures.save(
        {
            "benchmark": f"ioprof scale on sshfs over a {RATE_MBIT} Mbit/s link (tc tbf in a network namespace), 400 "
            f"generated 500x375 JPEGs; each rank's emulated accelerator consumes {SHARE_PER_RANK:.0%} of the link",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "plain_reader_mb_per_s": round(link / 1e6, 2),
            "sim_img_per_s_per_rank": round(rate, 1),
            "counts": counts,
            "headline": p.stdout.strip().splitlines()[0],
            "expected": "2 ranks fed (80 % of the link), the 3rd stopped by the storage (120 %)",
            "wall_s": round(wall, 1),
            "example_report": str(EXAMPLE.relative_to(REPO)),
        },
        REPO / "reports" / "benchmarks" / "scale_network.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
