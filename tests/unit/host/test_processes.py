"""Ending a loader's workers once a measurement is over (``processes.end_loader_workers``)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data._utils import MP_STATUS_CHECK_INTERVAL

from ioprof.host.processes import end_loader_workers

# A batch in hand that takes far longer than any shutdown here. torch's own shutdown waits for it
# up to MP_STATUS_CHECK_INTERVAL (5 s) a worker, then terminates the worker: ending them at once
# takes milliseconds, far inside one interval on any host.
SLOW_BATCH_S = 60.0


class _SlowAfterFirst(Dataset):
    """Its first batch at once, then every sample as slow as a whole batch should never be."""

    def __init__(self, batch: int) -> None:
        self.batch = batch

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> torch.Tensor:
        if i >= self.batch:
            time.sleep(SLOW_BATCH_S)
        return torch.zeros(4)


def test_workers_in_the_middle_of_a_batch_are_ended_at_once_and_torch_takes_no_fault() -> None:
    dl = DataLoader(_SlowAfterFirst(2), batch_size=2, num_workers=2, shuffle=False)
    it = iter(dl)
    next(it)  # the other worker is now in its slow batch, and the first in its next one
    pids = [w.pid for w in it._workers]
    time.sleep(0.5)
    t0 = time.perf_counter()
    end_loader_workers(it)
    took = time.perf_counter() - t0
    assert took < MP_STATUS_CHECK_INTERVAL, took
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    # torch's SIGCHLD watch would raise here for a worker ended by a signal it still watched
    time.sleep(0.2)
    again = DataLoader(list(range(8)), batch_size=4, num_workers=1)
    assert [b.tolist() for b in again] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    del it


def test_a_loader_without_workers_is_left_to_its_own_end() -> None:
    it = iter(DataLoader(list(range(4)), batch_size=2))
    end_loader_workers(it)
    assert next(it).tolist() == [0, 1]


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_an_iterator_already_shut_down_is_not_touched() -> None:
    dl = DataLoader(list(range(4)), batch_size=2, num_workers=1)
    it = iter(dl)
    assert [b.tolist() for b in it] == [[0, 1], [2, 3]]  # run out: torch shut it down itself
    end_loader_workers(it)


class _HoldsAFileOpen(Dataset):
    """Its first batch at once; then each sample opens its file and stalls inside the read."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> torch.Tensor:
        if i >= 1:
            with open(self.path, "rb") as f:
                f.read(1)
                time.sleep(SLOW_BATCH_S)
        return torch.zeros(4)


