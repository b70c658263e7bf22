"""Reading the dataset's bytes: the storage probe, emulated storage, a vanished mount."""

from __future__ import annotations

import errno
import itertools
import os
import time
from pathlib import Path
from typing import Any

import pytest

from ioprof.commands.values import parse_storage_profile
from ioprof.core.errors import IoprofError
from ioprof.host.pagecache import filesystem_of
from ioprof.measure.storage import EmulatedStorage, StorageLost, check_storage, probe_storage, read_file


def test_probe_reads_every_byte_and_counts_fetches(blob_files: list[str]) -> None:
    fs = filesystem_of(blob_files[0])
    s = probe_storage(blob_files, 4, fs, max_seconds=None)
    assert s.files == 40 and s.bytes == 40 * 256 * 1024 and s.stopped_by == "files"
    assert len(s.latency_s) == 40 and 0 < s.latency_p50_s <= s.latency_p99_s
    # the rate counts the reads after the start-up transient (``warmup``; all of them where it had none)
    start_s = s.completed_s[s.warmup - 1] if s.warmup else 0.0
    counted = sum(s.completed_bytes[s.warmup :])
    assert s.read_mb_per_s == pytest.approx(counted / 1e6 / (s.elapsed_s - start_s))
    # the headline figure and its interval are the same estimate
    assert s.bandwidth().value == pytest.approx(s.read_mb_per_s) and s.file_rate().value == pytest.approx(
        s.files_per_s
    )
    if not fs.ram_backed:
        assert s.cache.verified and s.fetched.method == "block-io"
        assert s.fetched.bytes is not None and s.fetched.bytes >= 0.9 * s.bytes  # cold: fetched


