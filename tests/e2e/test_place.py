"""``ioprof place`` on real locations: real slow storage, Ctrl-C, full and read-only folders. Its
decision and words on a fast, a missing and an emulated slow candidate are checked on a recorded
run (``tests/unit/recorded/test_place.py``)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import slowdisk
from cli import ioprof, ioprof_start

from ioprof.core.resultfile import load, to_jsonable
from ioprof.render.kinds import conclude
from ioprof.runners.place import TEMP_PREFIX, measure_candidate, pick_sample

SMALL = ["--workers", "1,2", "--batch-size", "4", "--model", "tiny", "--crop-px", "32", "--epochs", "10"]


def place(*args: str, cgroup_procs: Path | None = None) -> subprocess.CompletedProcess[str]:
    return ioprof("place", *args, cgroup_procs=cgroup_procs)


def leftovers(*folders: Path) -> list[Path]:
    return [p for f in folders if f.exists() for p in f.iterdir() if p.name.startswith(TEMP_PREFIX)]


needs_root = pytest.mark.skipif(bool(slowdisk.unavailable()), reason=slowdisk.unavailable() or "ok")


@pytest.mark.root
@needs_root
def test_on_real_slow_storage_the_move_pays_only_where_every_epoch_reads_it(
    small_set: Path, tmp_path: Path
) -> None:
    """A throttled ext4 (0.5 MB/s) and a fast folder. The small set fits in the RAM given and ext4
    keeps read pages: only the first epoch reads the slow disk, the copy does not pay, keep it.
    Where RAM cannot hold it (a training machine whose page cache is taken: the same readings with
    no RAM, concluded again), every epoch does, and the move pays."""
    fast = tmp_path / "fast"
    fast.mkdir()
    with slowdisk.slow_disk(tmp_path, read_bytes_per_s=500_000) as disk:
        data_dir = disk.mountpoint / "data"
        shutil.copytree(small_set, data_dir)
        os.sync()
        p = place(
            "--data",
            str(data_dir),
            "--candidates",
            str(fast),
            "--compute",
            "sim:300",
            *SMALL,
            *"--ram 1 --out".split(),  # 1 GB, whatever this host has: the 200 kB set fits
            str(tmp_path / "fits"),
            cgroup_procs=disk.cgroup_procs,
        )
        assert p.returncode == 0, p.stderr
    fits = json.loads((tmp_path / "fits" / "results.json").read_text())
    assert (fits["ram_available_bytes"], fits["ram_source"]) == (10**9, "--ram")
    cur = next(d for d in fits["decisions"] if d["kind"] == "current")
    assert cur["keeps_busy"] is False and cur["limited_by"] == "storage" and cur["reading_epochs"] == 1
    rec = fits["recommendation"]
    assert rec["action"] == "keep-copy-does-not-pay" and rec["alternative"][0] == str(fast)
    text = (tmp_path / "fits" / "report.md").read_text().splitlines()[2]
    assert text.startswith(f"**Keep the dataset where it is: {fast} would feed")
    assert "only the first of the 10 epochs reads the storage" in text
    # RAM is no reading of the storage's: it only decides how many epochs read it
    not_fit = to_jsonable(conclude(dataclasses.replace(load(tmp_path / "fits"), ram_available_bytes=0)))
    assert next(d for d in not_fit["decisions"] if d["kind"] == "current")["reading_epochs"] == 10
    assert (not_fit["recommendation"]["action"], not_fit["recommendation"]["location"]) == ("move", str(fast))
    assert not leftovers(fast)


@pytest.mark.root
@needs_root
def test_sigint_mid_measurement_removes_the_temporary_folder(small_set: Path, tmp_path: Path) -> None:
    with slowdisk.slow_disk(tmp_path, read_bytes_per_s=50_000) as disk:
        proc = ioprof_start(
            *"place --data".split(),
            str(small_set),
            "--candidates",
            str(disk.mountpoint),
            "--compute",
            "sim:300",
            *SMALL,
            "--out",
            str(tmp_path / "o"),
            cgroup_procs=disk.cgroup_procs,
        )
        assert proc.stderr is not None
        for line in proc.stderr:
            if "reading the sample back cold" in line:
                break
        assert leftovers(disk.mountpoint), "the sample should be there while it is measured"
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
        assert proc.returncode == 130
        assert not leftovers(disk.mountpoint)


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount small and read-only tmpfs")
def test_full_and_read_only_candidates(small_set: Path, tmp_path: Path) -> None:
    full, ro = tmp_path / "full", tmp_path / "ro"
    full.mkdir()
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], check=True)
    try:
        sample, size = pick_sample(sorted(str(p) for p in small_set.rglob("*.jpg")), 0)
        kw = {"dataset_bytes": size, "seed": 0, "progress": print}
        assert measure_candidate(sample, size, str(full), [1], **kw).status == "full"  # type: ignore[arg-type]
        r = measure_candidate(sample, size, str(ro), [1], **kw)  # type: ignore[arg-type]
        assert r.status == "not writable" and "Read-only" in r.reason
    finally:
        subprocess.run(["umount", str(full)], check=False)
        subprocess.run(["umount", str(ro)], check=False)


@pytest.mark.slow
def test_reading_your_data_cold_where_it_is_leaves_its_cached_pages_as_they_were(tmp_path: Path) -> None:
    """``place --data`` over files the page cache holds: the current location is read cold (its
    sample evicted, each file again once read), and what the cache held is read back once the
    locations are measured, and said. Every other location reads the sample again (a copy into a
    folder, or into memory for an emulated one), so here the cache would hold it even without the
    read-back (with it removed, only the record fails); ``fincore`` still counts, outside ioprof,
    that no file is left gone whole, against as many untouched files cached at the same moment."""
    from groundtruth import CachedBeside

    cache = CachedBeside(tmp_path, 128, 96, 96, seed=7)
    out = tmp_path / "o"
    # an emulated location, not a folder: a copy into one reads the sample again, which caches it
    # whatever is read back
    p = place(
        "--data",
        str(cache.data),
        "--storage-profile",
        "custom:500:20",
        "--compute",
        "sim:300",
        *SMALL,
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert cache.as_found(), cache.gone_whole()
    back = json.loads((out / "results.json").read_text())["run"]["read_back"]
    assert back is not None and back["files"] > 0 and back["left_bytes"] == 0, back
    assert "- Page cache: Reading your files cold evicted" in (out / "report.md").read_text()
