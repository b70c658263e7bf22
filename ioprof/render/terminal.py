"""What a measuring command prints on the terminal: progress lines (stderr) as it measures."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ioprof.render import words


class TerminalProgress:
    """Prints status notes and finished measurements, each prefixed with the seconds since start."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._t0 = time.perf_counter()

    def __call__(self, text: str) -> None:
        stream = self._stream or sys.stderr
        print(f"[{time.perf_counter() - self._t0:6.1f} s] {text}", file=stream, flush=True)

    def measured(self, result: object, *, dataset: str = "", position: str = "", took_s: float = 0.0) -> None:
        self(words.measured(result, dataset=dataset, position=position, took_s=took_s))
