"""A Ctrl-C that lands while this process forks its loader's workers is kept, not lost.

Python runs a signal's handler at the first Python code after the system call the signal
interrupted; after ``fork()`` that is the at-fork callbacks (logging's lock release among them),
whose exceptions Python prints as "ignored" and drops. A KeyboardInterrupt raised there never
reaches ioprof and the run goes on: 1 Ctrl-C in 8, sent to a process of torch's size while it
forked in a loop. While a loader starts its workers, ``kept_interrupts`` only notes a SIGINT, and
raises it once the forks are done.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def kept_interrupts() -> Iterator[None]:
    """Within: a SIGINT is noted; on leaving, the handler that was in place is put back and given
    it (Python's own raises KeyboardInterrupt there). A worker forked within keeps the handler
    that was in place (a Ctrl-C ends it as before). Only the main thread can handle signals:
    elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen: list[int] = []
    me = os.getpid()

    def note(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != me:  # a worker forked meanwhile: as it would have been without
            if callable(previous):
                previous(signum, frame)
            else:
                raise KeyboardInterrupt
        seen.append(signum)

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
        if seen and callable(previous):
            previous(signal.SIGINT, None)
        elif seen and previous in (signal.SIG_DFL, None):
            os.kill(os.getpid(), signal.SIGINT)
