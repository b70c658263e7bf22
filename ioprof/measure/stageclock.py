"""One process's stage times while its loader is timed: a row per batch, appended to its file.

Each row holds the batch's stages (``stages``), each sample's own time with its time on a CPU,
the slowest sample, and what is no stage's work taken off every one: the thread's wait for a
core (``procstat.RunQueueWait``) and the process's garbage collections (``gc.callbacks``, the
full ones counted: a forked worker's first full collection copies every page it inherited).
A worker of a user's loader reads its own memory now and then, at known counts of its samples.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

# A worker of a user's loader (``ioprof run``) reads its own memory at the end of a batch, at most
# this share of its own time (smaps_rollup walks its page tables: about 20 ms in a process that
# imported torch) and at most every MEMORY_EVERY_MIN_S: each reading falls at a known count of its
# samples, and workers read themselves side by side, however many there are.
MEMORY_BUDGET = 0.01
_OLDEST = len(gc.get_threshold()) - 1  # the generation a full collection walks
MEMORY_EVERY_MIN_S = 0.5
END = "end"  # a row's key: no batch, the process's memory at its life's end (``life_end``)


class StageClock:
    """One process's stage times, a row per batch, appended to its file (with its own memory now
    and then, where ``memory``)."""

    def __init__(
        self, folder: str, tag: int, seen: str, memory: bool = False, worker: int | None = None
    ) -> None:
        self.path = os.path.join(folder, f"stages-{os.getpid()}-{tag}.jsonl")
        self.tag = tag
        self.worker = worker  # its id among the loader's workers (None: the training process)
        self.seen = seen
        self.current: dict[str, float] = {}
        self.calls = 0
        self.cost_s_per_call = 0.0
        self._file: Any = None
        self.memory = memory
        self._memory_next_s = 0.0
        self._memory_last_s = -math.inf
        self.sample_s: list[float] = []  # each sample's __getitem__ in the batch being made
        self.sample_cpu_s: list[float] = []  # of it, its thread's time on a CPU (its own work)
        self.slowest: tuple[Any, float, str] | None = None  # its slowest: (index, seconds, name)
        self.name_of: Callable[[Any], str] = lambda index: ""
        from ioprof.host.procstat import RunQueueWait

        self.queue = RunQueueWait()  # this thread's wait for a core, taken off every stage
        self.gc_s = 0.0  # this process's garbage collections so far (their wait for a core apart)
        self.full_gcs = 0  # of them, the full ones (the oldest generation: every object it holds)
        self._gc_began: tuple[float, float] | None = None
        self._pid = os.getpid()  # a forked child inherits the callback: its collections are its own
        gc.callbacks.append(self._collected)

    def _collected(self, phase: str, info: dict[str, int]) -> None:
        """gc's callback: each collection's time, less the wait for a core inside it, to gc_s; the
        full ones counted."""
        if os.getpid() != self._pid:
            return
        if phase == "start":
            self._gc_began = time.perf_counter(), self.queue.seconds()
        elif self._gc_began is not None:
            t0, q0 = self._gc_began
            q1 = self.queue.seconds()  # read inside the clock's readings (``since``)
            self.gc_s += max(0.0, time.perf_counter() - t0 - (q1 - q0))
            self._gc_began = None
            if info.get("generation") == _OLDEST:
                self.full_gcs += 1

    def mark(self) -> tuple[float, float]:
        """Now, on the wall clock and on what is no stage's work: this thread's wait for a core and
        the process's garbage collections — read after the clock, and at ``since`` before it, so
        that a wait taken off lies inside the span timed (one between two readings, which the
        kernel adds as the thread runs again, would otherwise be taken off a span without it)."""
        t0 = time.perf_counter()
        return t0, self.queue.seconds() + self.gc_s

    def since(self, mark: tuple[float, float]) -> float:
        """Seconds since ``mark`` less the time this thread waited for a core in between and the
        collector's pauses: what the stage itself took (its work, and its own blocking, a read),
        wherever it was preempted or a collection began."""
        t0, q0 = mark
        q1 = self.queue.seconds() + self.gc_s
        return max(0.0, time.perf_counter() - t0 - (q1 - q0))

    def add(self, name: str, seconds: float) -> None:
        self.current[name] = self.current.get(name, 0.0) + seconds
        self.calls += 1

    def sample_mark(self) -> tuple[float, float, float, float]:
        """Now, on the wall clock, on this thread's wait for a core, on its time on a CPU and on
        the process's garbage collections."""
        t0 = time.perf_counter()  # first: the wait read inside the clock's readings (``mark``)
        on, wait = self.queue.both()
        return t0, wait, on, self.gc_s

    def sample(self, index: Any, mark: tuple[float, float, float, float]) -> None:
        """One sample's whole ``__getitem__`` since ``mark``: its time kept (less its wait for a
        core and the collector's pauses, which are no sample's own: a collection that begins in
        one walks the objects of all), and of it its time on a CPU where the kernel says, and its
        index where it is the batch's slowest so far (its name is looked up once per batch, for
        that one only)."""
        t0, q0, c0, g0 = mark
        on, wait = self.queue.both()
        now = time.perf_counter()  # last (``mark``)
        collected = self.gc_s - g0
        # to the µs: a GPU batch of 256 makes one row
        seconds = round(max(0.0, now - t0 - (wait - q0) - collected), 6)
        self.sample_s.append(seconds)
        if self.queue.here():
            self.sample_cpu_s.append(round(min(seconds, max(0.0, on - c0 - collected)), 6))
        if self.slowest is None or seconds > self.slowest[1]:
            self.slowest = (index, seconds, "")
        self.calls += 1

    def batch(
        self,
        samples: int,
        fetch_s: float,
        collate_s: float,
        end_s: float,
        first: bool = False,
        queued_s: float | None = None,
        gc_s: float = 0.0,
        items: int | None = None,
    ) -> None:
        """One batch made: its row. ``first``: the first batch of a pass in this process (a new
        fetcher): its memory is read whatever the budget says, so that a persistent worker is read
        at the same point of every epoch it makes batches in, however costly its readings.
        ``queued_s``: what the fetch waited for a core (None where the kernel does not say); the
        stages' own times have it taken off, as the collector's pauses (``gc_s``). ``items``: the
        dataset's items fetched, where not one a sample (a dataset that makes whole batches)."""
        row = {
            "pid": os.getpid(),
            "tag": self.tag,
            "t": end_s,
            "n": samples,
            "fetch_s": fetch_s,
            "collate_s": collate_s,
            "stages": self.current,
            "calls": self.calls + 2,  # the fetch's and the collate's timers
            "cost_s_per_call": self.cost_s_per_call,
            "seen": self.seen,
        }
        if items is not None and items != samples:
            row["items"] = items
        if queued_s is not None:
            row["queued_s"] = queued_s
        if gc_s > 0:
            row["gc_s"] = round(gc_s, 6)
        if self.full_gcs:
            row["full_gcs"] = self.full_gcs  # so far: the first one copies what it inherited
        if self.worker is not None:
            row["worker"] = self.worker
        if self.sample_s:
            row["sample_s"] = self.sample_s
        if self.sample_cpu_s and len(self.sample_cpu_s) == len(self.sample_s):
            row["sample_cpu_s"] = self.sample_cpu_s
        if self.slowest is not None:
            index, seconds, _ = self.slowest
            with contextlib.suppress(Exception):  # a name is a nicety
                row["slowest"] = [
                    index if isinstance(index, int) else repr(index),
                    seconds,
                    self.name_of(index),
                ]
        self.current, self.calls, self.sample_s, self.sample_cpu_s, self.slowest = {}, 0, [], [], None
        now = time.perf_counter()
        if self.memory and (
            now >= self._memory_next_s or (first and now >= self._memory_last_s + MEMORY_EVERY_MIN_S)
        ):
            self._read_memory(row)
        self._write(row)

    def _write(self, row: dict[str, Any]) -> None:
        try:  # one short append per batch, readable at once (a few µs; batches take milliseconds)
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  (kept open for the worker's life)
            self._file.write(json.dumps(row) + "\n")
            self._file.flush()
        except OSError:  # the folder went away: the rows are lost, never the batch
            pass

    def life_end(self) -> None:
        """A row of no batch (``END``) with this process's memory as its life ends. A worker's own
        memory rarely falls (freed objects stay in the allocator's arenas), and read now and then
        it may rise after its last reading — a step of a fifth of it in its last batches, seen from
        outside —: what one life reaches is read at its end, where every life is read once."""
        row: dict[str, Any] = {
            "pid": os.getpid(),
            "tag": self.tag,
            "t": time.perf_counter(),
            "n": 0,
            END: True,
        }
        self._read_memory(row)
        if "uss" in row:
            self._write(row)

    def _read_memory(self, row: dict[str, Any]) -> None:
        """This process's USS, PSS and RSS, into the batch's row; the next reading held to the budget."""
        from ioprof.host.processes import memory_of

        t0 = time.perf_counter()
        try:
            got = memory_of(os.getpid())
        except OSError:
            got = None
        took = time.perf_counter() - t0
        self._memory_next_s = t0 + max(MEMORY_EVERY_MIN_S, took / MEMORY_BUDGET)
        self._memory_last_s = t0
        if got is not None:
            row["uss"], row["pss"], row["rss"] = got

    def flush(self) -> None:
        """The process's last rows (a worker's, as it exits): where it reads its memory, one reading
        more, at the end of its life — whatever the budget says (``life_end``)."""
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._collected)
        if self.memory and os.getpid() == self._pid:
            self.life_end()
        self.queue.close()
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
