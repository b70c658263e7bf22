"""Bytes fetched from storage, counted by the method each filesystem allows (pure parts)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ioprof.core.counts import CacheInfo
from ioprof.host.fetched import FetchSnapshot, MountCounters, decide, fuse_daemon, nfs_server_read_bytes
from ioprof.host.pagecache import FilesystemInfo

MOUNTSTATS = """\
device sysfs mounted on /sys with fstype sysfs
device server:/export mounted on /mnt/data with fstype nfs4 statvers=1.1
\topts:\trw,vers=4.2,rsize=1048576
\tage:\t1234
\tbytes:\t52428800 0 0 0 47185920 0 11520 0
\tRPC iostats version: 1.1  p/v: 100003/4 (nfs)
device other:/x mounted on /mnt/other with fstype nfs statvers=1.1
\tbytes:\t1 2 3 4 999 6 7 8
"""


COLD = CacheInfo("cold", 0.0, True, "cachestat", "", evict_after_read=True)


WARM = CacheInfo("warm", 1.0, True, "cachestat", "")


NONE = FetchSnapshot(None, None, "", None)


def test_nfs_server_read_bytes_come_from_the_mounts_own_line() -> None:
    assert nfs_server_read_bytes("/mnt/data", MOUNTSTATS) == 47_185_920
    assert nfs_server_read_bytes("/mnt/other", MOUNTSTATS) == 999
    assert nfs_server_read_bytes("/mnt/missing", MOUNTSTATS) is None


def fs(kind: str) -> FilesystemInfo:
    return {
        "block": FilesystemInfo("ext4", "/", "/dev/vda"),
        "nfs": FilesystemInfo("nfs4", "/mnt/data", "server:/export"),
        "fuse": FilesystemInfo("fuse.sshfs", "/mnt/s", "u@h:/d"),
        "ram": FilesystemInfo("tmpfs", "/dev/shm", "tmpfs"),
        "zfs": FilesystemInfo("zfs", "/tank", "tank/data"),
    }[kind]


def test_block_devices_count_the_loaders_block_io() -> None:
    f = decide(fs("block"), COLD, read_bytes=900, requested_bytes=1000, before=NONE, after=NONE)
    assert (f.bytes, f.method) == (900, "block-io")


def test_nfs_counts_what_the_client_read_from_the_server() -> None:
    before, after = FetchSnapshot(1_000, None, "", None), FetchSnapshot(51_000, None, "", None)
    f = decide(fs("nfs"), WARM, read_bytes=0, requested_bytes=80_000, before=before, after=after)
    assert (f.bytes, f.method) == (50_000, "nfs-mountstats")  # read_bytes (0) is never used on NFS


def test_fuse_counts_cold_reads_and_cross_checks_the_daemon() -> None:
    before, after = FetchSnapshot(None, 77, "sshfs", 100), FetchSnapshot(None, 77, "sshfs", 5_100)
    f = decide(fs("fuse"), COLD, read_bytes=0, requested_bytes=4_900, before=before, after=after)
    assert (f.bytes, f.method) == (4_900, "cold-reads")
    assert [(c.method, c.source, c.bytes) for c in f.cross_checks] == [
        ("fuse-daemon", "sshfs (pid 77)", 5_000)
    ]
    # not verified cold: the daemon's own count is the figure
    f = decide(fs("fuse"), WARM, read_bytes=0, requested_bytes=4_900, before=before, after=after)
    assert (f.bytes, f.method) == (5_000, "fuse-daemon")
    # members read at their places in an archive: cold, but a read fetches the readahead around
    # it, which only the daemon saw — the bytes read are not what was fetched
    f = decide(
        fs("fuse"), COLD, read_bytes=0, requested_bytes=1_200, before=before, after=after, whole_files=False
    )
    assert (f.bytes, f.method) == (5_000, "fuse-daemon")


def test_without_any_counter_fetched_bytes_are_unknown_never_zero() -> None:
    f = decide(fs("fuse"), WARM, read_bytes=0, requested_bytes=4_900, before=NONE, after=NONE)
    assert (f.bytes, f.method) == (None, "unknown") and not f.known
    assert (
        decide(fs("zfs"), COLD, read_bytes=0, requested_bytes=10, before=NONE, after=NONE).method
        == "cold-reads"
    )


def test_a_restarted_daemon_is_not_a_counter() -> None:
    before, after = FetchSnapshot(None, 77, "sshfs", 100), FetchSnapshot(None, 78, "sshfs", 50)
    f = decide(fs("fuse"), WARM, read_bytes=0, requested_bytes=4_900, before=before, after=after)
    assert f.method == "unknown"


def test_ram_backed_and_emulated_storage() -> None:
    assert decide(fs("ram"), COLD, read_bytes=0, requested_bytes=10, before=NONE, after=NONE).bytes == 0
    f = decide(fs("block"), COLD, read_bytes=0, requested_bytes=10, before=NONE, after=NONE, emulated=True)
    assert (f.bytes, f.method) == (10, "emulated")


def test_the_fuse_daemon_is_the_process_naming_the_mount_point(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    daemon = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; time.sleep(30)", "host:/data", str(mnt)]
    )
    try:
        time.sleep(0.3)
        found = fuse_daemon(FilesystemInfo("fuse.sshfs", str(mnt), "host:/data"))
        assert found is not None and found.pid == daemon.pid
        assert fuse_daemon(FilesystemInfo("ext4", str(mnt), "/dev/x")) is None  # only for FUSE
        snap = MountCounters(FilesystemInfo("fuse.sshfs", str(mnt), "host:/data")).snapshot()
        assert snap.daemon_pid == daemon.pid and snap.daemon_read_chars is not None
    finally:
        daemon.kill()
        daemon.wait()


@pytest.mark.parametrize("method", ["block-io", "cold-reads", "unknown"])
def test_every_method_has_words(method: str) -> None:
    from ioprof.render.words import FETCH_METHODS

    assert FETCH_METHODS[method]


def test_an_object_store_counts_its_gets_bodies_and_cross_checks_the_interface() -> None:
    from ioprof.core.results import OBJECT_STORE_FS_TYPE
    from ioprof.host.pagecache import prepare

    store = FilesystemInfo(OBJECT_STORE_FS_TYPE, "s3://bkt/train", "http://10.0.0.5:9000")
    # nothing on this host caches an object: cold without evicting anything, and a warm regime
    # cannot be made (said, never claimed)
    cold = prepare(["s3://bkt/train/a.jpg"], "cold", store)
    assert (cold.regime, cold.verified, cold.evict_after_read) == ("cold", True, False)
    warm = prepare(["s3://bkt/train/a.jpg"], "warm", store)
    assert not warm.verified and "not warm" in warm.note
    before = FetchSnapshot(None, None, "", None, 5_000, "eth0")
    after = FetchSnapshot(None, None, "", None, 95_000, "eth0")
    f = decide(store, cold, read_bytes=0, requested_bytes=80_000, before=before, after=after)
    assert (f.bytes, f.method, f.source) == (80_000, "object-gets", "http://10.0.0.5:9000")
    (rx,) = f.cross_checks
    assert (rx.method, rx.bytes) == ("interface-rx", 90_000) and "eth0" in rx.source
    # no interface found (or it changed between the readings): the GETs alone, no cross-check
    f = decide(store, cold, read_bytes=0, requested_bytes=80_000, before=NONE, after=NONE)
    assert (f.bytes, f.method, f.cross_checks) == (80_000, "object-gets", ())
