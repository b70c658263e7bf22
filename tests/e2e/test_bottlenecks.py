"""Planted bottlenecks found end to end by ``ioprof sweep``, on a 2-core machine without a GPU: slow
emulated or real storage, decode, compute; bytes from storage counted per cache regime."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import paths
import pytest
import slowdisk
from cli import ioprof

from ioprof.datasets.synth import DatasetSpec, generate

REPO = paths.REPO


SMALL_STEPS = ["--batch-size", "4", "--steps", "6", "--warmup-steps", "1"]


def sweep(*args: str, cgroup_procs: Path | None = None, fresh: bool = False) -> dict:  # type: ignore[type-arg]
    """``ioprof sweep ARGS``'s results (forked from the tests' CLI server unless ``fresh``), in the
    cgroup whose ``cgroup.procs`` is given (a throttled disk's) from before its first read."""
    out = Path(args[args.index("--out") + 1])
    p = ioprof("sweep", *args, cgroup_procs=cgroup_procs, timeout=600, fresh=fresh)
    assert p.returncode == 0, p.stderr
    return json.loads((out / "results.json").read_text())


def verdicts(data: dict) -> set[tuple[str, str]]:
    return {(c["verdict"]["bottleneck"], c["verdict"]["input_bound"]) for c in data["cells"]}


@pytest.mark.slow
@pytest.mark.link  # the emulated storage's sleeps set the pace, far under what one core decodes
def test_slow_emulated_storage_with_fast_compute_is_storage(small_set: Path, tmp_path: Path) -> None:
    data = sweep(
        "--data",
        str(small_set),
        *"--loaders multiprocess --workers 2 --compute sim:5000 --storage-profile custom:0.3".split(),
        *SMALL_STEPS,
        "--out",
        str(tmp_path / "o"),
    )
    assert verdicts(data) == {("storage", "highly")}
    cell = data["cells"][0]
    assert data["ceilings"][0]["storage"][0]["emulated"] == "custom:0.3:0"
    # emulated cells read an in-memory sample: every read charged to the emulated device, none to the disk
    assert cell["cache"]["regime"] == "memory" and cell["fetched"]["method"] == "emulated"
    assert cell["fetched_mb_per_s"] == pytest.approx(0.3, rel=0.15)


@pytest.mark.slow
def test_one_worker_on_large_images_with_fast_compute_is_decode(large_set: Path, tmp_path: Path) -> None:
    data = sweep(
        "--data",
        str(large_set),
        *"--loaders multiprocess --workers 1 --compute sim:5000".split(),
        *SMALL_STEPS,
        "--out",
        str(tmp_path / "o"),
    )
    assert verdicts(data) == {("decode", "highly")}
    adv = data["analysis"]["advice"][0]
    assert adv["workers_needed"] is None and adv["workers_estimated"] > 1


needs_slow_disk = pytest.mark.skipif(bool(slowdisk.unavailable()), reason=slowdisk.unavailable() or "ok")


@contextmanager
def _throttled(tmp_path: Path, images: int) -> Iterator[tuple[slowdisk.SlowDisk, Path]]:
    """``images`` JPEGs of 500x375 (124 kB) on a disk read at 4 MB/s."""
    with slowdisk.slow_disk(tmp_path, read_bytes_per_s=4_000_000) as disk:
        root = disk.mountpoint / "500x375"
        generate(DatasetSpec(500, 375, images), tmp_path / "src")
        shutil.copytree(tmp_path / "src", root)
        os.sync()
        yield disk, root


def _sweep_on(disk: slowdisk.SlowDisk, root: Path, out: Path, *args: str) -> dict:  # type: ignore[type-arg]
    """``ioprof sweep --data ROOT ARGS --out OUT`` in the throttled disk's cgroup."""
    return sweep("--data", str(root), *args, "--out", str(out), cgroup_procs=disk.cgroup_procs)


@pytest.fixture()
def throttled_set(tmp_path: Path) -> Iterator[tuple[slowdisk.SlowDisk, Path]]:
    with _throttled(tmp_path, 40) as disk_and_root:
        yield disk_and_root


@pytest.mark.root
@pytest.mark.link  # the throttle sets the pace (32 img/s), far under what one core decodes
@needs_slow_disk
def test_sweep_on_real_slow_storage_blames_storage(tmp_path: Path, figure: Callable[[str], None]) -> None:
    """The storage probe at 1 and 2 readers, and the loader's draw, each the throttle's rate
    within 15 %; the verdict storage."""
    with _throttled(tmp_path, 100) as (disk, root):
        data = _sweep_on(
            disk,
            root,
            tmp_path / "o",
            *"--loaders multiprocess --workers 2 --compute sim:2000".split(),
            # a window of 80 images (10 MB, 2.4 s), near the tool's shortest (3 s): over SMALL_STEPS' 24
            # (0.75 s) a pause before it, while the workers filled their queue and stood idle, put the
            # reads they had in flight and the throttle's first slice on too few seconds (4.60 MB/s on
            # a loaded CI host; 5.5-8.0 here with 0.5 s slept before the window, 4.0-4.2 without; over
            # these 80, 4.15-4.31 and 3.95-3.96)
            *"--batch-size 4 --steps 20 --warmup-steps 1".split(),
        )
    assert verdicts(data) == {("storage", "highly")}
    cell = data["cells"][0]
    assert cell["cache"]["verified"], cell["cache"]
    assert cell["fetched"]["method"] == "block-io", cell["fetched"]
    probes = [level["read_mb_per_s"] for level in data["ceilings"][0]["storage"]]
    figure(
        "sweep on a 4 MB/s blkio-throttled disk: storage probe "
        + ", ".join(f"{mb:.2f} MB/s with {n} reader{'s' * (n > 1)}" for n, mb in enumerate(probes, 1))
        + f"; the loader's 2 workers fetched {cell['fetched_mb_per_s']:.2f} MB/s"
        + f" [{cell['fetched_mb_per_s_low']:.2f}–{cell['fetched_mb_per_s_high']:.2f}] over"
        + f" {len(cell['fetched_segments'])} segments"
    )
    assert len(probes) == 2 and all(mb == pytest.approx(4.0, rel=0.15) for mb in probes), probes
    assert cell["fetched_mb_per_s"] == pytest.approx(4.0, rel=0.15)  # the throttle, as the loader drew it
    # its interval, from the window read again every quarter second: the segments add up to it
    segments = cell["fetched_segments"]
    assert len(segments) >= 3 and sum(b for _, b in segments) == cell["fetched"]["bytes"]  # 6-9 here
    assert cell["fetched_mb_per_s_low"] < cell["fetched_mb_per_s"] < cell["fetched_mb_per_s_high"]


@pytest.mark.slow
@pytest.mark.link  # bytes counted, nothing timed against the host
@pytest.mark.parametrize("regime", ["cold", "warm"])
def test_cells_count_bytes_from_storage_per_regime(large_set: Path, tmp_path: Path, regime: str) -> None:
    data = sweep(
        "--data",
        str(large_set),
        *"--loaders serial,multiprocess --workers 2 --compute sim:2000 --cache".split(),
        regime,
        *"--batch-size 4 --steps 3 --warmup-steps 0 --no-probe --out".split(),  # cells only: no ceilings read
        str(tmp_path / "o"),
        fresh=True,  # a process of its own, as a user's, for its block I/O counters
    )
    largest = max(p.stat().st_size for p in large_set.rglob("*.jpg"))
    for c in data["cells"]:
        cache, fetched, delivered = c["cache"], c["fetched"]["bytes"], c["requested_bytes"]
        assert cache["regime"] == regime, cache
        assert delivered >= 12 * 300_000  # 3 steps x 4 images of ~370 kB were read
        assert c["fetched"]["method"] == "block-io"
        # set beside the block counters over the same readings: the loop's own reads, or what the
        # workers read (they read ahead of the loop by a queue of batches: over 3 steps from a cold
        # start, the batches delivered were 0.76-1.26 of what they fetched)
        assert c["reads_counted"] == ("workers" if c["workers"] else "batches")
        read = c["io"]["read_chars"] if c["workers"] else delivered
        if regime == "cold":
            assert cache["verified"] and cache["resident_fraction"] <= 0.02, cache
            # every file fetched whole as it is read: short only by the files each worker had begun
            # before the first reading and finished after it
            assert fetched >= read - c["workers"] * largest, (fetched, read)
            assert c["cache_hit_ratio"] == pytest.approx(1 - min(1.0, fetched / read))
            continue
        assert cache["resident_fraction"] >= 0.98, cache  # warmed as asked before the window
        print(f"warm {c['loader']}: fetched {fetched / read:.0%} of its reads; {cache['note'] or 'verified'}")
        if fetched <= 0.10 * read:  # served by the page cache
            assert cache["verified"] and c["cache_hit_ratio"] >= 0.9, cache
        else:
            # or said not to have been: a host may evict file pages on its own after they were
            # warmed (this project's CI host runs DAMON's pageout; one CI run's warm cell fetched 28 %
            # of its reads, another's 17 %), and the cell is then no warm measurement
            assert not cache["verified"], cache
            assert cache["note"].startswith(
                f"not warm throughout: {fetched / read * 100:.0f} % of the bytes read"
            ), cache
            assert "regime-not-verified" in {f["kind"] for f in data["analysis"]["findings"]}


@pytest.mark.root
@needs_slow_disk
def test_an_emulated_profile_faster_than_the_real_device_is_said(throttled_set, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Data on a 4 MB/s disk, emulated as NVMe: the figures are the emulated device's (read from
    memory), and the report says the real device is slower than the profile."""
    disk, root = throttled_set
    data = _sweep_on(
        disk,
        root,
        tmp_path / "o",
        # a step 4x the disk's 40 img/s, and under half of what 2 workers decode (about 400 img/s):
        # the decode ceiling stops at its first look instead of narrowing to its cap
        *"--loaders multiprocess --workers 2 --compute sim:160 --storage-profile nvme".split(),
        *SMALL_STEPS,
    )
    cell = data["cells"][0]
    assert cell["fetched"]["method"] == "emulated" and cell["cache"]["regime"] == "memory"
    assert (
        cell["img_per_s"] > 3 * data["ceilings"][0]["real_storage"]["img_per_s"]
    )  # not the 4 MB/s disk's pace
    (warning,) = [f for f in data["analysis"]["findings"] if f["kind"] == "emulated-faster-than-real"]
    assert warning["real_mb_per_s"] == pytest.approx(4.0, rel=0.2) and warning["profile_mb_per_s"] == 3000.0
    assert "is faster than the device the data really sit on" in (tmp_path / "o" / "report.md").read_text()
