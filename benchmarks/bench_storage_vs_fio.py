"""Compares ioprof's storage probe with fio on the same files, same concurrency, cold.

Not a test: prints the figures and saves them to reports/benchmarks/storage_vs_fio.json.
Target: ioprof within 15 % of fio. The files are 400 of 128 KiB each (near ImageNet's mean
file): fio gives every file of a job the same I/O size, so only on equal-sized files does it
read each file whole, as the probe and a DataLoader do. Needs fio (Debian package ``fio``). As root it also
compares on a loop-device filesystem throttled by the blkio cgroup (deterministic storage);
the local disk of a VM is cached by its host, so those figures move from run to run.

    python benchmarks/bench_storage_vs_fio.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import figures  # noqa: E402

from ioprof.host.pagecache import evict, filesystem_of  # noqa: E402
from ioprof.measure.storage import probe_storage  # noqa: E402

CONCURRENCY = (1, 4, 8)
FILES = 400
FILE_BYTES = 128 * 1024
TARGET = 0.15


def fio_read_mb_per_s(paths: list[str], jobs: int) -> float:
    """fio, buffered psync reads of whole files (64 KiB blocks: fio needs bs ≤ file size), split across ``jobs`` jobs."""
    evict(paths)
    lines = [
        "[global]",
        "rw=read",
        "bs=64k",
        "ioengine=psync",
        "direct=0",
        "invalidate=1",
        "file_service_type=sequential",
        "group_reporting=1",
    ]
    lines.append(f"directory={Path(paths[0]).parent}")  # fio caps an option at 4096 characters
    for j in range(jobs):
        mine = paths[j::jobs]
        lines += [f"[reader{j}]", "filename=" + ":".join(Path(p).name for p in mine)]
    with tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        jobfile = f.name
    try:
        out = subprocess.run(
            ["fio", "--output-format=json", jobfile], capture_output=True, text=True, check=True
        )
    finally:
        os.unlink(jobfile)
    data = json.loads(out.stdout)
    read = data["jobs"][0]["read"]
    return read["io_bytes"] / 1e6 / (read["runtime"] / 1e3)


def compare(paths: list[str], where: str) -> list[dict]:
    fs = filesystem_of(paths[0])
    rows = []
    for c in CONCURRENCY:
        ours = [probe_storage(paths, c, fs, "cold", seed=i).read_mb_per_s for i in range(3)]
        theirs = [fio_read_mb_per_s(paths, c) for _ in range(3)]
        o, t = sorted(ours)[1], sorted(theirs)[1]  # medians of three, taken side by side
        rows.append(
            {
                "where": where,
                "concurrency": c,
                "ioprof_mb_per_s": round(o, 2),
                "fio_mb_per_s": round(t, 2),
                "ratio": round(o / t, 3),
                "within_target": abs(o / t - 1) <= TARGET,
            }
        )
        print(f"{where:28s} readers={c}: ioprof {o:8.1f} MB/s   fio {t:8.1f} MB/s   ratio {o / t:.3f}")
    return rows


def main() -> int:
    if shutil.which("fio") is None:
        print("fio is not installed: apt-get install fio", file=sys.stderr)
        return 1
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ioprof-fio-", dir=str(REPO)) as tmp:
        root = Path(tmp) / "files"  # flat, short names: one fio option lists a job's files
        root.mkdir()
        for i in range(FILES):
            (root / f"{i:03d}.bin").write_bytes(os.urandom(FILE_BYTES))
        paths = sorted(str(p) for p in root.iterdir())
        rows += compare(paths, "local disk (VM, host-cached)")
        import slowdisk

        if not slowdisk.unavailable():
            with slowdisk.slow_disk(Path(tmp), read_bytes_per_s=20_000_000, size_mb=160) as disk:
                shutil.copytree(root, disk.mountpoint / "files")
                os.sync()
                slow = sorted(str(p) for p in (disk.mountpoint / "files").iterdir())[:120]
                disk.join()  # this process's reads are now throttled at 20 MB/s
                rows += compare(slow, "loop ext4, blkio 20 MB/s")
        else:
            print(f"throttled comparison skipped: {slowdisk.unavailable()}")
    figures.save(
        {
            "benchmark": "ioprof storage probe vs fio, same files (400 x 128 KiB), same concurrency, cold, "
            "medians of 3",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "fio": subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip(),
            "target": f"within {TARGET:.0%} of fio",
            "rows": rows,
        },
        REPO / "reports" / "benchmarks" / "storage_vs_fio.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
