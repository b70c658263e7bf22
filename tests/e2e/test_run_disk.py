"""``ioprof run`` on a real disk that caps its reads a second (a cloud volume's IOPS): a loop-device
ext4 filesystem whose reads the blkio cgroup holds to a count a second (``slowdisk``). Root only.

timm's ``train.py``, unchanged, over one ``.tar`` of images: its reader keeps the archive open in
each worker and reads one member at a time at its offset, in the order its random sampler asks. On
such a disk every member costs one read of the cap, whatever its size, while the archive read
through costs one for each readahead's 128 kB: the storage must be read alone as the loader reads
it, or it promises many times what a cold pass gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pace
import paths
import pytest
import slowdisk
from cli import ioprof

from ioprof import sources
from ioprof.datasets.synth import DatasetSpec, generate

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.link,  # the cap sets the pace, a third of what this host's core trains at
    pytest.mark.skipif(bool(slowdisk.unavailable()), reason=slowdisk.unavailable() or "ok"),
]

IMAGES = 640  # 128x96 JPEGs of about 13 kB: 40 batches of 16, one epoch

# timm's own reader over the archive, its images' bytes taken (no decode) by 2 workers in a shuffled
# DataLoader: the samples a second a cold pass gets from the disk, timed from its first sample, over
# as many samples as the storage read alone takes (a member shares its first and last page with its
# neighbours: over a whole epoch of a small archive more of them are found cached). The reader reads
# the whole archive through as it indexes it (timm scans a tar under 10 GB at start); its pages are
# dropped after, as a dataset larger than RAM would have lost them
_COLD_LOADER = """
import os, sys, time, torch
from timm.data import ImageDataset
from timm.data.readers.reader_image_in_tar import ReaderImageInTar
archive = sys.argv[1]
ds = ImageDataset(archive, reader=ReaderImageInTar(archive), load_bytes=True)
fd = os.open(archive, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
loader = torch.utils.data.DataLoader(ds, batch_size=None, shuffle=True, num_workers=2)
for n, (data, _) in enumerate(loader, 1):
    if n == 1:
        t0 = time.perf_counter()
    if n == int(sys.argv[2]):
        break
print((n - 1) / (time.perf_counter() - t0))
"""


def _cold(path: Path) -> None:
    """``path``'s pages written back and dropped: the next read of it comes from the disk."""
    os.sync()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_timms_tar_on_a_disk_capping_its_reads_is_read_alone_as_a_cold_pass_of_its_loader_gets_it(
    tmp_path: Path, figure: Callable[[str], None]
) -> None:
    """The cap set to a third of what this host trains at from a local copy (``pace``). timm reads
    the whole archive through as it indexes it, so this small one is in the page cache before the
    first batch, and the run's window fetches next to nothing from the disk. Its
    storage read alone — cold, member by member, at the training's 2 workers — is what timm's own
    loader gets from that disk in a cold pass without decoding (run before it in the same cgroup),
    short of what the training draws; the archive read through would promise many times more."""
    pytest.importorskip("timm", reason="timm is not installed (pip install -e '.[test]')")
    generate(DatasetSpec(128, 96, IMAGES, seed=0), tmp_path / "src")
    paced = pace.training_pace(
        tmp_path / "src", "timm's train.py", "mobilenetv3_small_050", 16, 96, timm_model=True
    )
    iops = max(4, round(paced.img_per_s / pace.MARGIN))
    with slowdisk.slow_disk(tmp_path, read_bytes_per_s=10**9, read_iops=iops) as disk:
        archive = disk.mountpoint / "train.tar"
        with tarfile.open(archive, "w") as tar:
            for image in sorted((tmp_path / "src").rglob("*.jpg")):
                tar.add(image, arcname=str(image.relative_to(tmp_path / "src")))
        _cold(archive)
        cold = subprocess.run(
            [sys.executable, "-c", _COLD_LOADER, str(archive), str(sources.READ_ALONE_ITEMS)],
            capture_output=True,
            text=True,
            timeout=300,
            preexec_fn=disk.join,
            check=True,
        )
        cold_rate = float(cold.stdout.split()[-1])
        _cold(archive)
        out = tmp_path / "o"
        p = ioprof(
            *("run", "--probe-seconds", "12", "--out", str(out), "--"),
            sys.executable,
            str(paths.SCRIPTS / "thirdparty" / "timm_train" / "train.py"),
            *"--model mobilenetv3_small_050 --device cpu --no-prefetcher -j 2 -b 16 --epochs 1 --img-size 96".split(),
            *("--output", str(tmp_path / "out"), "--data-dir", str(archive), "--num-classes", "4"),
            cgroup_procs=disk.cgroup_procs,
            timeout=600,
        )
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads((out / "results.json").read_text())
    train = r["loaders"][0]
    assert train["role"] == "training", train
    (cell,) = [c for c in r["cells"] if c["dataset"] == train["key"]]
    (ceilings,) = [c for c in r["ceilings"] if c["dataset"] == train["key"]]
    (storage,) = ceilings["storage"]
    figure(
        f"timm's train.py over a tar on a disk capped at {iops} reads/s (this host trains at "
        f"{paced.img_per_s:.0f} img/s): its window {cell['img_per_s']:.1f} img/s, fetching "
        f"{cell['fetched']['bytes'] or 0:,} bytes (timm read the tar through as it indexed it); a cold pass "
        f"of timm's loader, no decode, {cold_rate:.1f} samples/s; ioprof's storage read by member "
        f"{storage['img_per_s']:.1f} img/s over {storage['files']} samples"
    )
    assert storage["by_member"] and storage["concurrency"] == 2
    assert storage["img_per_s"] == pytest.approx(cold_rate, rel=0.25)
    # a pass that reads it from this disk would wait: the storage is short of what the step draws
    advice = next(a for a in r["analysis"]["advice"] if a["dataset"] == train["key"])
    assert advice["storage_suffices"] is False, advice
