"""What the kernel's scheduler and I/O accounting say about a process and its threads, read
straight from ``/proc`` (no psutil: these are read at batch boundaries of a user's loop, where
microseconds count).

- ``/proc/PID/task/TID/schedstat``: nanoseconds the thread ran on a CPU, nanoseconds it was
  runnable but waiting for one (run-queue delay), and its time slices. What is neither was
  off-CPU: blocked in a read (disk, network, a pipe), on a lock, or idle.
- ``/proc/PID/stat``: the process's CPU time, all its threads, and its reaped children's.
- ``/proc/PID/io`` and ``/proc/PID/task/TID/io``: ``rchar`` is what ``read()``-family calls
  returned (files, pipes, TLS sockets: OpenSSL reads with ``read()``), ``read_bytes`` what was
  fetched from a block device. Checked on this kernel: plain ``recv()`` on a socket (Python's
  ``socket`` module, ``curl`` over plain HTTP) is not counted in ``rchar`` at all, and a reaped
  child's counts fold into its parent's process total, not into any of its threads'. So the
  own threads' ``rchar`` of a worker counts each byte it was handed once (a file's, a pipe's
  from ``curl``, a TLS socket's) and never a child's again.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass

from ioprof.host.libc import listdir_held, open_held, pread_held, read_held, readlink_held

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ThreadTimes:
    """One thread's scheduler totals so far."""

    cpu_s: float  # on a CPU
    runq_s: float  # runnable, waiting for a CPU


@dataclass(frozen=True)
class ProcSample:
    """One process at one moment: CPU (its threads, and its reaped children apart), I/O counters,
    and each thread's scheduler totals."""

    pid: int
    cpu_s: float  # every thread of the process, alive or exited: its CPU clock (utime + stime where unread)
    children_cpu_s: float  # cutime + cstime: children it reaped (a pass's workers, curl)
    rchar: int  # the process's reads, reaped children included
    read_bytes: int  # fetched from a block device, reaped children included
    own_rchar: int  # its living threads' own reads: no child's
    threads: dict[int, ThreadTimes]
    ppid: int = 0  # its parent: the process that reaps it, and takes its CPU then

    @property
    def runq_s(self) -> float:
        return sum(t.runq_s for t in self.threads.values())


def parse_schedstat(text: bytes) -> ThreadTimes:
    run_ns, wait_ns, *_ = text.split()
    return ThreadTimes(int(run_ns) / 1e9, int(wait_ns) / 1e9)


def parse_ppid(text: bytes) -> int:
    """The parent's pid, from ``/proc/PID/stat`` (field 4)."""
    return int(text[text.rindex(b")") + 2 :].split()[1])


def parse_stat(text: bytes) -> tuple[float, float]:
    """(utime + stime, cutime + cstime) in seconds, from ``/proc/PID/stat``."""
    fields = text[text.rindex(b")") + 2 :].split()
    # after the command: state is field 3, utime 14, stime 15, cutime 16, cstime 17
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) * TICK_S, (cutime + cstime) * TICK_S


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds of every thread of ``pid``, living or ended, to the nanosecond and up to this
    moment: the process's CPU clock (``clock_gettime`` on ``MAKE_PROCESS_CPUCLOCK(pid, SCHED)``,
    a quarter of a µs). ``/proc/PID/stat`` counts whole clock ticks, and a thread's ``schedstat``
    lags by what it ran since the scheduler last looked while it runs: over a span of one batch
    (10-20 ms) the one left the cores figure up to 5 % high where a worker's CPU at its start was
    subtracted, the other 4 % low. None where it cannot be read (gone)."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2) / 1e9
    except OSError:
        return None


def parse_io(text: bytes) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(b":")
        out[name.decode()] = int(value)
    return out


def _tids(pid: int) -> list[str]:
    return listdir_held(f"/proc/{pid}/task") or []


