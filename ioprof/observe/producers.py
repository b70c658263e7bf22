"""Whom a training loop is waiting for, and what that producer did while it waited.

While the loop is blocked in ``next()``, one process makes its batch: with workers and in-order
delivery, the worker holding the batch index the iterator expects next (the others may be idle,
waiting for indices); without workers, the calling thread itself. Its scheduler totals
(``host.procstat``) read at the call and at the return split the wait into time on a CPU (its
thread, and the other threads of its process: an OpenMP team, a decoder's threads), runnable but
waiting for a CPU (its thread's run-queue delay), and the rest: off-CPU — blocked reading its
source (disk, network, a pipe), or on a lock. This needs no knowledge of the dataset.
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

from ioprof.core.thresholds import KERNEL_SPLIT_MIN_UNITS
from ioprof.host.procstat import ThreadClock, ThreadTimes

# ((pid, tid), the producing thread's totals, its process's CPU s, the calling thread's totals)
Mark = tuple[tuple[int, int], ThreadTimes, float, ThreadTimes | None]

# A wait is split (three small files of /proc read at the call and again at the return: tens of
# µs each on a host whose caches the step left cold) at a random share of the loop's batches that
# keeps that cost under this share of the loop's time — the first as many as a stage decided from
# the splits asks for always (their cost is learnt meanwhile). Only the time the loop does not
# wait can be slowed: while it waits, its workers go on making the batch it waits for, and
# ioprof's time in its thread shortens that wait instead. So a loop that mostly waits (where the
# splits decide the stage) has its waits split nearly all.
SPLIT_BUDGET = 0.002
SPLITS_FIRST = KERNEL_SPLIT_MIN_UNITS


def awaited(it: Any) -> tuple[int, int] | None:
    """(pid, tid) of what makes the batch ``it`` will return next; None when it is already there
    or cannot be told (out-of-order delivery)."""
    workers = getattr(it, "_workers", None)
    if not workers:
        return os.getpid(), threading.get_native_id()
    if not getattr(it, "_in_order", True):
        return None
    info = getattr(it, "_task_info", {}).get(getattr(it, "_rcvd_idx", -1))
    if not info or len(info) != 1:
        return None  # arrived already (or no task for it)
    try:
        pid = workers[info[0]].pid
    except (IndexError, AttributeError):
        return None
    return (pid, pid) if pid else None


def out_of_data(it: Any) -> int | None:
    """How many of the iterator's workers have run out of data in this pass: an IterableDataset's
    worker whose own iterator ended (it sent torch its StopIteration; torch asks no more of it until
    the next pass). None where it has no workers."""
    status = getattr(it, "_workers_status", None)
    if not getattr(it, "_workers", None) or not isinstance(status, list):
        return None
    return sum(1 for alive in status if not alive)


class Producers:
    """Open scheduler clocks of the processes a loader's batches come from, and of the threads
    that call ``next()`` (receiving a worker's batch — unpickling it, rebuilding its tensors —
    is the training process's own work, not the worker's)."""

    def __init__(self) -> None:
        self._clocks: dict[tuple[int, int, bool], ThreadClock | None] = {}  # (pid, tid, its process read)
        self._cost_s = 0.0  # what the splits taken so far cost the loop, marks included
        self._splits = 0  # taken, those that found no producer left included: their cost is paid
        self._made = 0  # …of them, those that gave a split
        self._pick = random.Random()  # its own: the script's random state is never touched
        # what the first splits cost, not yet taken by ``first_cost``: a cost the window pays once,
        # however many batches it has
        self._first_s = 0.0

    def _spent(self, seconds: float) -> None:
        self._cost_s += seconds
        if self._made < SPLITS_FIRST:
            self._first_s += seconds

    def first_cost(self) -> float:
        """What the first splits cost since the last call: once, not with each batch."""
        took, self._first_s = self._first_s, 0.0
        return took

    def wanted(self, unit_s: float | None, busy: float = 1.0) -> bool:
        """Whether to split the wait of the batch about to be asked for, where the loop's unit
        (its wait and step, the median so far) is ``unit_s`` and ``busy`` the share of its time it
        did not wait: a random choice, independent of the wait, so the waits split are a fair
        sample of all."""
        if self._made < SPLITS_FIRST or not unit_s or self._cost_s <= 0 or busy <= 0:
            return True
        share = SPLIT_BUDGET * unit_s * self._splits / (self._cost_s * busy)
        return share >= 1 or self._pick.random() < share

    def _clock(self, who: tuple[int, int], process: bool = True) -> ThreadClock | None:
        key = (*who, process)
        if key not in self._clocks:
            try:
                self._clocks[key] = ThreadClock(*who, process=process)
            except OSError:  # gone already, or not readable
                self._clocks[key] = None
        return self._clocks[key]

    def _caller(self, who: tuple[int, int]) -> tuple[tuple[int, int], ThreadTimes | None]:
        me = (os.getpid(), threading.get_native_id())
        if me == who:
            return me, None
        clock = self._clock(me, process=False)  # its thread's totals alone are used
        read = clock.read() if clock is not None else None
        return me, read[0] if read is not None else None

    def mark(self, it: Any) -> Mark | None:
        """The awaited producer's totals now, at a call to ``next()``."""
        t0 = time.perf_counter()
        try:
            who = awaited(it)
            if who is None:
                return None
            clock = self._clock(who)
            read = clock.read() if clock is not None else None
            if read is None:
                return None
            return who, read[0], read[1], self._caller(who)[1]
        finally:
            self._spent(time.perf_counter() - t0)

    def split(self, start: Mark | None) -> tuple[float, float, float, float, float] | None:
        """(its thread's CPU s, its thread's run-queue s, its other threads' CPU s, the calling
        thread's CPU s and its run-queue s — 0 where it is the producer itself) since ``start``.

        The calling thread's run-queue delay is its wait for a core once the batch woke it: on a
        busy machine that is where the last part of a wait goes, and off-CPU it is not."""
        if start is None:
            return None
        began = time.perf_counter()
        made = None
        try:
            made = self._split(start)
            return made
        finally:
            self._spent(time.perf_counter() - began)
            self._splits += 1
            self._made += made is not None

    def _split(self, start: Mark) -> tuple[float, float, float, float, float] | None:
        who, t0, proc0, caller0 = start
        clock = self._clocks.get((*who, True))
        now = clock.read() if clock is not None else None
        if now is None:
            return None
        t1, proc1 = now
        own = t1.cpu_s - t0.cpu_s
        caller = caller_runq = 0.0
        if caller0 is not None:
            caller1 = self._caller(who)[1]
            if caller1 is not None:
                caller, caller_runq = caller1.cpu_s - caller0.cpu_s, caller1.runq_s - caller0.runq_s
        return own, t1.runq_s - t0.runq_s, (proc1 - proc0) - own, caller, caller_runq

    def forget(self, pids: set[int]) -> None:
        """Close the clocks of processes that are gone (a pass's workers)."""
        for key in [k for k in self._clocks if k[0] in pids]:
            clock = self._clocks.pop(key)
            if clock is not None:
                clock.close()

    def close(self) -> None:
        self.forget({k[0] for k in self._clocks})
