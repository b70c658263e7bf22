"""The kernel's own files read holding the GIL: the same answers as ``os``'s calls, and None
where there is nothing to read."""

from __future__ import annotations

import os
from pathlib import Path

from ioprof.host.libc import listdir_held, pread_held, read_held, readlink_held


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
