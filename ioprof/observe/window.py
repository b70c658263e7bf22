"""One user DataLoader's measured window: what ``ioprof run`` and ``ioprof.watch()`` record per batch.

Pure bookkeeping, driven by the patched iterator with times, images and counter readings it is
handed (no torch, no psutil: the observer injects them), so that fake clocks and counters can
test it exactly.

- **Units.** A measured unit is one batch: the time blocked in ``next()`` (its wait) and the
  time until the next call on the same iterator (its step: whatever the loop does between
  batches). A unit is complete at the next call.
- **Segments.** Units run in segments: consecutive batches of one pass with no pause between
  them. A pause far longer than the usual step (an evaluation pass, a checkpoint) ends a
  segment; so does the end of a pass. After a pause the loader's queue is full
  (``prefetch_factor`` × workers batches ready), so that many batches are skipped before the
  next segment opens; at a new pass, one per worker (they start together), and in the first
  pass the warm-up before them.
- **Counters.** Kernel I/O counters of the pass's own processes (workers come and go with each
  pass unless persistent) and the mount's counters are read at a segment's opening and then at
  unit boundaries; bytes and seconds are summed over the same spans, so every MB/s divides the
  bytes of a span by that span's own seconds, gaps left out.
- **Role evidence.** Optimizer steps that ran between two calls for batches of one pass
  (gradient accumulation included), and the threads that called ``next()``.
- **GPU timeline** (CUDA): an event on the training stream at each ``next()`` call and return.
  The GPU waited for data from the moment it finished the work queued before the call until
  the batch was handed back; the rest of the unit is the GPU's step (see ``gpu_units``).
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# A pause between batches longer than this many times the median step is not a step — where it
# is also longer than the median unit (wait + step): only then could the workers have made a
# batch ahead during it. A 4 ms hiccup after steps of 0.2 ms is no pause when a batch takes 60.
GAP_FACTOR = 20.0
GAP_MIN_STEPS = 5
# While a segment is open the counters are read at a unit boundary at most this often, and no
# more often than keeps their cost (a few files of /proc for each process) under this share of the
# loop's time…
COUNTERS_EVERY_S = 0.5
READ_BUDGET = 0.002
# …and the CPU and each thread's totals with them (dozens of threads in a training process:
# milliseconds to read) no more often than keeps theirs under this share.
CPU_READ_BUDGET = 0.001
# the most batches a window keeps the loop's times of, for the replay of its hand-over (its own
# passes only; about 170 bytes each)
HANDED_MAX = 100_000


# what the awaited producer did over one wait (``Producers.split``): its thread's CPU s and
# run-queue s, its other threads' CPU s, the calling thread's CPU s and run-queue s
Split = tuple[float, float, float, float, float]


@dataclass(frozen=True)
class Reading:
    """Every counter a rate needs, read at one instant."""

    at_s: float
    procs: dict[int, tuple[int, int]]  # pid → (read_bytes, read_chars)
    nfs_bytes: int | None = None  # the mount's NFS client: bytes read from the server
    daemon: tuple[int, str, int] | None = None  # the FUSE daemon: (pid, name, rchar)
    own_chars: dict[int, int] = field(default_factory=dict)  # pid → its own threads' rchar (no child's)
    # pid → CPU seconds of the process, all its threads (its CPU clock, to the nanosecond) and the
    # children it reaped (in clock ticks), for the training process and the loader's processes;
    # and each thread's (CPU s, run-queue s)
    cpu: dict[int, float] = field(default_factory=dict)
    parents: dict[int, int] = field(default_factory=dict)  # pid → its parent's, where its CPU was read
    reaped: set[int] = field(default_factory=set)  # of the processes asked for, those gone whole (no zombie)
    threads: dict[int, dict[int, tuple[float, float]]] = field(default_factory=dict)
    # time.time() and perf_counter() halfway through the reading, when its CPU figures were read:
    # a reading of a training process's dozens of threads takes a millisecond, the first of a
    # segment twice as long as its last, and a span of one batch (10-20 ms) counted from the
    # readings' starts held 2-4 % more seconds than its CPU figures did
    wall_s: float = 0.0  # the span can be matched with readings outside
    read_s: float | None = None  # None: read at ``at_s``
    net_bytes: int | None = None  # the interface routing to a URL source: bytes it received (host-wide)
    iface: str | None = None  # that interface
    # taken before the loader's source was known (its workers' connections are found at its first
    # batch): every interface's count, so that a span from here is counted once one is known
    rx: dict[str, int] = field(default_factory=dict)
    took_s: float = 0.0  # what this reading cost the loop

    @property
    def read_at(self) -> float:
        return self.at_s if self.read_s is None else self.read_s

    def net_on(self, iface: str | None) -> int | None:
        """What ``iface`` had received at this reading, where it was read."""
        if self.net_bytes is not None and self.iface == iface:
            return self.net_bytes
        return self.rx.get(iface) if iface is not None else None


@dataclass
class Totals:
    """Counter deltas summed over the spans of closed segments, and the spans' seconds."""

    seconds: float = 0.0
    read_bytes: int = 0
    read_chars: int = 0
    processes: int = 0
    nfs_bytes: int | None = None
    daemon_bytes: int | None = None
    daemon: tuple[int, str] | None = None
    spans: int = 0
    net_bytes: int | None = None
    own_chars: int = 0  # the processes' own threads' reads (pipes, TLS sockets, files), no child's
    cpu_s: float = 0.0  # CPU of the training process and the loader's, over the spans
    cpu_window_s: float = 0.0  # the seconds of the spans whose CPU was read at both ends
    threads_window_s: float = 0.0  # …of them, those whose every process's threads were read at both ends
    thread_cpu_s: dict[str, float] = field(default_factory=dict)  # "pid/tid" → CPU s over the spans
    thread_runq_s: dict[str, float] = field(default_factory=dict)  # "pid/tid" → run-queue s
    cpu_spans_wall: list[tuple[float, float]] = field(default_factory=list)  # the CPU spans, wall-clock

    def add(self, a: Reading, b: Reading, cpu_to: Reading | None = None) -> None:
        """The span from ``a`` to ``b``: its seconds and the host's counters (the network
        interface's, the NFS client's, the FUSE daemon's) always; the processes' own counters over
        the processes read at both ends — none where those read at ``a`` are all gone at ``b``
        (their bytes went with them: pieces of a segment then fall short of its whole, and a
        process-counted figure gets no interval), while the host's still add up. CPU from ``a``
        to ``cpu_to`` (the span's last reading that read it), none where not given."""
        if cpu_to is not None and cpu_to.at_s > a.at_s:  # its CPU may reach past its bytes (a pass's end)
            self._add_cpu(a, cpu_to)
        if b.at_s <= a.at_s:
            return
        common = a.procs.keys() & b.procs.keys()
        self.seconds += b.at_s - a.at_s
        self.read_bytes += sum(b.procs[p][0] - a.procs[p][0] for p in common)
        self.read_chars += sum(b.procs[p][1] - a.procs[p][1] for p in common)
        self.own_chars += sum(
            b.own_chars[p] - a.own_chars[p] for p in a.own_chars.keys() & b.own_chars.keys()
        )
        self.processes = max(self.processes, len(common))
        self.spans += 1
        if a.nfs_bytes is not None and b.nfs_bytes is not None:
            self.nfs_bytes = (self.nfs_bytes or 0) + b.nfs_bytes - a.nfs_bytes
        net_a, net_b = a.net_on(b.iface), b.net_on(b.iface)
        if net_a is not None and net_b is not None:
            self.net_bytes = (self.net_bytes or 0) + net_b - net_a
        if a.daemon is not None and b.daemon is not None and a.daemon[0] == b.daemon[0]:
            self.daemon_bytes = (self.daemon_bytes or 0) + b.daemon[2] - a.daemon[2]
            self.daemon = (b.daemon[0], b.daemon[1])

    def _add_cpu(self, a: Reading, b: Reading) -> None:
        """CPU over the span: every process read at both ends. A process gone at ``b`` counts where
        its parent, read at both ends, reaped it (a pass's workers, shut down when it runs out):
        its CPU to its end is then in its parent's children's time, and its own at ``a`` is taken
        off it. Its threads' CPU after the last reading is not told apart: each thread's figures
        keep to the spans whose every process was read at both ends (``threads_window_s``). Any
        other process gone or born meanwhile leaves the span out (its CPU then covers fewer
        seconds, and says so)."""
        if not a.cpu or b.cpu.keys() - a.cpu.keys():
            return
        gone = a.cpu.keys() - b.cpu.keys()
        if any(p not in b.reaped or a.parents.get(p) not in b.cpu for p in gone):
            return
        common = sum(b.cpu[p] - a.cpu[p] for p in b.cpu) - sum(a.cpu[p] for p in gone)
        self.cpu_s += max(0.0, common)
        self.cpu_window_s += b.read_at - a.read_at
        if a.wall_s and b.wall_s:
            self.cpu_spans_wall.append((a.wall_s, b.wall_s))
        if gone:
            return
        self.threads_window_s += b.at_s - a.at_s
        for pid, threads in b.threads.items():
            before = a.threads.get(pid, {})
            for tid, (cpu, runq) in threads.items():
                c0, r0 = before.get(tid, (0.0, 0.0))  # a thread born within the span: from 0
                key = f"{pid}/{tid}"
                self.thread_cpu_s[key] = self.thread_cpu_s.get(key, 0.0) + max(0.0, cpu - c0)
                self.thread_runq_s[key] = self.thread_runq_s.get(key, 0.0) + max(0.0, runq - r0)

    def plus(self, a: Reading | None, b: Reading | None, cpu_to: Reading | None = None) -> Totals:
        """These totals with one more span (an open segment's), without changing them."""
        out = Totals(
            **{
                **self.__dict__,
                "thread_cpu_s": dict(self.thread_cpu_s),
                "thread_runq_s": dict(self.thread_runq_s),
            }
        )
        if a is not None and b is not None:
            out.add(a, b, cpu_to)
        return out


