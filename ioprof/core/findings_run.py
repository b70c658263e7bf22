"""What the analysis says of the shape of a loop's waits (words: ``render/findings.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ioprof.core.findings import Finding


@dataclass(frozen=True)
class WaitInFewStalls(Finding):
    """Most of a window's data wait lay in a few of its turns (a batch from each worker) beyond the
    far fence of all its turns' waits (Q3 + 3 IQR): stalls no batch's making explains — a library's
    sleep as its data runs out, a pass's end, a lock — between which the loader kept up far better
    than the window's share says."""

    kind: ClassVar[str] = "wait-in-few-stalls"
    dataset: str
    setting: str
    stalls: int  # the fewest turns that hold half the wait, longest first, each beyond the far fence
    waits: int  # the window's turns (its waits, where a turn is one batch)
    stall_s: tuple[float, ...]  # their waits (and any as long), in the window's order
    share_of_wait: float  # of the window's data wait, the stalls' part
    wait_share: float  # the window's data wait share, stalls included
    wait_share_without: float  # ... and with the stalls' time left out of the window
    median_wait_s: float  # the other turns' median wait
    per_turn: int = 1  # batches in a turn: one from each worker (one for the serial loader)
