"""Eviction is checked by page residency and by the kernel's I/O counters, never by speed:
these VMs' host caches the disk, so an evicted file can still read back fast."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from groundtruth import resident_pages

from ioprof.host import pagecache


def _read_all(paths: list[str]) -> None:
    for p in paths:
        with open(p, "rb") as f:
            f.read()


def test_cold_is_verified_by_residency_and_read_bytes(blob_files: list[str]) -> None:
    fs = pagecache.filesystem_of(blob_files[0])
    if fs.ram_backed:
        pytest.skip(f"the test folder is on {fs.fs_type}: nothing can be evicted there")
    state = pagecache.prepare(blob_files, "cold", fs)
    assert state.verified and state.resident_fraction <= pagecache.COLD_MAX_RESIDENT_FRACTION
    me = psutil.Process()
    before = me.io_counters().read_bytes
    _read_all(blob_files)
    fetched = me.io_counters().read_bytes - before
    assert fetched >= 0.9 * 40 * 256 * 1024  # the bytes really came from storage


def test_warm_is_verified_and_reads_nothing_from_storage(blob_files: list[str]) -> None:
    fs = pagecache.filesystem_of(blob_files[0])
    state = pagecache.prepare(blob_files, "warm", fs)
    assert state.verified and state.resident_fraction >= pagecache.WARM_MIN_RESIDENT_FRACTION
    me = psutil.Process()
    before = me.io_counters().read_bytes
    _read_all(blob_files)
    assert me.io_counters().read_bytes - before < 64 * 1024


def test_a_warm_window_whose_pages_were_evicted_loses_its_verification(blob_files: list[str]) -> None:
    """Warmed and verified, then half the files evicted (as a host's own reclaim or memory
    pressure does after the warming): the block-I/O counter shows them fetched again, and the
    window is said not to have been warm throughout, with the share. Read again warm, it keeps it;
    an emulated device's charge (every read) is not storage's and says nothing of the cache."""
    from ioprof.core.counts import Fetched

    fs = pagecache.filesystem_of(blob_files[0])
    if fs.ram_backed:
        pytest.skip(f"the test folder is on {fs.fs_type}: nothing can be evicted there")
    me = psutil.Process()

    def window() -> tuple[pagecache.CacheInfo, int]:
        cache = pagecache.prepare(blob_files, "warm", fs)
        assert cache.verified
        if evicted:
            pagecache.evict(evicted)
        before = me.io_counters().read_bytes
        _read_all(blob_files)
        fetched = Fetched(me.io_counters().read_bytes - before, "block-io", "test")
        return pagecache.verify_warm_after(cache, fetched, size), fetched.bytes or 0

    size = sum(os.path.getsize(p) for p in blob_files)
    evicted: list[str] = []
    held, fetched = window()
    assert held.verified and held.note == "" and fetched < 0.02 * size
    evicted = blob_files[::2]
    lost, fetched = window()
    assert fetched >= 0.4 * size, fetched
    assert not lost.verified and lost.note.startswith(
        f"not warm throughout: {fetched / size * 100:.0f} % of the bytes read"
    )
    charged = Fetched(size, "emulated", "every read")
    assert pagecache.verify_warm_after(pagecache.prepare(blob_files, "warm", fs), charged, size).verified


def test_a_warm_window_on_fuse_that_fetched_again_names_the_mounts_page_dropping() -> None:
    """On sshfs at its defaults a warm window's files are fetched again because FUSE drops their
    pages at each open, not because the host evicted them: the note says which."""
    from ioprof.core.counts import CacheInfo, Fetched

    warm = CacheInfo("warm", 1.0, True, "cachestat", "")
    sshfs = pagecache.FilesystemInfo("fuse.sshfs", "/mnt/data", "user@host:/data")
    got = pagecache.verify_warm_after(warm, Fetched(3_000_000, "fuse-daemon", "sshfs"), 4_000_000, sshfs)
    assert not got.verified
    assert got.note == (
        "not warm throughout: 75 % of the bytes read were fetched from storage during the window — fuse.sshfs "
        "drops a file's cached pages when it is opened again, unless mounted with kernel_cache or auto_cache"
    )
    ext4 = pagecache.FilesystemInfo("ext4", "/", "/dev/vda1")
    got = pagecache.verify_warm_after(warm, Fetched(3_000_000, "block-io", ""), 4_000_000, ext4)
    assert "pages evicted after they were warmed" in got.note and "readahead" not in got.note
    # more fetched than read: the readahead around the pages read again, said as such
    got = pagecache.verify_warm_after(warm, Fetched(4_680_000, "block-io", ""), 4_000_000, ext4)
    assert got.note.startswith("not warm throughout: 117 % of the bytes read")
    assert got.note.endswith("; more than was read, by the readahead around the pages read again")
    # a tenth fetched (a file's metadata, a neighbour's readahead) is still warm; so is a small window
    assert pagecache.verify_warm_after(warm, Fetched(400_000, "block-io", ""), 4_000_000, ext4).verified
    assert pagecache.verify_warm_after(warm, Fetched(900_000, "block-io", ""), 900_000, ext4).verified


def test_the_hosts_own_reclaim_is_named_where_it_runs(tmp_path: Path) -> None:
    """A kdamond that is on with a pageout scheme is named, with the idle age it pages out at
    (12 aggregations of 5 s: 60 s, this project's CI host's); one that is off, or only monitors,
    is not; DAMON_RECLAIM (the module) is named when enabled, with its min_age."""
    module = tmp_path / "module"
    (module / "parameters").mkdir(parents=True)
    (module / "parameters/enabled").write_text("N\n")
    (module / "parameters/min_age").write_text("120000000\n")
    context = tmp_path / "admin/kdamonds/0/contexts/0"
    scheme = context / "schemes/0"
    (scheme / "access_pattern/age").mkdir(parents=True)
    (context / "monitoring_attrs/intervals").mkdir(parents=True)
    (scheme / "access_pattern/age/min").write_text("12\n")
    (context / "monitoring_attrs/intervals/aggr_us").write_text("5000000\n")
    (tmp_path / "admin/kdamonds/0/state").write_text("on\n")
    (scheme / "action").write_text("stat\n")

    def reclaim() -> tuple[str, float | None]:
        return pagecache.proactive_reclaim(str(tmp_path), str(module))

    assert reclaim() == ("", None)
    (scheme / "action").write_text("pageout\n")
    assert reclaim() == ("DAMON's pageout scheme in kdamond 0", 60.0)
    (tmp_path / "admin/kdamonds/0/state").write_text("off\n")
    assert reclaim() == ("", None)
    (module / "parameters/enabled").write_text("Y\n")
    assert reclaim() == ("DAMON_RECLAIM", 120.0)


def test_cachestat_and_mincore_agree(blob_files: list[str]) -> None:
    pagecache.warm(blob_files[:1])
    fd = os.open(blob_files[0], os.O_RDONLY)
    try:
        cs = pagecache.resident_pages_cachestat(fd)
        mc = pagecache.resident_pages_mincore(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    assert mc == 64
    if cs is not None:
        assert cs == mc


def test_eviction_on_tmpfs_is_reported_not_cold(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or pagecache.filesystem_of(shm).fs_type != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm on this machine")
    p = shm / f"ioprof-test-{os.getpid()}.bin"
    p.write_bytes(os.urandom(64 * 1024))
    try:
        state = pagecache.prepare([str(p)], "cold", pagecache.filesystem_of(p))
        assert not state.verified
        assert "tmpfs is RAM-backed" in state.note
        assert state.resident_fraction == 1.0
    finally:
        p.unlink()


def test_as_is_reports_the_measured_fraction(blob_files: list[str]) -> None:
    fs = pagecache.filesystem_of(blob_files[0])
    pagecache.prepare(blob_files, "cold", fs)
    pagecache.warm(blob_files[:10])
    state = pagecache.prepare(blob_files, "as-is", fs)
    if not fs.ram_backed:
        assert state.resident_fraction == pytest.approx(0.25, abs=0.03)


def test_eviction_never_changes_the_files(blob_files: list[str]) -> None:
    before = [Path(p).read_bytes() for p in blob_files[:3]]
    mtimes = [os.stat(p).st_mtime_ns for p in blob_files[:3]]
    pagecache.evict(blob_files[:3])
    assert [Path(p).read_bytes() for p in blob_files[:3]] == before
    assert [os.stat(p).st_mtime_ns for p in blob_files[:3]] == mtimes


def test_a_file_read_twice_in_the_cold_regime_is_fetched_twice(blob_files: list[str]) -> None:
    """Cold means cold for the whole window: each read drops the file's pages, so a second pass
    over a small set fetches again (what a dataset larger than RAM gets), by read_bytes and residency."""
    from ioprof.measure.storage import read_file

    fs = pagecache.filesystem_of(blob_files[0])
    if fs.ram_backed:
        pytest.skip(f"the test folder is on {fs.fs_type}: nothing can be evicted there")
    cache = pagecache.prepare(blob_files, "cold", fs)
    assert cache.verified and cache.evict_after_read
    me = psutil.Process()
    before = me.io_counters().read_bytes
    for _ in range(2):
        for p in blob_files:
            read_file(p, evict=cache.evict_after_read)
    assert me.io_counters().read_bytes - before >= 0.9 * 2 * 40 * 256 * 1024
    after = pagecache.verify_after(cache, blob_files)
    assert after.verified and after.resident_after is not None and after.resident_after <= 0.02


def test_a_window_whose_files_stayed_resident_loses_its_cold_verification(blob_files: list[str]) -> None:
    fs = pagecache.filesystem_of(blob_files[0])
    if fs.ram_backed:
        pytest.skip(f"the test folder is on {fs.fs_type}")
    cache = pagecache.prepare(blob_files, "cold", fs)
    _read_all(blob_files)  # read without eviction: the pages stay
    after = pagecache.verify_after(cache, blob_files)
    assert not after.verified and "not cold throughout" in after.note and (after.resident_after or 0) > 0.9


def test_files_a_reader_of_ours_was_cut_reading_are_left_out_of_the_check(
    blob_files: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """After a window the loader's workers read ahead (into the next epoch, in a small set) and
    are ended mid-read: the files they had open are theirs, dropped once more and left out of the
    check, while the same pages left by no reader of ours still cost the verification."""
    fs = pagecache.filesystem_of(blob_files[0])
    if fs.ram_backed:
        pytest.skip(f"the test folder is on {fs.fs_type}")
    cache = pagecache.prepare(blob_files, "cold", fs)
    reading = blob_files[:3]  # 3 of 40: 7 % of the pages, over the 2 % a cold window tolerates
    _read_all(reading)
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "not-the-dataset.bin"
    elsewhere.write_bytes(b"x" * 4096)
    root = os.path.dirname(blob_files[0])
    cut = pagecache.cut_reads(root, [*reading, str(elsewhere)], replace(cache, evict_after_read=False))
    assert cut == reading  # the dataset's files only; nothing dropped where the regime keeps pages
    assert not pagecache.verify_after(cache, blob_files).verified
    kept = pagecache.verify_after(cache, blob_files, cut)
    assert kept.verified and kept.resident_after is not None and kept.resident_after <= 0.02, kept
    assert pagecache.cut_reads(root, reading, cache) == reading
    assert pagecache.residency(reading).resident_pages == 0  # dropped, as the reader would have


@pytest.mark.parametrize(
    "fs_type, source, kind",
    [
        ("ext4", "/dev/vda", "block"),
        ("xfs", "/dev/nvme0n1p1", "block"),
        ("overlay", "overlay", "block"),
        ("nfs4", "server:/export", "network"),
        ("cifs", "//server/share", "network"),
        ("fuse.sshfs", "user@host:/data", "fuse"),
        ("fuse.gcsfuse", "bucket", "fuse"),
        ("tmpfs", "tmpfs", "ram"),
        ("zfs", "pool/data", "unknown"),
    ],
)
def test_filesystem_kinds_decide_how_fetched_bytes_are_counted(fs_type: str, source: str, kind: str) -> None:
    assert pagecache.FilesystemInfo(fs_type, "/mnt", source).kind == kind


def test_a_local_disk_and_tmpfs_keep_read_pages(tmp_path: Path) -> None:
    from ioprof.host.pagecache import filesystem_of, keeps_pages

    files = []
    for i in range(3):
        f = tmp_path / f"f{i}"
        f.write_bytes(os.urandom(64 * 1024))
        files.append(str(f))
    pagecache.evict(files)
    assert keeps_pages(files, filesystem_of(files[0])) is True  # read, closed, still resident
    assert keeps_pages([], filesystem_of(files[0])) is None
    shm = filesystem_of("/dev/shm")
    assert shm.ram_backed and keeps_pages([], shm) is True


def test_what_a_cold_read_evicted_is_read_back_page_for_page(tmp_path: Path) -> None:
    """A file the page cache held whole, one it held two stretches of, one it held none of: what
    eviction found is read back, those pages and no others (no readahead around them), as
    ``fincore`` counts them before and after. Where the time allowed has run out, nothing more is
    read and what is left is counted."""
    page = os.sysconf("SC_PAGE_SIZE")
    whole, parts, none = (str(tmp_path / n) for n in ("whole", "parts", "none"))
    for p, pages in ((whole, 10), (parts, 256), (none, 50)):
        Path(p).write_bytes(os.urandom(pages * page))
    fs = pagecache.filesystem_of(whole)
    if fs.ram_backed:
        pytest.skip(f"the test folder is on {fs.fs_type}: nothing can be evicted there")
    pagecache.evict([whole, parts, none])
    _read_all([whole])
    fd = os.open(parts, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for first, pages in ((0, 4), (100, 10)):  # at a file's start a read is read ahead, unless random
            os.pread(fd, pages * page, first * page)
    finally:
        os.close(fd)
    before = resident_pages([whole, parts, none])
    assert before == {whole: 10, parts: 14, none: 0}, before  # the scene as set

    found: pagecache.PageRuns = {}
    pagecache.evict([whole, parts, none], found)
    assert found == {whole: [(0, 10)], parts: [(0, 4), (100, 10)], none: []}
    assert sum(resident_pages([whole, parts, none]).values()) == 0
    # what ioprof's own reads leave between two evictions is not the user's: the record of each
    # file is the first eviction's
    _read_all([none, parts])
    pagecache.evict([whole, parts, none], found)
    assert found == {whole: [(0, 10)], parts: [(0, 4), (100, 10)], none: []}
    assert sum(resident_pages([whole, parts, none]).values()) == 0
    stopped = pagecache.read_back(found, pagecache.LEAVE_ALL)  # a run its user interrupted
    assert (stopped.files, stopped.bytes, stopped.left_bytes) == (2, 0, 24 * page)
    assert sum(resident_pages([whole, parts, none]).values()) == 0
    back = pagecache.read_back(found, max_seconds=60)
    assert (back.files, back.bytes, back.left_bytes) == (2, 24 * page, 0)
    assert resident_pages([whole, parts, none]) == before

    pagecache.evict([whole, parts])
    ticks = iter([0.0, 0.0, 1.0, 2.0])  # its start, before the first file, before the second, its end
    late = pagecache.read_back(found, max_seconds=0.5, clock=lambda: next(ticks))
    assert (late.bytes, late.left_bytes) == (10 * page, 14 * page)  # the first file read, then out of time


def test_a_file_whose_pages_cannot_be_mapped_is_evicted_with_nothing_to_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a file cannot be mapped to see its pages (a FUSE mount in direct I/O refuses mmap),
    the eviction still happens and nothing is recorded to read back: recording never fails it."""
    f = tmp_path / "f"
    f.write_bytes(os.urandom(8 * os.sysconf("SC_PAGE_SIZE")))
    fs = pagecache.filesystem_of(f)
    if fs.ram_backed:
        pytest.skip(f"the test folder is on {fs.fs_type}: nothing can be evicted there")
    _read_all([str(f)])

    def refused(fd: int, size_bytes: int) -> list[bool]:
        raise OSError(19, "No such device")

    monkeypatch.setattr(pagecache, "resident_pages_cachestat", lambda fd: None)  # a kernel before cachestat
    monkeypatch.setattr(pagecache, "_resident_vector", refused)
    found: pagecache.PageRuns = {}
    pagecache.evict([str(f)], found)
    assert found == {str(f): []} and not pagecache.held_any(found) and resident_pages([f]) == {str(f): 0}
