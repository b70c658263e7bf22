"""The kernel's own files read holding the GIL: the same answers as ``os``'s calls, and None
where there is nothing to read."""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from busy import busy_thread

from ioprof.host.libc import listdir_held, open_held, pread_held, read_held, read_whole_held, readlink_held


def test_reads_holding_the_gil_answer_as_os_does(tmp_path: Path) -> None:
    me = os.getpid()
    assert sorted(listdir_held(f"/proc/{me}/task") or []) == sorted(os.listdir(f"/proc/{me}/task"))
    big = tmp_path / "names"
    big.mkdir()
    for i in range(300):  # more than one buffer of the C library's directory reads
        (big / f"n{i:04d}-{'x' * 40}").touch()
    assert sorted(listdir_held(str(big)) or []) == sorted(os.listdir(big))
    stat = read_held(f"/proc/{me}/stat")
    assert stat is not None and int(stat.split()[0]) == me
    with open(tmp_path / "f", "wb") as f:
        assert readlink_held(f"/proc/{me}/fd/{f.fileno()}") == os.readlink(f"/proc/{me}/fd/{f.fileno()}")
        assert readlink_held(f"/proc/{me}/fd/{f.fileno()}") == str(tmp_path / "f")
    fd = os.open(f"/proc/{me}/schedstat", os.O_RDONLY)
    try:
        assert len(pread_held(fd, 128).split()) == len(os.pread(fd, 128, 0).split()) == 3
    finally:
        os.close(fd)
    gone = str(tmp_path / "nothing")
    assert read_held(gone) is None and listdir_held(gone) is None and readlink_held(gone) is None


def test_a_whole_file_read_holding_the_gil_is_the_whole_file(tmp_path: Path) -> None:
    for path in ("/proc/self/net/dev", "/proc/self/mountstats", "/proc/self/status"):
        with open(path, "rb") as f:
            plain = f.read()
        held = read_whole_held(path)
        assert held is not None and held.splitlines()[:2] == plain.splitlines()[:2], path
    big = tmp_path / "big"
    big.write_bytes(os.urandom(300_000))  # several chunks
    assert read_whole_held(str(big)) == big.read_bytes()
    assert read_whole_held(str(tmp_path / "nothing")) is None
    fd = open_held("/proc/self/stat")
    try:
        assert int(os.pread(fd, 64, 0).split()[0]) == os.getpid()
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        open_held(str(tmp_path / "nothing"))


def _at_a_batch() -> dict[str, Callable[[], object]]:
    """What ioprof reads in the training process at a batch: the loader's counters (the
    processes', the interfaces', an NFS client's), the awaited producer's clock."""
    from ioprof.host import fetched, netdev, procstat

    me = os.getpid()
    return {
        "rx_all": netdev.rx_all,
        "nfs_server_read_bytes": lambda: fetched.nfs_server_read_bytes("/"),
        "procstat.sample": lambda: procstat.sample(me),
        "a producer's clock opened and read": lambda: _clock_read(
            procstat.ThreadClock(me, threading.get_native_id())
        ),
    }


def _clock_read(clock: object) -> object:
    try:
        return clock.read()  # type: ignore[attr-defined]
    finally:
        clock.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", list(_at_a_batch()))
def test_what_is_read_at_a_batch_never_lets_the_gil_go(name: str) -> None:
    """Beside a Python thread that never waits, a call that lets the GIL go takes it back only at
    that thread's next switch: every such call then lasts about a switch interval. One that
    holds it lasts its own time, but where the busy thread's switch falls inside it."""
    read = _at_a_batch()[name]
    switch = 0.005
    before = sys.getswitchinterval()
    sys.setswitchinterval(switch)
    took = []
    try:
        with busy_thread():
            for _ in range(40):
                t = time.perf_counter()
                read()
                took.append(time.perf_counter() - t)
    finally:
        sys.setswitchinterval(before)
    assert statistics.median(took) < switch / 2, (name, sorted(took))