class _Booked(EmulatedStorage):
    """The emulated device with its own record of each read: (asked at, booked to end, bytes)."""

    def __init__(self, profile: str) -> None:
        super().__init__(parse_storage_profile(profile))
        self.booked: list[tuple[float, float, int]] = []

    def reserve(self, size_bytes: int, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        end = super().reserve(size_bytes, now)
        self.booked.append((now, end, size_bytes))
        return end

    def delivered_mb_per_s(self, skip: int) -> float:
        """What the device delivered after its first ``skip`` reads, from its own bookings: the
        reads' bytes over the seconds from the end of the last one skipped (or the first request)
        to the end of the last — its idle gaps between a reader's requests included."""
        booked = sorted(self.booked, key=lambda b: b[1])
        return sum(b[2] for b in booked[skip:]) / 1e6 / (booked[-1][1] - self._start(skip))

    def _start(self, skip: int) -> float:
        booked = sorted(self.booked, key=lambda b: b[1])
        return booked[skip - 1][1] if skip else booked[0][0]

    def lag(self, s: Any, started: float) -> float:
        """How far the probe's clock readings at the two ends of its counted span lay from the
        device's, relative to that span: a reader stamps a read when it runs again after it, which
        on a busy host is later than the booked end by its wait for a core. Each read completes
        after its own booking ends, so the k-th completion comes after the k-th end."""
        ends = sorted(b[1] for b in self.booked)
        done = sorted(started + c for c in s.completed_s)
        first = done[s.warmup - 1] if s.warmup else started
        span = ends[-1] - self._start(s.warmup)
        return (abs(first - self._start(s.warmup)) + done[-1] - ends[-1]) / span


class _Clock:
    """The monotonic clock (the device's own), remembering its first reading: the probe's start."""

    def __init__(self) -> None:
        self.first: float | None = None

    def __call__(self) -> float:
        now = time.monotonic()
        self.first = now if self.first is None else self.first
        return now


@pytest.mark.parametrize("concurrency", [1, 4])
def test_emulated_bandwidth_is_what_the_device_delivered_and_never_more(
    blob_files: list[str], concurrency: int
) -> None:
    """The probe reports what the emulated device delivered over its counted reads — by the
    device's own bookings, which see a lone reader's gaps between requests (its share of a busy
    host's CPU) as a real device would — up to how late its own clock read the two ends of its span,
    and never more than the device's 10 MB/s. Four readers keep it busy: they draw its bandwidth.
    The device is slow enough that its reads take a second: a host's wait for a core is a small part."""
    emu, clock = _Booked("custom:10"), _Clock()
    blobs = [Path(p).read_bytes() for p in blob_files]
    fs = filesystem_of(blob_files[0])
    s = probe_storage(blob_files, concurrency, fs, emulated=emu, blobs=blobs, clock=clock)
    assert s.emulated == "custom:10:0" and s.cache.regime == "memory" and s.fetched.method == "emulated"
    delivered = emu.delivered_mb_per_s(s.warmup)
    assert delivered <= 10.0 * (1 + 1e-9)
    assert clock.first is not None
    assert s.read_mb_per_s == pytest.approx(delivered, rel=0.01 + 1.01 * emu.lag(s, clock.first))
    if concurrency > 1:
        assert delivered == pytest.approx(10.0, rel=0.10)


def test_emulated_read_pays_latency_and_then_transfer() -> None:
    # 10 ms latency, 1 MB at 100 MB/s = 10 ms transfer: an idle device finishes after 20 ms, not 10
    emu = EmulatedStorage(parse_storage_profile("custom:100:10"))
    assert emu.reserve(1_000_000, now=100.0) == pytest.approx(100.020)
    # a second read issued at once overlaps its latency but queues for the bandwidth
    assert emu.reserve(1_000_000, now=100.0) == pytest.approx(100.030)
    hdd = EmulatedStorage(parse_storage_profile("hdd"))  # 6 ms seek, 180 MB/s, one head
    first = hdd.reserve(180_000, now=0.0)
    assert first == pytest.approx(0.006 + 0.001) and hdd.reserve(180_000, now=0.0) == pytest.approx(2 * first)


def test_emulated_latency_overlaps_across_readers(blob_files: list[str]) -> None:
    emu = EmulatedStorage(parse_storage_profile("custom:100000:20"))  # latency-bound
    fs = filesystem_of(blob_files[0])
    blobs = [Path(p).read_bytes() for p in blob_files]
    one = probe_storage(blob_files[:10], 1, fs, emulated=emu, blobs=blobs[:10])
    assert one.latency_p50_s >= 0.020
    four = probe_storage(blob_files[:20], 4, fs, emulated=emu, blobs=blobs[:20])
    assert four.files_per_s > 2.5 * one.files_per_s


def _hold_for_good(emu: EmulatedStorage, holding: Any) -> None:
    with emu._held():  # as a worker booking its read
        holding.set()
        time.sleep(600)


def test_a_worker_killed_while_it_books_a_read_leaves_the_device_to_the_others() -> None:
    """ioprof ends a measurement's workers with SIGKILL (``end_loader_workers``), whatever each is
    doing: one ended while it held the emulated device's lock must not hold it for good, or every
    later read — the next cell's workers', a thread loader's in the training process — waits
    forever (a whatif run hung so, at its threads alternative, after its baseline's workers)."""
    import multiprocessing
    import signal
    import threading

    emu = EmulatedStorage(parse_storage_profile("custom:1000"))
    ctx = multiprocessing.get_context("fork")
    holding = ctx.Event()
    worker = ctx.Process(target=_hold_for_good, args=(emu, holding), daemon=True)
    worker.start()
    assert holding.wait(30), "the worker never took the device's lock"
    os.kill(worker.pid or 0, signal.SIGKILL)
    worker.join(30)
    booked: list[float] = []
    reader = threading.Thread(target=lambda: booked.append(emu.reserve(1_000_000)), daemon=True)
    reader.start()
    reader.join(10)
    assert booked, "a read after the worker was killed still waits for its lock"
    # and the device is still one: two processes' reads are booked one after the other
    other = ctx.Process(target=emu.reserve, args=(1_000_000,))
    other.start()
    other.join(30)
    assert emu.reserve(0) >= booked[0] + 0.001 * 0.99  # 1 MB at 1000 MB/s after the first


def test_an_emulated_device_gone_leaves_no_descriptor_and_no_file_behind() -> None:
    """A sweep makes a device for every cell: each one's lock file and this process's descriptor
    of it go with it. The descriptors counted are those of that file (the process's others open and
    close with whatever else runs in it)."""
    import gc

    def of(path: str) -> int:  # a descriptor of an unlinked file reads "<path> (deleted)"
        return sum(_target(fd).startswith(path) for fd in os.listdir("/proc/self/fd"))

    emu = EmulatedStorage(parse_storage_profile("nvme"))
    emu.reserve(1)
    path = emu._lock_path
    assert of(path) == 1
    del emu
    gc.collect()
    assert of(path) == 0 and not os.path.exists(path)


def _target(fd: str) -> str:
    """What a descriptor listed a moment ago names; "" where another thread closed it since."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return ""


def test_hdd_latency_is_serial(blob_files: list[str]) -> None:
    """One head: four readers' reads never overlap on the device (its bookings end a seek and a
    transfer apart, or more), so they get no more files a second than one read at a time allows;
    the probe reports the device's rate up to how late its clock read its span's two ends."""
    emu, clock = _Booked("hdd"), _Clock()
    blobs = [Path(p).read_bytes() for p in blob_files[:12]]
    fs = filesystem_of(blob_files[0])
    four = probe_storage(blob_files[:12], 4, fs, emulated=emu, blobs=blobs, clock=clock)
    per_file_s = 0.006 + 256 * 1024 / 180e6
    ends = sorted(b[1] for b in emu.booked)
    assert min(b - a for a, b in itertools.pairwise(ends)) >= per_file_s * (1 - 1e-9)
    device = emu.delivered_mb_per_s(four.warmup) * 1e6 / (256 * 1024)  # files a second
    assert device <= 1 / per_file_s * (1 + 1e-9) and clock.first is not None
    assert four.files_per_s == pytest.approx(device, rel=0.01 + 1.01 * emu.lag(four, clock.first))


def test_probe_stops_at_its_cap_and_says_so(blob_files: list[str]) -> None:
    emu = EmulatedStorage(parse_storage_profile("custom:1"))  # 0.26 s a file
    blobs = [Path(p).read_bytes() for p in blob_files]
    s = probe_storage(blob_files, 1, filesystem_of(blob_files[0]), emulated=emu, blobs=blobs, max_seconds=0.7)
    assert s.stopped_by == "seconds" and 1 <= s.files <= 4


def test_read_file_returns_the_bytes(blob_files: list[str]) -> None:
    expected = Path(blob_files[0]).read_bytes()
    assert read_file(blob_files[0]) == expected
    assert read_file(blob_files[0], EmulatedStorage(parse_storage_profile("nvme"))) == expected
    assert read_file(blob_files[0], evict=True) == expected


def test_unreadable_files_are_skipped_and_counted(blob_files: list[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.bin"
    broken.symlink_to(tmp_path / "gone.bin")
    s = probe_storage([*blob_files, str(broken)], 2, filesystem_of(blob_files[0]), regime="warm")
    assert s.unreadable_files == 1 and s.files == 40 and len(s.latency_s) == 40


def test_a_storage_of_which_nothing_could_be_read_is_no_figure_but_one_line(tmp_path: Path) -> None:
    """Every file gone since it was listed, on a folder still there: not a rate of nothing (it
    raised deep in the interval's arithmetic), but an OSError that says so, with the last reason."""
    broken = []
    for k in range(3):
        (tmp_path / f"{k}.bin").symlink_to(tmp_path / f"gone-{k}.bin")
        broken.append(str(tmp_path / f"{k}.bin"))
    with pytest.raises(OSError, match=r"none of the 3 items tried could be read; the last: .*No such file"):
        probe_storage(broken, 2, filesystem_of(str(tmp_path)), regime="warm")


def test_a_reachable_folder_is_not_lost_storage(tmp_path: Path) -> None:
    fs = filesystem_of(tmp_path)
    check_storage(str(tmp_path), fs, OSError(errno.EIO, "I/O error"))  # one bad file: no error


def test_a_vanished_folder_is_lost_storage_named_in_one_line(tmp_path: Path) -> None:
    fs = filesystem_of(tmp_path)
    with pytest.raises(StorageLost) as e:
        check_storage(
            str(tmp_path / "gone"), fs, OSError(errno.ENOTCONN, "Transport endpoint is not connected")
        )
    assert isinstance(e.value, IoprofError)
    text = str(e.value)
    assert text.startswith(f"{tmp_path / 'gone'}: the storage stopped answering mid-run") and "\n" not in text
    assert fs.mountpoint in text


def test_a_reader_stops_inside_a_large_file_when_the_time_is_up(tmp_path: Path) -> None:
    """A tar shard or an Arrow file of hundreds of MB over a slow link must not hold the probe's
    pause past its seconds: the reader ends at the next piece, its bytes so far counted."""
    import threading

    from ioprof.measure.storage import READ_PIECE_BYTES, read_until

    big = tmp_path / "big.arrow"
    data = bytes(range(256)) * (10 * 2**20 // 256)
    big.write_bytes(data)
    stop = threading.Event()
    assert read_until(str(big), stop, keep=True) == (len(data), data)  # whole: kept
    stop.set()
    n, kept = read_until(str(big), stop, keep=True)
    assert n == READ_PIECE_BYTES and kept is None  # a part is never kept as the file
    # in the probe: the cap ends the read inside the file. A slow source: a pipe fed 1 MB each
    # 0.1 s (60 MB would take 6 s); the probe's 0.5 s end the read within a piece or two
    import os
    import time

    fifo = tmp_path / "slow.tar"
    os.mkfifo(fifo)
    done = threading.Event()

    def feed() -> None:  # each opening gets its own stream (a look at the file opens it too)
        while not done.is_set():
            try:
                with open(fifo, "wb") as w:
                    for _ in range(60):
                        w.write(b"x" * 2**20)
                        w.flush()
                        time.sleep(0.1)
            except BrokenPipeError:  # the reader stopped: what a slow server sees
                pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    fs = filesystem_of(str(tmp_path))
    t0 = time.perf_counter()
    try:
        c = probe_storage([str(fifo)], 1, fs, regime="as-is", max_seconds=0.5)
    finally:
        done.set()
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # a feeder waiting to open: let it end
    assert time.perf_counter() - t0 < 2.5 and c.stopped_by == "seconds", c
    assert c.files == 1 and 0 < c.bytes < 20 * 2**20
    feeder.join(5)


def test_a_source_that_goes_away_mid_read_fails_the_reading_at_once() -> None:
    """Streams: after FAILURES_IN_A_ROW items fail one after another (the store went away), the
    reading stops and fails with the last reason — it does not try the hundreds of items left,
    each through a client's retries; a few bad items among good ones are only counted."""
    import io
    import time
    from contextlib import contextmanager

    from ioprof.measure.streams import FAILURES_IN_A_ROW, probe_streams

    tried: list[str] = []

    def opener(gone_after: int, bad: frozenset[str] = frozenset()):  # type: ignore[no-untyped-def]
        @contextmanager
        def open_item(item: str):  # type: ignore[no-untyped-def]
            tried.append(item)
            if len(tried) > gone_after or item in bad:
                time.sleep(0.01)
                raise OSError(f"{item}: cannot reach the store")
            yield io.BytesIO(b"x" * 1000)

        return open_item

    items = [f"s3://b/{i}.jpg" for i in range(500)]
    with pytest.raises(OSError, match="cannot reach the store"):
        probe_streams(items, opener(20), 2, bytes_per_sample=None, where="the store", max_seconds=30)
    assert len(tried) <= 20 + FAILURES_IN_A_ROW + 2
    tried.clear()
    ok = probe_streams(
        items[:60],
        opener(10**6, frozenset(items[5:8])),
        1,
        bytes_per_sample=None,
        where="the store",
        max_seconds=30,
    )
    assert ok.unreadable_files == 3 and ok.files == 57


def test_each_reader_is_made_ready_before_its_first_item() -> None:
    """A store's client is made in each reader thread (half a second here): that is no object's
    time to its first byte."""
    import io
    import threading
    import time
    from contextlib import contextmanager

    from ioprof.measure.streams import probe_streams

    made: list[int] = []

    def ready() -> None:
        time.sleep(0.5)
        made.append(threading.get_native_id())

    @contextmanager
    def open_item(item: str):  # type: ignore[no-untyped-def]
        yield io.BytesIO(b"x" * 1000)

    items = [f"s3://b/{i}.jpg" for i in range(40)]
    s = probe_streams(
        items, open_item, 2, bytes_per_sample=None, where="the store", max_seconds=30, ready=ready
    )
    assert len(set(made)) == 2 and s.files == 40  # once in each reader's own thread
    assert max(s.latency_s) < 0.25, max(s.latency_s)


def test_streams_keep_the_items_they_read_whole_up_to_the_bytes_asked() -> None:
    """What a stream read whole is kept (the in-memory sample takes it instead of a second GET);
    nothing past ``keep_bytes``, nothing where no ``keep`` is given."""
    import io
    from contextlib import contextmanager

    from ioprof.measure.streams import CHUNK_BYTES, probe_streams

    @contextmanager
    def open_item(item: str):  # type: ignore[no-untyped-def]
        n = int(item.rsplit("/", 1)[1])
        yield io.BytesIO(bytes([n % 256]) * (CHUNK_BYTES + 1000 * n))  # two chunks each, told apart

    items = [f"s3://b/{i}" for i in range(30)]
    kept: dict[str, bytes] = {}
    s = probe_streams(
        items,
        open_item,
        2,
        bytes_per_sample=None,
        where="the store",
        max_seconds=30,
        keep=kept,
        keep_bytes=10 * CHUNK_BYTES,
    )
    assert s.files == 30 and 10 <= len(kept) <= 12  # up to the budget, and the reads in flight then
    for item, data in kept.items():
        n = int(item.rsplit("/", 1)[1])
        assert data == bytes([n % 256]) * (CHUNK_BYTES + 1000 * n)  # whole, and its own
    kept.clear()
    probe_streams(items, open_item, 2, bytes_per_sample=None, where="the store", max_seconds=30)
    assert not kept


def test_the_in_memory_sample_takes_what_was_read_and_reads_only_the_rest(tmp_path: Path) -> None:
    from ioprof.datasets.discover import find_images
    from ioprof.host.pagecache import filesystem_of
    from ioprof.measure.sample import load_sample

    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        for i in range(6):
            (tmp_path / c / f"{i}.jpg").write_bytes(f"{c}{i}".encode() * 100)
    images = find_images(tmp_path)
    read = {str(tmp_path / "b" / "1.jpg"): b"read by the storage ceilings", "/elsewhere/x.jpg": b"not ours"}
    s = load_sample(images, filesystem_of(tmp_path), seed=0, max_files=5, kept=read)
    assert s.kept == 1 and s.files == 5 and s.paths[0] == str(tmp_path / "b" / "1.jpg")
    # its bytes are those handed over, not the file's: it was not read again
    assert s.blobs[0] == b"read by the storage ceilings" and s.labels[0] == images.classes.index("b")
    assert "/elsewhere/x.jpg" not in s.paths and len(set(s.paths)) == 5
    assert all(blob == Path(p).read_bytes() for p, blob in zip(s.paths[1:], s.blobs[1:], strict=True))


def test_the_sample_is_copied_with_reads_in_flight_together_over_a_network_and_is_the_same_sample(
    small_set: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read waits 50 ms (a store's or a server's latency, faked): on a network filesystem the
    copy keeps SAMPLE_READERS reads in flight, so 48 files take a fraction of 48 x 50 ms; the
    files, their order and bytes are those of one reader on a local disk, and an unreadable file
    is skipped there as here."""
    import time

    from ioprof.datasets.discover import find_images
    from ioprof.host.pagecache import FilesystemInfo
    from ioprof.measure import sample as sample_module
    from ioprof.measure.sample import SAMPLE_READERS, load_sample

    images = find_images(small_set)
    bad = images.paths[7]

    def slow_read(path: str) -> bytes:
        time.sleep(0.05)
        if path == bad:
            raise PermissionError(13, "Permission denied", path)
        return Path(path).read_bytes()

    monkeypatch.setattr(sample_module, "read_file", slow_read)
    t0 = time.perf_counter()
    over_nfs = load_sample(images, FilesystemInfo("nfs4", "/data", "server:/data"), seed=3, max_files=40)
    nfs_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    local = load_sample(images, FilesystemInfo("ext4", "/", "/dev/vda1"), seed=3, max_files=40)
    local_s = time.perf_counter() - t0
    assert SAMPLE_READERS > 1 and nfs_s < local_s / 3, (nfs_s, local_s)
    assert local_s > 40 * 0.05  # one at a time: each read waited
    assert over_nfs.paths == local.paths and over_nfs.blobs == local.blobs and over_nfs.labels == local.labels
    assert over_nfs.files == 40 and bad not in over_nfs.paths


def test_streams_keep_the_first_bytes_of_shards_within_the_budget() -> None:
    """Tar shards (``keep_prefixes``): what was read of each is kept, whole or cut off, and all of
    it within ``keep_bytes`` — a shard of hundreds of MB is never read whole by a ceiling, but its
    first samples are in its first bytes."""
    import io
    from contextlib import contextmanager

    from ioprof.measure.streams import CHUNK_BYTES, probe_streams

    @contextmanager
    def open_item(item: str):  # type: ignore[no-untyped-def]
        n = int(item.rsplit("/", 1)[1].split(".")[0])
        yield io.BytesIO(bytes([n % 256]) * (3 * CHUNK_BYTES if n % 2 else CHUNK_BYTES // 2))

    items = [f"s3://b/{i}.tar" for i in range(8)]
    kept: dict[str, bytes] = {}
    s = probe_streams(
        items,
        open_item,
        1,
        bytes_per_sample=1000.0,
        where="the store",
        max_seconds=30,
        keep=kept,
        keep_bytes=7 * CHUNK_BYTES // 4,
        keep_prefixes=True,
    )
    assert s.files == 8 and sum(map(len, kept.values())) <= 7 * CHUNK_BYTES // 4
    # in order, one reader: item 0 whole (half a chunk), item 1's first chunk (it has three); item
    # 2 whole would pass the budget by a quarter of a chunk: nothing more
    assert kept == {"s3://b/0.tar": b"\0" * (CHUNK_BYTES // 2), "s3://b/1.tar": b"\1" * CHUNK_BYTES}


def test_a_burst_at_the_start_is_left_out_of_the_rate_and_stops_it_at_the_first_look() -> None:
    """Streams through a token bucket: the first 7 items arrive at once (its burst), then one every
    10 ms. The rate is the one sustained after the burst, with the reads cut said in ``warmup``,
    and its interval is narrow at the first look (with the burst in, it was ±30 % or more there).
    The probe's clock is the bucket's (a real sleep only paces the reader for the monitor): on a
    loaded machine a real 10 ms sleep that overslept moved the cut to 20 of 46 reads."""
    import io
    import threading
    import time
    from contextlib import contextmanager

    from ioprof.measure.streams import FIRST_LOOK, probe_streams

    served = 0
    now_s = 0.0
    lock = threading.Lock()
    sleep_s = 0.01

    @contextmanager
    def open_item(item: str):  # type: ignore[no-untyped-def]
        nonlocal served, now_s
        with lock:
            served += 1
            if served > 7:
                now_s += sleep_s
        time.sleep(sleep_s if served > 7 else 0.0)
        yield io.BytesIO(b"x" * 1000)

    def clock() -> float:
        with lock:
            return now_s

    s = probe_streams(
        [f"s3://b/{i}.jpg" for i in range(400)],
        open_item,
        1,
        bytes_per_sample=None,
        where="the store",
        max_seconds=30,
        clock=clock,
    )
    assert s.stopped_by == "interval" and s.files < 2 * FIRST_LOOK, s.stopped_by
    assert 7 <= s.warmup <= 10 and s.bandwidth().value == pytest.approx(s.read_mb_per_s)
    assert s.read_mb_per_s == pytest.approx(1000 / sleep_s / 1e6, rel=0.01)
    # an object a sample: its items/s are the same reads' (the burst in, 46 in 0.39 s read 118/s)
    assert s.img_per_s == s.files_per_s == pytest.approx(1 / sleep_s, rel=0.01)
    assert s.read_mb_per_s < s.bytes / 1e6 / s.elapsed_s  # the burst in, the rate would read higher
