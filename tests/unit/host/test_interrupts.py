"""A Ctrl-C that lands while this process forks (a loader starting its workers) is not lost.

Unkept, Python runs the handler at the first Python code after ``fork()``: the at-fork callbacks,
whose exceptions it drops ("Exception ignored in: <function _releaseLock …>"): 1 Ctrl-C in 8 sent
to a process of torch's size forking in a loop went unseen (the loop ran to its end)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from ioprof.host.interrupts import kept_interrupts


def _forks(n: int) -> int:
    done = 0
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        done += 1
    return done


def _forks_past(timer: threading.Timer, after: int = 3) -> int:
    """Fork until the timer has fired, then ``after`` more times: the forks done. (A fork of the
    test process takes ~5 ms alone and ~75 ms late in a CI run, whose process is large.)"""
    done = more = 0
    while more < after:
        done += _forks(1)
        more += not timer.is_alive()
    return done


def test_a_ctrl_c_while_forking_is_raised_once_the_forks_are_done() -> None:
    """SIGINT sent while the forks go on: every fork is done, then KeyboardInterrupt — each time
    (unkept it is raised mid-loop, or lost)."""
    for _ in range(5):
        done = 0
        timer = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT))
        with pytest.raises(KeyboardInterrupt), kept_interrupts():
            timer.start()
            done = _forks_past(timer)
        assert done >= 3  # the forks went on past the signal, to their end
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_without_a_ctrl_c_nothing_changes_and_off_the_main_thread_it_does_nothing() -> None:
    with kept_interrupts():
        assert _forks(2) == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    seen: list[object] = []

    def other() -> None:
        with kept_interrupts():
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [signal.default_int_handler]
    time.sleep(0)  # nothing pending


def test_a_worker_forked_within_still_gets_its_ctrl_c() -> None:
    """A loader's worker forked meanwhile is interrupted as before (it would otherwise run on, in
    a blocking read on slow storage, until its loader shut it down)."""
    r, w = os.pipe()
    with kept_interrupts():
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                time.sleep(10)
                os.write(w, b"slept")
            except KeyboardInterrupt:
                os.write(w, b"interrupted")
            os._exit(0)
        os.close(w)
        time.sleep(0.3)
        os.kill(pid, signal.SIGINT)
        os.waitpid(pid, 0)
    assert os.read(r, 32) == b"interrupted"
    os.close(r)
