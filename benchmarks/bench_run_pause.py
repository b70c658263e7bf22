"""How long `ioprof run` pauses a user's training for its probe, on the tests' slow link (needs root).

Not a test: it prints and saves its figures (reports/benchmarks/run_pause.json). The rig is the
tests' own (tests/support/netfs.py): an sshfs mount and an HTTP server behind one 8 Mbit/s link
(about 1 MB/s), with the datasets the end-to-end tests read. Three scripts, unchanged, each under
`ioprof run --probe-seconds 2`: timm's train.py (persistent workers: its probe's workers come from
a fork server), a Hugging Face dataset (one Arrow file) and a dataset reading members of one zip.
For each: the pause the script was stopped for, and where it went (the probe's own phases; the
rest is describing the dataset).

    sudo python benchmarks/bench_run_pause.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import figures  # noqa: E402
import netfs  # noqa: E402

RATE_MBIT = 8.0


def _scripts() -> list[str]:
    names = ["zip"]
    try:
        import timm  # noqa: F401

        names.append("timm")
    except ImportError:
        print("bench_run_pause: timm is not installed: its script is left out", file=sys.stderr)
    try:
        import datasets  # noqa: F401

        names.append("hf")
    except ImportError:
        print("bench_run_pause: datasets is not installed: its script is left out", file=sys.stderr)
    return names


def main() -> int:
    why = netfs.unavailable()
    if why:
        print(f"bench_run_pause: {why}", file=sys.stderr)
        return 2
    rows: dict[str, dict[str, object]] = {}
    with netfs.served_rig("ioprof-pause-", RATE_MBIT) as (served, work):
        for name in _scripts():
            script = netfs.script_argv(name, served, work)
            out = work / name
            cmd = [sys.executable, "-m", "ioprof", "run", "--probe-seconds", "2", "--warmup-steps", "1"]
            cmd += ["--out", str(out), "--", sys.executable, *script]
            t0 = time.perf_counter()
            p = subprocess.run(
                cmd, cwd=work, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True
            )
            wall = time.perf_counter() - t0
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                return p.returncode
            observed = [json.loads(f.read_text()) for f in sorted((out / "observed").glob("*.json"))]
            probed = next(o for o in observed if o.get("probes"))
            phases = {k: round(v, 2) for k, v in probed["probes"]["phases_s"].items()}
            pause = probed["probe_pause_s"]
            rows[name] = {
                "probe_pause_s": round(pause, 2),
                "probe_phases_s": phases,
                "describing_the_dataset_s": round(pause - sum(phases.values()), 2),
                "start_note": probed["probes"].get("start_note", ""),
                "verdict": json.loads((out / "results.json").read_text())["analysis"]["overall_bottleneck"],
                "script_wall_s": round(wall, 1),
            }
            print(f"{name}: paused {pause:.1f} s {phases}")
    figures.save(
        {
            "benchmark": "ioprof run's pause for its probe (--probe-seconds 2) on an 8 Mbit/s sshfs link "
            "(tc tbf in a network namespace): timm's train.py, a Hugging Face dataset, a zip of JPEGs",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "plain_reader_mb_per_s": round(served.plain_mb_per_s, 3),
            "runs": rows,
            "before": "the same three in the e2e tests' run (CI log, 2026-11-25, --probe-seconds 2) before three changes: the fork server now imports the workers' modules once; a file read alone comes in 1 MB pieces (was 4 MB); whether pages are kept is told from 1 MB (was 8 MB). Then: timm 14.3 s, hf 10.5 s, zip 4.8 s",
        },
        REPO / "reports" / "benchmarks" / "run_pause.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