class GpuMarks(Protocol):
    """Events on the training's GPU stream: ``mark()`` records one now; ``seconds(a, b)`` is the
    GPU time between two recorded events, once ``settle(last)`` has waited for the last one."""

    def mark(self) -> Any: ...

    def settle(self, event: Any) -> None: ...

    def seconds(self, start: Any, end: Any) -> float: ...


def gpu_units(marks: GpuMarks, units: Sequence[tuple[Any, Any, Any]]) -> tuple[list[float], list[float]]:
    """Per unit (event at the call, at the return, at the next call): the GPU's wait for data and its
    step. Nothing is enqueued while the host is blocked in ``next()``, so the event at the return
    completes when the host handed the batch back or when the GPU finished its queued work,
    whichever came later: the span from the call's event is the GPU idle for want of data, zero
    when the GPU was still busy. The step is the rest of the unit on the GPU's clock."""
    if not units:
        return [], []
    marks.settle(units[-1][2])
    stalls = [marks.seconds(a, b) for a, b, _ in units]
    steps = [marks.seconds(b, c) for _, b, c in units]
    return stalls, steps


@dataclass
class _Pending:
    wait_s: float
    images: int
    call_mark: Any
    return_mark: Any
    split: Split | None = None
    key: tuple[int, int] = (0, 0)  # (pass, k): the batch's place in its pass (from 0)


