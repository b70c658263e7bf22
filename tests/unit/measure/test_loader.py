"""ioprof's DataLoader: awkward files counted and converted, bytes read per batch."""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import paths
import pytest
import torch

from ioprof.core.config import LoaderSetting
from ioprof.datasets.discover import find_images
from ioprof.host.pagecache import filesystem_of
from ioprof.measure.decode import probe_decode
from ioprof.measure.loader import ImageFiles, Sample, collate, make_loader, train_transform, worker_pids
from ioprof.measure.sample import load_sample

FIXTURES = paths.AWKWARD


def test_awkward_files_are_skipped_or_converted_never_fatal() -> None:
    images = find_images(FIXTURES)
    by_name = {Path(p).name: i for i, p in enumerate(images.paths)}
    ds = ImageFiles(images.paths, images.labels, train_transform(32))
    outcome = {}
    for name, i in by_name.items():
        s = ds[i]
        assert s.path == images.paths[i]
        outcome[name] = "failed" if s.error else ("converted" if s.converted else "ok")
        if not s.error:
            assert s.image is not None and s.image.shape == (3, 32, 32)
    assert outcome == {
        **{f"ok_{i}.JPEG": "ok" for i in range(6)},
        "cmyk.JPEG": "converted",
        "grayscale.JPEG": "converted",
        "png_named.JPEG": "ok",  # PIL reads the content, not the name
        "truncated.JPEG": "failed",
        "zero_bytes.JPEG": "failed",
        "not_an_image.JPEG": "failed",
        "bomb.png": "failed",
        "broken_link.JPEG": "failed",
    }
    assert "DecompressionBomb" in ds[by_name["bomb.png"]].error
    broken = ds[by_name["broken_link.JPEG"]]
    # a missing file is a bad file, not lost storage
    assert "FileNotFoundError" in broken.error and broken.lost_errno == 0 and broken.nbytes == 0


def test_collate_carries_failures_bytes_and_lost_storage_back() -> None:
    ok = Sample(torch.zeros(3, 4, 4), 1, "/a.jpg", "", True, 100, 0)
    bad = Sample(None, 2, "/b.jpg", "OSError: truncated", False, 50, 0)
    gone = Sample(
        None,
        3,
        "/c.jpg",
        "OSError: [Errno 107] Transport endpoint is not connected",
        False,
        0,
        errno.ENOTCONN,
    )
    batch = collate([ok, bad, ok, gone])
    assert batch.images is not None and batch.images.shape == (2, 3, 4, 4)
    assert [p for p, _ in batch.failures] == ["/b.jpg", "/c.jpg"]
    assert batch.converted == 2 and batch.bytes_read == 250 and batch.paths == ["/a.jpg", "/b.jpg", "/a.jpg"]
    assert batch.lost == ("/c.jpg", errno.ENOTCONN)
    assert collate([bad]).images is None and collate([bad]).lost is None


def test_multiprocess_loader_survives_bad_files() -> None:
    images = find_images(FIXTURES)
    dl = make_loader(
        images.paths,
        images.labels,
        setting=LoaderSetting.multiprocess(2),
        crop_px=32,
        batch_size=5,
        num_samples=30,
        seed=0,
    )
    n_ok = n_bad = 0
    for batch in dl:
        n_ok += 0 if batch.images is None else batch.images.shape[0]
        n_bad += len(batch.failures)
    assert n_ok + n_bad == 30 and n_bad > 0


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_the_workers_are_found_whatever_their_start_method(small_set: Path, method: str) -> None:
    images = find_images(small_set)
    dl = make_loader(
        images.paths,
        images.labels,
        setting=LoaderSetting.multiprocess(2),
        crop_px=32,
        batch_size=4,
        num_samples=16,
        seed=0,
        start_method=method,
    )
    it = iter(dl)
    # batches come in order, one from each worker in turn: once the second is in hand, each worker
    # has made one (after the first alone, the second worker may not have read a file yet)
    next(it)
    next(it)
    pids = worker_pids(it)
    import psutil

    assert len(pids) == 2
    assert all(psutil.Process(p).io_counters().read_chars > 0 for p in pids)
    # run to the end, so that the workers are shut down with nothing in flight: deleting the
    # iterator after one batch once caught a spawned worker still starting, and torch's handler
    # raised its SIGABRT from __del__ (CI here, 1 run in 40)
    assert sum(1 for _ in it) == 2  # the 4 batches of 16 samples, 2 of them taken above


