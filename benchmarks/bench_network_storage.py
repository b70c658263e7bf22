"""ioprof on real network storage: an sshfs mount over a rate-limited link (needs root).

Not a test: it prints and saves its figures (reports/benchmarks/network_storage.json) and writes
the example report reports/examples/sshfs-80mbit-sim-h100/. The mount is the tests' own
(tests/netfs.py): sshfs to an sshd in a network namespace whose loopback is shaped by tc tbf.
It compares what a plain reader gets over the link with ioprof's storage ceiling and with the
bytes each end-to-end cell fetched (goal: within 10 %), and records the verdict.

    sudo python benchmarks/bench_network_storage.py
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

RATE_MBIT = 80
EXAMPLE = REPO / "reports" / "examples" / "sshfs-80mbit-sim-h100"


def main() -> int:
    why = netfs.unavailable()
    if why:
        print(f"bench_network_storage: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ioprof-net-") as tmp, netfs.net_mount(Path(tmp), RATE_MBIT) as m:
        data = m.serve(DatasetSpec(500, 375, 400), "imagenet-like")
        plain = netfs.plain_read(data).bytes_per_s / 1e6
        shutil.rmtree(EXAMPLE, ignore_errors=True)
        cmd = [
            sys.executable,
            "-m",
            "ioprof",
            "sweep",
            "--data",
            str(data),
            "--workers",
            "1,2,4",
            "--compute",
            "sim:h100",
            "--out",
            str(EXAMPLE),
        ]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        print(p.stderr[-3000:])
        if p.returncode != 0:
            return p.returncode
    r = json.loads((EXAMPLE / "results.json").read_text())
    storage = {s["concurrency"]: round(s["read_mb_per_s"], 2) for s in r["ceilings"][0]["storage"]}
    cells = {
        f"{c['loader']} {c['workers']}": {
            "img_per_s": round(c["img_per_s"], 1),
            "data_wait_share": round(c["data_wait_share"], 3),
            "verdict": f"{c['verdict']['bottleneck']} ({c['verdict']['input_bound']})",
            "fetched_mb_per_s": round(c["fetched_mb_per_s"], 2),
            "fetched_method": c["fetched"]["method"],
            "ratio_to_plain_reader": round(c["fetched_mb_per_s"] / plain, 3),
        }
        for c in r["cells"]
    }
    figures.save(
        {
            "benchmark": f"sshfs over a {RATE_MBIT} Mbit/s link (tc tbf in a network namespace), 400 generated "
            "500x375 JPEGs (mean 123 kB), sweep --workers 1,2,4 --compute sim:h100",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "plain_reader_mb_per_s": round(plain, 2),
            "storage_ceiling_mb_per_s_by_readers": storage,
            "cells": cells,
            "verdict": f"{r['analysis']['overall_bottleneck']} ({r['analysis']['overall_input_bound']})",
            "decode_ceiling_img_per_s": {
                f"{d['loader']} {d['workers']}": round(d["img_per_s"], 1) for d in r["ceilings"][0]["decode"]
            },
            "sweep_wall_s": round(wall, 1),
            "example_report": str(EXAMPLE.relative_to(REPO)),
        },
        REPO / "reports" / "benchmarks" / "network_storage.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
