"""The pin-memory copy of each batch, timed in the training process (torch's pin thread, or the
main thread without workers): one of the loader's stages that happens outside its workers."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any


class PinTimes:
    """Times torch's pin-memory copy of each batch (the pin thread's, or the main thread's without
    workers): (thread ident, end time, seconds), the outermost call of its recursion only."""

    def __init__(self) -> None:
        self.records: deque[tuple[int, float, float]] = deque(maxlen=50_000)
        self._depth = threading.local()
        self._undo: Callable[[], None] | None = None

    def install(self) -> None:
        from torch.utils.data._utils import pin_memory as pin_mod

        original = pin_mod.pin_memory
        times = self

        def pin_memory(data: Any, device: Any = None) -> Any:
            depth = getattr(times._depth, "n", 0)
            times._depth.n = depth + 1
            t0 = time.perf_counter()
            try:
                return original(data, device)
            finally:
                times._depth.n = depth
                if depth == 0:
                    t1 = time.perf_counter()
                    times.records.append((threading.get_ident(), t1, t1 - t0))

        pin_mod.pin_memory = pin_memory
        self._undo = lambda: setattr(pin_mod, "pin_memory", original)

    def uninstall(self) -> None:
        if self._undo is not None:
            self._undo()
            self._undo = None

    def between(self, thread: int | None, start_s: float, end_s: float) -> list[float]:
        return [
            s
            for ident, t, s in list(self.records)
            if start_s <= t <= end_s and (thread is None or ident == thread)
        ]