def test_decode_probe_runs_from_memory_with_an_interval(small_set: Path) -> None:
    images = find_images(small_set)
    sample = load_sample(images, filesystem_of(small_set), seed=0)
    assert sample.files == 48 and sample.bytes == sum(Path(p).stat().st_size for p in images.paths)
    d = probe_decode(
        sample, LoaderSetting.multiprocess(2), crop_px=32, batch_size=8, min_seconds=0.2, max_seconds=2.0
    )
    assert d.cache.regime == "memory" and d.sample_files == 48
    assert d.images == sum(d.batch_images) and d.img_per_s == pytest.approx(d.images / sum(d.batch_s))
    assert d.throughput().value == pytest.approx(d.img_per_s) and d.throughput().known
    assert d.stopped_by in ("interval", "seconds")
    # ioprof's own loader times a sample's read apart: its work is the rest, and says so
    assert d.work_seen == "stages" and d.work_s_per_sample is not None and d.work_s_per_sample > 0


def test_a_decode_ceiling_takes_a_gpus_batch_in_batches_that_keep_a_turn_short(small_set: Path) -> None:
    """At a GPU's batch of 256 a ceiling's 8 s held two turns of 8 workers at 1024x768: it reads in
    fewer images a batch where a turn would be long, at the rate per reader of the setting before
    it, never below 32 (each batch's hand-over to the main process: 11 % of 256x192's rate at 8
    workers in batches of 32 on an H200), and the report says which batch each ran. The serial
    loader, whose batch lives in the training process, reads at the training's own."""
    from builders import cell, sweep_result

    from ioprof.core.results import DatasetCeilings
    from ioprof.measure.decode import probe_batch
    from ioprof.render.sweep import render_markdown

    eight, one = LoaderSetting.multiprocess(8), LoaderSetting.multiprocess(1)
    assert probe_batch(256, eight, None) == 64  # nothing measured before: 64 with workers,
    # the serial loader's batch lives in the training process: its own, whatever the rate before
    assert probe_batch(256, LoaderSetting.serial(), None) == 256
    assert probe_batch(256, LoaderSetting.serial(), 2000.0) == 256
    assert probe_batch(256, eight, 62.0) == 16 * 2  # 1024x768 on an H200: 31 images a turn's half second
    assert probe_batch(256, eight, 290.0) == 128  # 256x192: 145
    assert probe_batch(256, one, 2000.0) == 256  # never above the training's
    assert probe_batch(8, eight, 290.0) == 8  # a CPU's batch: its own
    assert probe_batch(256, LoaderSetting.multiprocess(16), 100.0) == 64  # 16 workers: a turn of 1 s
    sample = load_sample(find_images(small_set), filesystem_of(small_set), seed=0)
    first = probe_decode(
        sample, LoaderSetting.serial(), crop_px=32, batch_size=256, min_seconds=0.2, max_seconds=1.0
    )
    assert max(first.batch_images) == 256 and first.images == sum(first.batch_images)  # the serial: its own
    then = probe_decode(
        sample, one, crop_px=32, batch_size=256, min_seconds=0.2, max_seconds=2.0, per_reader_img_per_s=200.0
    )
    assert max(then.batch_images) == 64
    result = sweep_result((cell("serial", 0),))
    result = replace(result, ceilings=(DatasetCeilings("500x375", (first, then), ()),))
    md = render_markdown(replace(result, run=replace(result.run, batch_size=256)))
    assert "a batch holds fewer images than the training's 256 (the batch column)" in md
    assert "| images timed | batch | stopped by |" in md and f"| {then.images} | 64 |" in md
    assert f"| {first.images} | 256 |" in md
    assert "| batch |" not in render_markdown(replace(result, run=replace(result.run, batch_size=32)))