def test_the_files_workers_had_open_when_ended_are_returned(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A worker ended mid-read leaves undone what it does once a file is read (the cold regime
    drops the file's pages): the files it had open are handed to whoever finishes it."""
    held = tmp_path / "sample.bin"
    held.write_bytes(b"x" * 4096)
    it = iter(DataLoader(_HoldsAFileOpen(str(held)), batch_size=1, num_workers=1, shuffle=False))
    next(it)
    deadline = time.monotonic() + 30
    while not any(f.path == str(held) for f in psutil.Process(it._workers[0].pid).open_files()):
        assert time.monotonic() < deadline, "the worker never opened its file"
        time.sleep(0.05)
    open_then = end_loader_workers(it)  # every file it had open (stdout redirected to a file, too)
    assert str(held) in open_then, open_then
    del it


def _hold(lock: Any, held: Any) -> None:
    lock.acquire()
    held.set()
    time.sleep(SLOW_BATCH_S)


def test_a_worker_ended_holding_the_done_events_lock_does_not_hang_the_shutdown() -> None:
    """Workers look at their done event between samples, taking its lock for the look; one frozen
    and ended inside that look holds the lock for good, and torch's shutdown, which sets the event,
    would wait for it forever (a sweep hung so at its 4-worker decode ceiling). Here a process that
    shares the event as the workers do takes its lock and is ended with them."""
    ctx = multiprocessing.get_context("fork")
    it = iter(DataLoader(_SlowAfterFirst(2), batch_size=2, num_workers=2, shuffle=False))
    next(it)
    held = ctx.Event()
    holder = ctx.Process(target=_hold, args=(it._workers_done_event._cond, held), daemon=True)
    holder.start()
    assert held.wait(30), "the holder never took the lock"
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(30)
    ended = threading.Thread(target=end_loader_workers, args=(it,), daemon=True)
    ended.start()
    ended.join(SLOW_BATCH_S / 2)
    assert not ended.is_alive(), "the shutdown waits for a lock held by a process that is gone"
    del it


_HEAP_LEFT_FREE = """
from ioprof.host.processes import release_free_heap

def resident_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 1e6

# 64 kB blocks come from the C heap (below malloc's mmap threshold); the last one stays, so the
# heap's free memory lies below a live block, where free() alone does not hand it back
blocks = [bytearray(64 * 1024) for _ in range(3000)]
pin = bytearray(64 * 1024)
del blocks
before = resident_mb()
release_free_heap()
print(before, resident_mb())
"""


def test_the_heaps_free_memory_is_handed_back_before_workers_fork() -> None:
    """About 190 MB freed below a live block stay resident until released (a fork would make the
    next writes to them copies); released, the process holds them no more."""
    out = subprocess.run([sys.executable, "-c", _HEAP_LEFT_FREE], capture_output=True, text=True, check=True)
    before, after = (float(x) for x in out.stdout.split())
    assert before - after > 150, (before, after)


def test_the_temp_folders_of_workers_it_ended_are_removed(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A worker that hands a batch over listens on a socket in a ``pymp-`` folder of its own, which
    it removes as it exits; one ended by a signal cannot, so whoever ended it does."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the workers' folders land here
    monkeypatch.setitem(multiprocessing.current_process()._config, "tempdir", None)  # type: ignore[attr-defined]
    it = iter(DataLoader(_SlowAfterFirst(4), batch_size=2, num_workers=2, shuffle=False))
    next(it)
    next(it)  # both workers have handed a batch over
    theirs = {str(p) for p in tmp_path.glob("pymp-*")}
    assert len(theirs) == 2, theirs  # one each: else nothing here is tested
    end_loader_workers(it)
    assert not theirs & {str(p) for p in tmp_path.glob("pymp-*")}
    del it


def test_a_temp_folder_this_process_shares_with_its_workers_stays(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setitem(multiprocessing.current_process()._config, "tempdir", None)  # type: ignore[attr-defined]
    ours = multiprocessing.util.get_temp_dir()  # made before the fork: the workers use it too
    it = iter(DataLoader(_SlowAfterFirst(4), batch_size=2, num_workers=2, shuffle=False))
    next(it)
    next(it)
    assert [p.name for p in tmp_path.glob("pymp-*/listener-*")], "the workers listen in ours"
    end_loader_workers(it)
    assert os.path.isdir(ours)
    del it


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm here")
def test_the_shared_memory_names_of_workers_it_ended_are_removed() -> None:
    """torch names a batch's shared memory after the worker making it (``torch_PID_…``) and removes
    the name once mapped: a worker ended between the two leaves the name, and the batch's whole
    size of /dev/shm with it (a sweep with a simulated GPU's batches left 270 MB in three). Such a
    name, as the worker leaves it, goes with the worker; another process's stays."""
    it = iter(DataLoader(_SlowAfterFirst(2), batch_size=2, num_workers=2, shuffle=False))
    next(it)
    left = [f"/dev/shm/torch_{w.pid}_1_1" for w in it._workers]
    other = f"/dev/shm/torch_{os.getpid()}_1_1"
    try:
        for path in [*left, other]:
            with open(path, "wb") as f:
                f.truncate(4096)
        end_loader_workers(it)
        assert not [p for p in left if os.path.exists(p)]
        assert os.path.exists(other)
    finally:
        for path in [*left, other]:
            if os.path.exists(path):
                os.unlink(path)
    del it