def thread_times(pid: int, tids: list[str] | None = None) -> dict[int, ThreadTimes]:
    """Every living thread of ``pid`` (``tids``: as listed already): its CPU and run-queue totals."""
    out = {}
    for tid in _tids(pid) if tids is None else tids:
        text = read_held(f"/proc/{pid}/task/{tid}/schedstat")
        if text:
            out[int(tid)] = parse_schedstat(text)
    return out


def own_rchar(pid: int, tids: list[str] | None = None) -> int:
    """``rchar`` of the living threads of ``pid``: what they read themselves, no child's."""
    total = 0
    for tid in _tids(pid) if tids is None else tids:
        text = read_held(f"/proc/{pid}/task/{tid}/io")
        if text:
            total += parse_io(text).get("rchar", 0)
    return total


def sample(pid: int, *, threads: bool = True, own: bool = True) -> ProcSample | None:
    """``pid`` now (None when it is gone or cannot be read). Each of its threads is read twice
    for ``threads`` and ``own`` (its scheduler totals, its own reads): a training process has
    dozens, so a caller asks only for what it uses (``own_rchar`` is 0 without ``own``)."""
    stat, io = read_held(f"/proc/{pid}/stat"), read_held(f"/proc/{pid}/io")
    if not stat or not io:
        return None
    try:
        cpu, children = parse_stat(stat)
        parent = parse_ppid(stat)
        counters = parse_io(io)
    except (ValueError, IndexError):
        return None
    exact = process_cpu_s(pid)
    cpu = cpu if exact is None else exact
    tids = _tids(pid) if threads or own else []
    return ProcSample(
        pid=pid,
        cpu_s=cpu,
        children_cpu_s=children,
        rchar=counters.get("rchar", 0),
        read_bytes=counters.get("read_bytes", 0),
        own_rchar=own_rchar(pid, tids) if own else 0,
        threads=thread_times(pid, tids) if threads else {},
        ppid=parent,
    )


def reads(pid: int) -> tuple[int, int, int] | None:
    """``pid``'s reads now, nothing else: (``rchar``, ``read_bytes``, its living threads' own
    ``rchar``); None when it is gone or cannot be read."""
    io = read_held(f"/proc/{pid}/io")
    if not io:
        return None
    try:
        counters = parse_io(io)
    except ValueError:
        return None
    return counters.get("rchar", 0), counters.get("read_bytes", 0), own_rchar(pid)


def descriptors(pid: int) -> list[tuple[str, str]]:
    """Each descriptor ``pid`` holds and what it points to (a file's path, ``socket:[INODE]``),
    read holding the GIL: the training process's other threads may be busy."""
    out = []
    for fd in listdir_held(f"/proc/{pid}/fd") or ():
        target = readlink_held(f"/proc/{pid}/fd/{fd}")
        if target is not None:
            out.append((fd, target))
    return out


def children(pid: int) -> list[int]:
    """The living children of ``pid`` (every thread's), from ``/proc/PID/task/TID/children``."""
    out: list[int] = []
    for tid in _tids(pid):
        text = read_held(f"/proc/{pid}/task/{tid}/children")
        if text:
            out.extend(int(c) for c in text.split())
    return out


READ_TRIES = 4  # a thread's total that moves at every read is one that runs: the last is kept