def test_a_decode_ceiling_whose_batches_are_long_runs_past_its_cap_to_its_first_look(small_set: Path) -> None:
    """The serial loader reads at the training's batch: at 256 images of 1024x768 on an H200 a
    batch took 3.2 s, and the ceiling stopped at its 8 s cap with 3 batches, ± 51 %. It runs on
    until its first look's batches are in (5 for the serial loader), then stops there as at its cap
    (that look its only one), but never past four times its cap (broken once — the cap checked
    first, as before — it held 3 batches). The host's pace is played by a clock of fixed steps:
    the rule, not the decoding, is under test."""
    sample = load_sample(find_images(small_set), filesystem_of(small_set), seed=0)

    def clock_of(step_s: float) -> Callable[[], float]:
        ticks = iter(range(10_000))
        return lambda: step_s * next(ticks)

    def ceiling(step_s: float) -> Any:
        return probe_decode(
            sample, LoaderSetting.serial(), crop_px=32, batch_size=8, max_seconds=8.0, clock=clock_of(step_s)
        )

    long = ceiling(3.2)
    assert len(long.batch_s) == 5 and long.looks == 2, (long.batch_s, long.looks)
    assert ceiling(0.5).elapsed_s < 8.0 + 0.5  # short batches: its cap as before (or an earlier stop)
    longest = ceiling(10.0)
    assert len(longest.batch_s) == 4 and longest.stopped_by == "seconds", longest.batch_s  # 40 s ≥ 4 × 8


def test_a_decode_ceiling_far_above_compute_stops_at_its_first_look(small_set: Path) -> None:
    """A decode ceiling wholly above twice the compute ceiling decides nothing more by narrowing:
    it stops at its first look (about min_seconds), not at its cap; one that is not, does not."""
    from ioprof.core.stats import Interval
    from ioprof.measure.decode import Above, _stop_reason

    sample = load_sample(find_images(small_set), filesystem_of(small_set), seed=0)
    d = probe_decode(
        sample,
        LoaderSetting.serial(),
        crop_px=32,
        batch_size=8,
        min_seconds=0.3,
        max_seconds=6.0,
        above=Above(1.0, "compute"),  # any decode on any machine lies above 1 img/s
    )
    # stopped by its rule, not its cap (a bound in seconds, the host's pace, failed once beside
    # another test)
    assert d.stopped_by in ("above-compute", "interval"), (d.stopped_by, d.elapsed_s)
    # the rule itself: wide and above → stop; wide and touching the rate → go on; narrow → stop
    wide = Interval(100.0, 80.0, 120.0, 10)
    assert _stop_reason(wide, Above(79.0, "compute")) == "above-compute"
    assert _stop_reason(wide, Above(79.0, "storage")) == "above-storage"
    assert _stop_reason(wide, Above(81.0, "compute")) == "" and _stop_reason(wide, None) == ""
    assert _stop_reason(Interval(100.0, 96.0, 104.0, 10), None) == "interval"
    assert _stop_reason(Interval(100.0, 80.0, 120.0, 4), Above(1.0, "compute")) == ""  # too few batch means
    # within ± 10 % and wholly below the lowest competing ceiling: decode is the bottleneck either way
    near = Interval(100.0, 92.0, 108.0, 10)
    assert _stop_reason(near, Above(1000.0, "compute", 109.0)) == "decided"
    assert _stop_reason(near, Above(1000.0, "compute", 107.0)) == ""  # it may not be the lowest
    assert _stop_reason(near, Above(1000.0, "compute")) == "" and _stop_reason(near, None) == ""


@pytest.mark.parametrize("workers", [0, 1, 2, 3, 4, 8])
def test_a_decode_ceilings_first_look_is_one_it_can_stop_at(workers: int) -> None:
    """The first look comes at whole turns of the workers, and at no fewer batches than an interval
    may stop on (MIN_BATCHES): the serial loader's batches of 256 at 500x375 (1.05 s each) look at
    5 batches, and by then its 8 s cap still leaves it that look — at 4 it could never stop, and
    no other look came before the cap."""
    from ioprof.core.stats import MIN_BATCHES
    from ioprof.measure.decode import probe_looks

    setting = LoaderSetting.multiprocess(workers) if workers else LoaderSetting.serial()
    looks = probe_looks(setting, 0.5, 8.0)
    first = next(n for n in range(1, 200) if looks.due(n, 1.05 * n))
    assert first >= MIN_BATCHES and first % setting.concurrency == 0, first
    if not workers:
        assert first * 1.05 < 8.0 and first == MIN_BATCHES