@dataclass(frozen=True)
class Piece:
    """The counters' deltas between two consecutive readings of a segment (None: not read)."""

    seconds: float
    read_bytes: int
    read_chars: int
    own_chars: int
    processes: int
    nfs_bytes: int | None
    daemon_bytes: int | None
    net_bytes: int | None

    @classmethod
    def of(cls, t: Totals) -> Piece:
        return cls(
            t.seconds,
            t.read_bytes,
            t.read_chars,
            t.own_chars,
            t.processes,
            t.nfs_bytes,
            t.daemon_bytes,
            t.net_bytes,
        )

    def then(self, b: Piece) -> Piece:
        """This piece and the one after it, as one."""

        def both(x: int | None, y: int | None) -> int | None:
            return None if x is None or y is None else x + y

        return Piece(
            self.seconds + b.seconds,
            self.read_bytes + b.read_bytes,
            self.read_chars + b.read_chars,
            self.own_chars + b.own_chars,
            max(self.processes, b.processes),
            both(self.nfs_bytes, b.nfs_bytes),
            both(self.daemon_bytes, b.daemon_bytes),
            both(self.net_bytes, b.net_bytes),
        )


@dataclass
class BeforeWindow:
    """The loader's first pass up to its window: from ``iter()`` to the window's first batch — its
    workers' start, the time to its first batch, and the batches the warm-up left out (a streaming
    dataset's downloads, a cache filled on the first pass, all happen here)."""

    started_s: float  # iter() of the first pass
    reading: Reading | None = None  # the counters then
    first_batch_s: float | None = None  # from iter() to its first batch
    batches: int = 0  # batches delivered before the window
    wait_s: float = 0.0  # seconds of it in next(), waiting for them
    seconds: float | None = None  # from iter() to the window's first call (None: the window never began)
    totals: Totals | None = None  # the counters' deltas over it


