"""A Python thread that never waits, beside a training loop: a metrics or logging thread, a
prefetcher of its own. It takes the GIL at every switch it is offered."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def busy_thread(on: bool = True) -> Iterator[None]:
    """The thread runs inside the block (where ``on``), and is joined at its end."""
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            x += 1

    t = threading.Thread(target=spin, name="busy", daemon=True)
    if on:
        t.start()
    try:
        yield
    finally:
        stop.set()
        if on:
            t.join()