def test_a_decode_ceiling_stops_above_the_lower_of_compute_and_the_storage_the_cells_read() -> None:
    """Twice the lower ceiling, at the upper end of its interval; storage only at the setting's
    readers and only where it read something."""
    from dataclasses import replace

    from ioprof.core.counts import CacheInfo
    from ioprof.core.results import ComputeCeiling, StorageCeiling
    from ioprof.measure.decode import Above, above_for

    def compute(img_per_s: float) -> ComputeCeiling:
        return ComputeCeiling(img_per_s, True, "cpu", "sim", 8, (), f"simulated {img_per_s} img/s")

    cache = CacheInfo("cold", 0.0, True, "cachestat", "")
    # 2 readers, completions 0.01–0.03 s apart
    import random

    rng = random.Random(0)
    spans = [rng.uniform(0.01, 0.03) for _ in range(100)]
    done = tuple(sum(spans[: i + 1]) for i in range(100))
    storage = StorageCeiling(
        concurrency=2,
        files=100,
        bytes=100 * 40_000,
        elapsed_s=done[-1],
        read_mb_per_s=2.0,
        files_per_s=50.0,
        latency_s=(),
        latency_p50_s=0.04,
        latency_p99_s=0.05,
        img_per_s=50.0,
        storage_read_bytes=0,
        cache=cache,
        completed_s=done,
        completed_bytes=(40_000,) * 100,
    )
    rate = storage.file_rate()
    high = rate.high
    assert rate.known and rate.value < high < 1.3 * rate.value, rate
    two = LoaderSetting.multiprocess(2)
    assert above_for(two, None, [storage]) == Above(2 * high, "storage", rate.low)
    assert above_for(LoaderSetting.multiprocess(4), None, [storage]) is None  # another reader count
    assert above_for(two, None, [replace(storage, files=0)]) is None  # nothing read
    assert above_for(two, None) is None
    assert above_for(two, compute(1000.0), [storage]) == Above(2 * high, "storage", rate.low)  # the lower
    assert above_for(two, compute(20.0), [storage]) == Above(40.0, "compute", 20.0)  # the lowest low end


def test_decode_probe_never_touches_storage(small_set: Path, tmp_path: Path) -> None:
    """The sample is read once; decoding it again and again needs no file at all."""
    import shutil

    copy = tmp_path / "set"
    shutil.copytree(small_set, copy)
    images = find_images(copy)
    sample = load_sample(images, filesystem_of(copy), seed=0)
    shutil.rmtree(copy)  # any read of a file would now fail and yield no image
    d = probe_decode(
        sample, LoaderSetting.serial(), crop_px=32, batch_size=8, min_seconds=0.2, max_seconds=2.0
    )
    assert d.images > 48  # decoded more images than there are files, all from memory


def _shards(images: Any, tmp_path: Path) -> list[str]:
    """``images`` packed into tar shards of about 50 kB."""
    from ioprof.runners.pipelines import write_shards

    made, _, _ = write_shards(images.paths, images.labels, tmp_path / "shards", 50_000)
    return made