@dataclass
class LoaderWindow:
    """The recorder of one loader. ``read`` reads the counters of the given pids at a time."""

    steps: int
    seconds: float | None
    warmup: int
    workers: int
    prefetch_depth: int  # batches ready in the queue after a pause: prefetch_factor × workers
    read: Callable[[Sequence[int], float, bool], Reading]  # (pids, at, with their CPU)
    marks: GpuMarks | None = None
    waits: list[float] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)
    images: list[int] = field(default_factory=list)
    units: list[tuple[Any, Any, Any]] = field(default_factory=list)  # GPU events per unit
    # per unit, what its producer did while the loop waited (``Split``), or None where it could
    # not be told
    splits: list[Split | None] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    passes: int = 0
    batches: int = 0
    gaps: int = 0
    segments: int = 0
    optimizer_between: int = 0  # optimizer steps that ran between two batches of one pass
    intervals: int = 0  # between-batch intervals seen (all batches, not only the window's)
    threads: set[int] = field(default_factory=set)
    done: bool = False
    started: bool = False
    _pids: list[int] = field(default_factory=list)
    _skip: int = 0
    _last_return: float | None = None
    _opt_at_call: int = 0
    _open: bool = False  # a unit began at the last call
    _call_mark: Any = None
    _pending: _Pending | None = None
    _seg_start: Reading | None = None
    _seg_last: Reading | None = None
    _seg_cpu: Reading | None = None  # the open segment's last reading that read the CPU
    _bytes_took_s: float = 0.0  # what the last reading of the bytes alone cost
    # the counters' deltas between consecutive readings of each segment (the pieces its total is
    # made of): the spread that gives the fetched MB/s its interval
    pieces: list[Piece] = field(default_factory=list)
    _seg_first_piece: int = 0  # the open segment's first piece
    before: BeforeWindow | None = None
    # each batch handed over until the window ended, warm-up included: (pass, k, call, return),
    # its pass and place counted from 0 — the loop's side of a replay of the hand-over
    handed: list[tuple[int, int, float, float]] = field(default_factory=list)
    unit_keys: list[tuple[int, int]] = field(default_factory=list)  # (pass, k) of each unit
    _pass_k: int = 0
    _by_size: tuple[list[float], list[float]] = field(default_factory=lambda: ([], []))  # steps, units
    _measured: float = 0.0  # the window's seconds so far: its waits and steps
    _waited: float = 0.0  # …of them, its waits
    # the window's measured stretches (perf_counter s, from a segment's first call to the call after
    # its last unit): what ran in its pauses and after it is no part of them
    spans: list[list[float]] = field(default_factory=list)

    # -- events from the patched iterator ------------------------------------------------------

    def pass_started(self, pids: Sequence[int]) -> None:
        """A new iterator (an epoch): its own processes; its workers' first batches come together."""
        self.close_segment()
        self.passes += 1
        self._pids = list(pids)
        if self.passes == 1:
            now = time.perf_counter()
            self.before = BeforeWindow(now, self.read(self._pids, now, True))
        self._skip = (self.warmup if self.passes == 1 else 0) + self.workers
        self._pass_k = 0
        if not self.started:  # the passes before the window's are never replayed
            self.handed.clear()
        self._last_return = None
        self._pending = None
        self._open = False

    def pass_ended(self, at_s: float | None = None) -> None:
        """The pass is over: the segment ends at the last unit's end, or — where its processes are
        still there to be read (a pass that ended by its length, not by running out) — ``at_s``."""
        if at_s is not None and self._seg_start is not None:
            last = self.read(self._pids, at_s, True)
            if last.procs.keys() == self._seg_start.procs.keys():
                self._advance(last)
            else:  # a pass that ran out: its workers are gone, their bytes with them, their CPU
                self._seg_cpu = last  # to the process that reaped them (``Totals._add_cpu``)
        self.close_segment()
        self._last_return = None

    def steps_since_last_call(self, optimizer_steps: int) -> None:
        """The interval since the pass's last call, and the optimizer steps in it: between two of
        its batches, or — the call that found its iterator run out, where its length had ended the
        pass at its last batch — after that batch (a loop handed its batches one behind, as
        accelerate's loader does, has taken the last before it steps on the one before it)."""
        self.intervals += 1
        self.optimizer_between += max(0, optimizer_steps - self._opt_at_call)

    def call(self, t_call: float, optimizer_steps: int, thread: int) -> bool:
        """``next()`` was called. Returns True when this call completed the window."""
        self.threads.add(thread)
        if self._last_return is not None:  # from the previous call: a thread that only prefetches
            self.steps_since_last_call(optimizer_steps)  # sees the steps happen while it is blocked in next()
        self._opt_at_call = optimizer_steps
        if self.done:
            return False
        completing = self._pending is not None and self._last_return is not None
        mark = self.marks.mark() if self.marks is not None and (completing or self._skip == 0) else None
        if completing:
            if not self._complete(t_call, mark):
                self._pause()
                return False
            if self._full():
                self._read_now(t_call)
                self.finish()
                return True
        if self._skip == 0:
            self._begin(t_call, mark)
        return False

    def returned(
        self,
        t_call: float,
        t_return: float,
        images: int,
        split: Split | None = None,
    ) -> None:
        """``next()`` returned a batch of ``images`` samples (``split``: what its producer did
        meanwhile)."""
        self.batches += 1
        self._last_return = t_return
        key = (self.passes - 1, self._pass_k)
        self._pass_k += 1
        if self.done:
            return
        if len(self.handed) < HANDED_MAX:
            self.handed.append((*key, t_call, t_return))
        b = self.before
        if b is not None and not self.started:
            b.batches += 1
            b.wait_s += t_return - t_call
            if b.first_batch_s is None:
                b.first_batch_s = t_return - b.started_s
        if self._skip > 0:
            self._skip -= 1
            self._open = False
            return
        if self._open:
            ret = self.marks.mark() if self.marks is not None else None
            self._pending = _Pending(t_return - t_call, images, self._call_mark, ret, split, key)
        self._open = False

    # -- the window ----------------------------------------------------------------------------

    def _complete(self, t_call: float, mark: Any) -> bool:
        """Record the pending unit; False when its step was a pause (it is left out)."""
        p = self._pending
        assert p is not None and self._last_return is not None
        self._pending = None
        step = t_call - self._last_return
        steps, units = self._by_size
        median_step = steps[len(steps) // 2] if len(steps) >= GAP_MIN_STEPS else math.inf
        if step > GAP_FACTOR * median_step and step > units[len(units) // 2]:
            return False
        self.waits.append(p.wait_s)
        self.step_times.append(step)
        bisect.insort(steps, step)  # kept in order as they come: a batch's cost stays flat
        bisect.insort(units, p.wait_s + step)
        self._measured += p.wait_s + step
        self._waited += p.wait_s
        self.spans[-1][1] = t_call
        self.images.append(p.images)
        self.splits.append(p.split)
        self.unit_keys.append(p.key)
        if self.marks is not None:
            self.units.append((p.call_mark, p.return_mark, mark))
        last = self._seg_last
        if last is not None and t_call - last.at_s >= max(COUNTERS_EVERY_S, self._bytes_took_s / READ_BUDGET):
            cpu = self._seg_cpu
            self._read_now(t_call, cpu is None or t_call - cpu.at_s >= cpu.took_s / CPU_READ_BUDGET)
        return True

    def _pause(self) -> None:
        """A pause between batches: the segment ends; the batches queued meanwhile are skipped."""
        self.gaps += 1
        self.close_segment()
        self._skip = self.prefetch_depth
        self._open = False

    def _begin(self, t_call: float, mark: Any) -> None:
        if self._seg_start is None:
            self._seg_start = self._seg_last = self._seg_cpu = self.read(self._pids, t_call, True)
            self._seg_first_piece = len(self.pieces)
            self.segments += 1
            self.spans.append([t_call, t_call])
            b = self.before
            if not self.started and b is not None:
                b.seconds = t_call - b.started_s
                if b.reading is not None:
                    b.totals = Totals()
                    b.totals.add(b.reading, self._seg_start, self._seg_start)
            self.started = True
        self._open = True
        self._call_mark = mark

    def _read_now(self, t: float, cpu: bool = True) -> None:
        if self._seg_start is not None:
            self._advance(self.read(self._pids, t, cpu), cpu)

    def _advance(self, reading: Reading, cpu: bool = True) -> None:
        """The segment's last reading is now ``reading`` (with ``cpu``: its CPU's too): the piece
        since the one before is kept."""
        if self._seg_last is not None:
            piece = Totals()
            piece.add(self._seg_last, reading)
            if piece.spans:
                self.pieces.append(Piece.of(piece))
        self._seg_last = reading
        if cpu:
            self._seg_cpu = reading
        else:
            self._bytes_took_s = reading.took_s

    def _full(self) -> bool:
        return len(self.step_times) >= self.steps or (
            self.seconds is not None and self._measured >= self.seconds
        )

    def close_segment(self) -> None:
        if self._seg_start is not None and self._seg_last is not None:
            self.totals.add(self._seg_start, self._seg_last, self._seg_cpu)
            # a last piece shorter than the readings' spacing (the window's end, a pause) joins the
            # one before it: a batch's bytes over a few hundredths of a second are no rate
            if len(self.pieces) - self._seg_first_piece >= 2 and self.pieces[-1].seconds < COUNTERS_EVERY_S:
                last = self.pieces.pop()
                self.pieces[-1] = self.pieces[-1].then(last)
        self._seg_start = self._seg_last = self._seg_cpu = None
        self._pending = None
        self._open = False

    def finish(self) -> None:
        if not self.done:
            self.close_segment()
            self.done = True

    def totals_now(self) -> Totals:
        """The totals, with the open segment's span so far (a window the script cut short)."""
        return self.totals.plus(self._seg_start, self._seg_last, self._seg_cpu)

    @property
    def measured_s(self) -> float:
        return self._measured

    @property
    def busy_share(self) -> float:
        """The share of the window's time so far the loop did not wait for its data (1 before any)."""
        return 1.0 - self._waited / self._measured if self._measured > 0 else 1.0

    @property
    def median_unit_s(self) -> float | None:
        """The median unit (wait and step) so far; None before the first."""
        units = self._by_size[1]
        return units[len(units) // 2] if units else None
