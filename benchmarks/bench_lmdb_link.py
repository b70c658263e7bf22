"""An LMDB database on an sshfs mount behind a shaped link, under `ioprof run` (needs root).

Not a test: it prints and saves its figures (reports/benchmarks/lmdb_link.json). The rig is the
tests' own (tests/support/netfs.py): an sshfs mount behind ``--rate`` Mbit/s. The database is
written by thecml/pytorch-lmdb's own ``folder2lmdb.py`` into the mount's export, and that
repository's ``main.py`` trains on it, unchanged, under ``ioprof run --stop-after``: its dataset
opens the database in each worker and reads it through its memory map. Beside ioprof's figures,
taken outside it:

- a plain reader over the same mount: py-lmdb in a process of its own, reading random records
  cold (``readahead=False``, one at a time), as the dataset does — the storage's MB/s;
- the link's own byte count (the namespace's loopback) over the whole run.

    sudo python benchmarks/bench_lmdb_link.py [--rate 8] [--images 6144]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import figures  # noqa: E402
import netfs  # noqa: E402

from ioprof.datasets.synth import DatasetSpec, generate  # noqa: E402
from ioprof.host.pagecache import evict  # noqa: E402

THIRDPARTY = REPO / "tests" / "scripts" / "thirdparty" / "pytorch_lmdb"
PLAIN_RECORDS = 150

# a plain reader: random records of the database, cold, one at a time, through py-lmdb's map
_PLAIN = """
import lmdb, pickle, random, sys, time
env = lmdb.open(sys.argv[1], subdir=False, readonly=True, lock=False, readahead=False)
with env.begin() as txn:
    keys = pickle.loads(txn.get(b"__keys__"))
    picked = random.Random(1).sample(keys, int(sys.argv[2]))
    t0 = time.perf_counter()
    total = sum(len(txn.get(k)) for k in picked)
    print(total, time.perf_counter() - t0)
"""


def _plain(db: Path) -> dict[str, float]:
    evict([db])
    p = subprocess.run(
        [sys.executable, "-c", _PLAIN, str(db), str(PLAIN_RECORDS)],
        capture_output=True,
        text=True,
        check=True,
    )
    total, seconds = (float(x) for x in p.stdout.split())
    return {
        "records": PLAIN_RECORDS,
        "bytes": total,
        "seconds": round(seconds, 2),
        "mb_per_s": total / seconds / 1e6,
    }


def _pretrained(home: Path) -> None:
    import torch
    import torchvision

    hub = home / "hub" / "checkpoints"
    hub.mkdir(parents=True, exist_ok=True)
    url = torchvision.models.ResNet18_Weights.IMAGENET1K_V1.url
    torch.save(torchvision.models.resnet18().state_dict(), hub / url.rsplit("/", 1)[1])


def _run(mount: netfs.NetMount, db: Path, folder: Path, work: Path) -> dict[str, Any]:
    out = work / "run"
    link = mount.link_bytes()
    evict([db])
    before, t0 = link(), time.perf_counter()
    cmd = [sys.executable, "-m", "ioprof", "run", "--steps", "8", "--warmup-steps", "0"]
    cmd += ["--probe-seconds", "8", "--stop-after", "--out", str(out), "--", sys.executable]
    cmd += [str(THIRDPARTY / "main.py"), "-f", str(folder), "-l", str(db)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TORCH_HOME": str(work / "torch")}
    p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    carried, wall = link() - before, time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(p.stderr[-3000:])
    r = json.loads((out / "results.json").read_text())
    (ceilings,) = [c for c in r["ceilings"] if c["dataset"] == "loader 1"]
    cell = next(c for c in r["cells"] if c["dataset"] == "loader 1")
    storage = ceilings["storage"][0] if ceilings["storage"] else None
    decode = [d for d in ceilings["decode"] if d["loader"] == "multiprocess"]
    report = (out / "report.md").read_text()
    (observed,) = [json.loads(f.read_text()) for f in sorted((out / "observed").glob("*.json"))][:1]
    probe = observed["probes"]
    return {
        "verdict": report.split("\n\n")[1].strip() if "\n\n" in report else "",
        "bottleneck": cell["verdict"]["bottleneck"],
        "input_bound": cell["verdict"]["input_bound"],
        "data_wait_share": round(cell["verdict"]["data_wait_share"], 3),
        "img_per_s": round(cell["img_per_s"], 1),
        "storage_read_alone_mb_per_s": None if storage is None else round(storage["read_mb_per_s"], 3),
        "storage_read_alone_img_per_s": None if storage is None else round(storage["img_per_s"], 1),
        "storage_records_read": None if storage is None else storage["files"],
        "storage_cache": None if storage is None else storage["cache"],
        "probe_notes": r["script"].get("probe_notes"),
        "bytes_per_sample": None if storage is None else storage["bytes_per_sample"],
        "decode_img_per_s": {str(d["workers"]): round(d["img_per_s"], 1) for d in decode},
        "decode_copy": decode[0]["cache"]["note"] if decode else None,
        "fetched_in_window_mb": None
        if cell["fetched"]["bytes"] is None
        else round(cell["fetched"]["bytes"] / 1e6, 2),
        "fetched_method": cell["fetched"]["method"],
        "link_carried_over_the_run_mb": round(carried / 1e6, 2),
        "probe_phases_s": {k: round(v, 2) for k, v in probe["phases_s"].items()},
        "probe_read_back_mb": round((probe.get("read_back") or {}).get("bytes", 0) / 1e6, 2),
        "run_wall_s": round(wall, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=8.0, help="the link's rate, Mbit/s")
    ap.add_argument("--images", type=int, default=6144, help="images of 160x120 in the database")
    args = ap.parse_args()
    why = netfs.unavailable()
    if why:
        print(f"bench_lmdb_link: {why}", file=sys.stderr)
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="ioprof-lmdb-") as tmp,
        netfs.net_mount(Path(tmp), args.rate) as m,
    ):
        generate(DatasetSpec(160, 120, args.images, seed=0), m.export / "train")
        subprocess.run(
            [sys.executable, str(THIRDPARTY / "folder2lmdb.py"), "-f", str(m.export), "-s", "train"],
            check=True,
            capture_output=True,
        )
        os.sync()
        db = m.mountpoint / "train.lmdb"
        work = Path(tmp) / "work"
        work.mkdir()
        _pretrained(work / "torch")
        plain = _plain(db)
        print("plain reader over the mount:", plain, flush=True)
        run = _run(m, db, m.mountpoint / "train", work)
        print("ioprof run:", run, flush=True)
        size = db.stat().st_size
    figures.save(
        {
            "benchmark": "thecml/pytorch-lmdb's main.py over an LMDB database on sshfs behind a shaped link, "
            "under `ioprof run`, against a plain reader of random records over the same mount",
            "command": "sudo python benchmarks/bench_lmdb_link.py --rate R --images N",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "rate_mbit": args.rate,
            "images": args.images,
            "database_bytes": size,
            "plain_reader": plain,
            "run": run,
            "storage_over_plain": None
            if run["storage_read_alone_mb_per_s"] is None
            else round(run["storage_read_alone_mb_per_s"] / plain["mb_per_s"], 2),
        },
        REPO / "reports" / "benchmarks" / "lmdb_link.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
