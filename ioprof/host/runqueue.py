"""How long one thread has waited for a core: runnable, not running, because others held every core.

The kernel counts it for each thread (``/proc/thread-self/schedstat``: time on a core, time
waiting in a run queue, timeslices — ``Documentation/scheduler/sched-stats.rst``). A stage timed
by the wall clock includes that wait, wherever the scheduler happened to preempt; taken off, a
stage is charged with its own work and its own blocking (a read) only, and the waits are counted
apart. Reading it is one ``pread`` on a file opened once (well under a microsecond here).
"""

from __future__ import annotations

import contextlib
import os
import threading


class RunQueueWait:
    """The run-queue wait of the thread that made it, in seconds; 0 from another thread, or where
    the kernel does not count it (``available`` False)."""

    def __init__(self) -> None:
        self.thread = threading.get_native_id()
        try:
            self._fd: int | None = os.open(f"/proc/self/task/{self.thread}/schedstat", os.O_RDONLY)
            self.available = self._read() is not None
        except OSError:
            self._fd, self.available = None, False

    def _read(self) -> float | None:
        if self._fd is None:
            return None
        try:
            fields = os.pread(self._fd, 96, 0).split()
            return int(fields[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return None

    def here(self) -> bool:
        """Whether the calling thread's wait is counted (it is the thread that made this)."""
        return self.available and threading.get_native_id() == self.thread

    def seconds(self) -> float:
        """The wait so far (only ever grows), or 0.0 where it cannot be read for this thread."""
        if not self.here():
            return 0.0
        return self._read() or 0.0

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd, self.available = None, False
