"""Bytes read by the loader's processes, from the kernel's per-process I/O counters.

``read_bytes`` is what the process caused to be fetched from storage; ``rchar`` (psutil's
``read_chars``) is what its reads returned, page-cache hits included. A child's counters
fold into its parent only once it is reaped, so each live worker is read on its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

from ioprof.core.counts import IoCounts


@dataclass(frozen=True)
class Snapshot:
    at_s: float
    counters: dict[int, tuple[int, int]]  # pid → (read_bytes, read_chars)
    wall_s: float  # time.time() when read: the instant in seconds since the epoch


def snapshot(pids: Iterable[int], at_s: float) -> Snapshot:
    counters = {}
    for pid in pids:
        try:
            io = psutil.Process(pid).io_counters()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        counters[pid] = (int(io.read_bytes), int(io.read_chars))
    return Snapshot(at_s, counters, time.time())


def delta(before: Snapshot, after: Snapshot) -> IoCounts:
    """Bytes read between two snapshots, over the processes present in both."""
    read_bytes = read_chars = 0
    common = before.counters.keys() & after.counters.keys()
    for pid in common:
        b0, c0 = before.counters[pid]
        b1, c1 = after.counters[pid]
        read_bytes += b1 - b0
        read_chars += c1 - c0
    return IoCounts(
        read_bytes=read_bytes, read_chars=read_chars, processes=len(common), window_s=after.at_s - before.at_s
    )


def child_pids() -> set[int]:
    """Every descendant of this process: loader workers started by a fork server are its
    grandchildren, not its children."""
    return {c.pid for c in psutil.Process().children(recursive=True)}