class ThreadClock:
    """One thread's scheduler totals and its process's CPU, read cheaply and often — for the
    thread that produces a batch, at each wait. The thread's from its ``schedstat`` (an open file
    read with ``pread``: a few µs), its process's from the process's CPU clock (``process_cpu_s``):
    nanoseconds, where ``/proc/PID/stat`` counts whole clock ticks — 10 ms, more than a fast
    loop's whole wait, so its other threads' CPU in one wait read -10 to +10 ms."""

    def __init__(self, pid: int, tid: int | None = None, *, process: bool = True) -> None:
        """``process`` False: the thread's totals alone (its process's CPU read as 0.0) — the
        process's CPU costs the kernel a walk over all its threads (a training process has dozens)."""
        self.pid = pid
        self.tid = tid or pid
        # opened holding the GIL: a clock is opened at a batch, for a worker first awaited then
        self._sched = open_held(f"/proc/{pid}/task/{self.tid}/schedstat")
        self._process = process
        if process and process_cpu_s(pid) is None:
            os.close(self._sched)
            raise ProcessLookupError(pid)

    def _thread(self) -> ThreadTimes | None:
        try:
            return parse_schedstat(pread_held(self._sched, 128))
        except (OSError, ValueError, IndexError):
            return None

    def read(self) -> tuple[ThreadTimes, float] | None:
        """(this thread's totals, its process's CPU seconds), or None once it is gone.

        Both sum the same per-thread totals, which the kernel brings up to date at its ticks and
        switches; read one after the other, a reader put off a core between the two sees the
        thread's last few ms in its process's CPU and not in its own, and its other threads are
        given them. So the thread is read on both sides of its process, again until the two agree
        (the process was read at a moment the thread's total held), where they differ."""
        times = self._thread()
        if times is None or not self._process:
            return None if times is None else (times, 0.0)
        process: float | None = None
        for _ in range(READ_TRIES):
            process = process_cpu_s(self.pid)
            after = self._thread()
            if process is None or after is None:
                return None
            if after.cpu_s == times.cpu_s:
                return after, process
            times = after
        return None if process is None else (times, process)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._sched)


class RunQueueWait:
    """The run-queue wait of the thread that made it, in seconds, read in that thread: a stage timed
    by the wall clock holds whatever wait the scheduler put inside it, and this takes it off.
    ``available`` False where the kernel does not count it."""

    def __init__(self) -> None:
        self.thread = threading.get_native_id()
        self._fd: int | None = None
        self.available = False
        with contextlib.suppress(OSError, ValueError, IndexError):
            self._fd = os.open(f"/proc/self/task/{self.thread}/schedstat", os.O_RDONLY)
            # counted where this thread, running now, has time on a CPU (a kernel without the
            # scheduler's statistics writes "0 0 0")
            self.available = int(os.pread(self._fd, 128, 0).split()[0]) > 0
        if not self.available:
            self.close()

    def here(self) -> bool:
        """Whether the calling thread's wait is counted (it is the thread that made this)."""
        return self.available and threading.get_native_id() == self.thread

    def seconds(self) -> float:
        """The wait so far (it only grows), or 0.0 where it is not counted for this thread. Read
        at both ends of every stage: one ``pread``, and parse_schedstat's second field parsed in
        place (no record built)."""
        if self._fd is None or threading.get_native_id() != self.thread:
            return 0.0
        try:
            # os.pread: a worker's stages are timed by the thousand, and holding the GIL costs a
            # call 2 µs more through ctypes, where a worker rarely runs a busy thread of its own
            return int(os.pread(self._fd, 128, 0).split()[1]) * 1e-9
        except (OSError, ValueError, IndexError):
            return 0.0

    def both(self) -> tuple[float, float]:
        """(time on a CPU, the wait) so far, from the one ``pread``; (0.0, 0.0) where not counted."""
        if self._fd is None or threading.get_native_id() != self.thread:
            return 0.0, 0.0
        try:
            on, wait = os.pread(self._fd, 128, 0).split()[:2]
            return int(on) * 1e-9, int(wait) * 1e-9
        except (OSError, ValueError):
            return 0.0, 0.0

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self.available = None, False


@dataclass(frozen=True)
class MachineCpu:
    """``/proc/stat``'s first line: the whole machine's busy and total CPU seconds."""

    busy_s: float
    total_s: float


def machine_cpu() -> MachineCpu | None:
    """The machine's CPU time so far, busy (user, nice, system, irq, softirq, steal) and in all."""
    text = read_held("/proc/stat")
    if not text:
        return None
    fields = [int(x) for x in text.split(b"\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return MachineCpu(busy * TICK_S, (busy + idle + iowait) * TICK_S)