def test_shards_are_shuffled_as_read_and_each_sample_decoded_on_its_way_out(
    small_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a WebDataset pipeline shuffles before it decodes: the buffer holds samples as read, so
    the first sample out was decoded alone (not the whole buffer first: 154 MB of 224-px tensors a
    worker), and every sample out was decoded once."""
    from ioprof.measure import loader

    images = find_images(small_set)
    made = _shards(images, tmp_path)
    monkeypatch.setattr(loader, "SHUFFLE_BUFFER", 16)
    decoded: list[str] = []
    real = loader.TarShards._decode

    def counted(self: loader.TarShards, url: str, s: Any, read_s: float) -> Sample:
        decoded.append(s.key)
        return real(self, url, s, read_s)

    monkeypatch.setattr(loader.TarShards, "_decode", counted)
    it = iter(loader.TarShards(made, 32))
    first = next(it)
    assert first.error == "" and first.image is not None and tuple(first.image.shape) == (3, 32, 32)
    assert len(decoded) == 1
    out = [first, *(next(it) for _ in range(2 * len(images.paths)))]  # into the second pass
    assert len(decoded) == len(out) and all(s.error == "" and s.nbytes > 0 for s in out)


def test_shards_holding_fewer_samples_than_the_buffer_are_read_once_before_the_first_sample(
    small_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """48 samples for a buffer of 256: one pass of the shards fills it (the buffer then holds them
    all), rather than reading them again and again — each pass over the network — before a batch."""
    from ioprof.measure import loader

    images = find_images(small_set)
    made = _shards(images, tmp_path)
    assert len(images.paths) < loader.SHUFFLE_BUFFER
    streamed: list[str] = []
    real = loader.TarShards._stream

    def counted(self: loader.TarShards, i: int) -> Any:
        streamed.append(self.urls[i])
        return real(self, i)

    monkeypatch.setattr(loader.TarShards, "_stream", counted)
    it = iter(loader.TarShards(made, 32))
    first = next(it)
    # each shard once, and the next pass's first, whose first sample tops the buffer up
    assert first.error == "" and sorted(set(streamed)) == sorted(made) and len(streamed) == len(made) + 1
    out = [first, *(next(it) for _ in range(3 * len(images.paths)))]
    assert all(s.error == "" for s in out) and len(streamed) <= 5 * len(made)  # about a pass each 48


def test_in_order_false_reaches_the_dataloader_only_where_there_are_workers(small_set: Path) -> None:
    images = find_images(small_set)
    kw: dict[str, Any] = dict(crop_px=32, batch_size=4, num_samples=8, seed=0)
    unordered = make_loader(
        images.paths, images.labels, setting=LoaderSetting.multiprocess(2), in_order=False, **kw
    )
    assert unordered.in_order is False
    assert sum(b.images.shape[0] for b in unordered if b.images is not None) == 8  # every batch comes
    assert (
        make_loader(images.paths, images.labels, setting=LoaderSetting.multiprocess(2), **kw).in_order is True
    )
    serial = make_loader(images.paths, images.labels, setting=LoaderSetting.serial(), in_order=False, **kw)
    assert serial.in_order is True  # no workers: batches are made in turn, in order


def _shard_plan(in_order: bool) -> Any:
    """What ``shard_batches`` reads of a cell's plan: two workers, batches of 4 at 32 px."""
    from types import SimpleNamespace

    return SimpleNamespace(
        setting=LoaderSetting.multiprocess(2),
        run=SimpleNamespace(batch_size=4),
        crop_px=32,
        prefetch_factor=None,
        emulated=None,
        seed=0,
        start_method=None,
        pin_memory=False,
        in_order=in_order,
    )


def test_in_order_false_reaches_a_loader_over_shards(small_set: Path, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from ioprof.measure.loader import shard_batches

    made = _shards(find_images(small_set), tmp_path)
    cache = SimpleNamespace(evict_after_read=False)
    unordered = shard_batches(_shard_plan(False), made, None, cache)
    assert (
        unordered.in_order is False and shard_batches(_shard_plan(True), made, None, cache).in_order is True
    )
    it = iter(unordered)
    batches = [next(it) for _ in range(4)]  # batches come, as the workers make them
    assert all(b.images is not None and b.images.shape[0] == 4 for b in batches)
    del it


def test_passes_over_shards_end_and_persistent_workers_serve_the_next(
    small_set: Path, tmp_path: Path
) -> None:
    """A loader over shards whose passes end (``samples_per_pass``): each pass holds that many
    samples a worker, and iterating again starts the next — in the same workers where they are
    persistent (what ``whatif`` times the start of against fresh ones), in new ones otherwise."""
    from types import SimpleNamespace

    from ioprof.measure.loader import shard_batches, worker_pids

    made = _shards(find_images(small_set), tmp_path)
    plan = _shard_plan(True)
    cache = SimpleNamespace(evict_after_read=False)
    for persistent in (True, False):
        dl = shard_batches(plan, made, None, cache, samples_per_pass=8, persistent_workers=persistent)
        workers: list[set[int]] = []
        for _ in range(3):
            it = iter(dl)
            first = next(it)
            workers.append(set(worker_pids(it)))  # the pass's workers
            images = sum(b.images.shape[0] for b in [first, *it] if b.images is not None)
            assert images == 16  # 8 samples from each of the 2 workers, then the pass ends
        assert all(len(w) == 2 for w in workers)
        if persistent:
            assert workers[0] == workers[1] == workers[2]
        else:
            assert not workers[0] & workers[1] and not workers[1] & workers[2]
        del it, dl
