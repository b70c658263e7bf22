"""What the storage read alone says of a tar read by member, against what timm's own loader gets.

Not a test: prints the figures and saves them to reports/benchmarks/archive_reads.json. On a
loop-device ext4 whose reads the blkio cgroup caps at so many a second (a cloud volume's IOPS), a
tar of small JPEGs: timm's ``ReaderImageInTar`` in a shuffled DataLoader taking its images' bytes
(``load_bytes``: no decode), cold, at 1, 2 and 4 workers, over as many samples as the read alone
takes; beside it, measured side by side in the same cgroup, ioprof's storage read alone member by
member at as many readers (what ``run`` reports now) and the archive read through at as many
readers, its MB/s turned into samples a second at the members' mean size (what it reported
before). Target: the read by member within 25 % of the loader's samples a second. Root only.

    python benchmarks/bench_archive_reads.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import figures  # noqa: E402
import slowdisk  # noqa: E402

from ioprof import sources  # noqa: E402
from ioprof.datasets.synth import DatasetSpec, generate  # noqa: E402

CAPS = (40, 160)  # reads a second
READERS = (1, 2, 4)
IMAGES = 1200  # 128x96 JPEGs, about 11 kB each
TARGET = 0.25

_MEASURE = """
import json, os, sys, time, torch
from timm.data import ImageDataset
from timm.data.readers.reader_image_in_tar import ReaderImageInTar
from ioprof import sources
archive, readers, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def cold():
    fd = os.open(archive, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)

ds = ImageDataset(archive, reader=ReaderImageInTar(archive), load_bytes=True)  # reads it through
cold()
loader = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=True, num_workers=readers)
for n, _ in enumerate(loader, 1):
    if n == 1:
        t0 = time.perf_counter()
    if n == count:
        break
got = (n - 1) / (time.perf_counter() - t0)
source = sources.find(ds)
member = sources.read_alone(source, readers, max_seconds=60)
whole = sources.read_alone(source, readers, max_seconds=60, in_order=True)
print(json.dumps({
    "loader_samples_per_s": round(got, 1),
    "by_member_samples_per_s": round(member.img_per_s, 1),
    "by_member_samples": member.files,
    "by_member_fetched_kb_per_sample": round(member.fetched.bytes / member.files / 1e3, 1) if member.fetched.bytes else None,
    "member_kb": round(member.bytes / member.files / 1e3, 1),
    "read_through_mb_per_s": round(whole.read_mb_per_s, 2),
    "read_through_samples_per_s": round(whole.read_mb_per_s * 1e6 / (member.bytes / member.files), 1),
}))
"""


def main() -> int:
    why = slowdisk.unavailable()
    if why:
        print(f"needs a throttled loop disk: {why}", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="ioprof-archive-") as tmp:
        src = Path(tmp) / "src"
        generate(DatasetSpec(128, 96, IMAGES, seed=0), src)
        for cap in CAPS:
            folder = Path(tmp) / f"cap{cap}"
            folder.mkdir()
            with slowdisk.slow_disk(folder, 10**9, read_iops=cap) as disk:
                archive = disk.mountpoint / "train.tar"
                with tarfile.open(archive, "w") as tar:
                    for image in sorted(src.rglob("*.jpg")):
                        tar.add(image, arcname=str(image.relative_to(src)))
                os.sync()
                for readers in READERS:
                    out = subprocess.run(
                        [
                            sys.executable,
                            "-c",
                            _MEASURE,
                            str(archive),
                            str(readers),
                            str(sources.READ_ALONE_ITEMS),
                        ],
                        capture_output=True,
                        text=True,
                        check=True,
                        preexec_fn=disk.join,
                        env={**os.environ, "PYTHONPATH": str(REPO)},
                    )
                    row = {"reads_per_s_cap": cap, "readers": readers, **json.loads(out.stdout)}
                    ratio = row["by_member_samples_per_s"] / row["loader_samples_per_s"]
                    row["by_member_vs_loader"] = round(ratio, 3)
                    row["read_through_vs_loader"] = round(
                        row["read_through_samples_per_s"] / row["loader_samples_per_s"], 1
                    )
                    row["within_target"] = abs(ratio - 1) <= TARGET
                    rows.append(row)
                    print(
                        f"cap {cap:4d} reads/s, {readers} reader(s): loader {row['loader_samples_per_s']:7.1f} "
                        f"samples/s; by member {row['by_member_samples_per_s']:7.1f} ({ratio:.2f}x); read through "
                        f"{row['read_through_samples_per_s']:9.1f} ({row['read_through_vs_loader']}x)"
                    )
    figures.save(
        {
            "benchmark": "timm's tar reader, shuffled, cold, on a loop ext4 capped in reads a second: its loader "
            "(load_bytes, no decode) against ioprof's storage read alone by member and read through, same "
            "readers, same cgroup",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "images": IMAGES,
            "target": f"by member within {TARGET:.0%} of the loader",
            "rows": rows,
        },
        REPO / "reports" / "benchmarks" / "archive_reads.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
