"""Per-step timing on CUDA from events, with no synchronization inside the measured window.

On a GPU the host only *enqueues* a step's copy and kernels and goes on to fetch the next
batch while the GPU works; a loop that synchronizes every step measures a different, slower
loop. So each step records three CUDA events on the stream — before the host-to-device copy,
after it, after the optimizer step — and one more marks the window's start. On the GPU's own
clock they tile its timeline step by step:

    idle gap (previous step's end → this copy's start) | copy | compute

The idle gap is charged to data loading only as far as the host was blocked in ``next()`` for
this batch: the GPU starves for data exactly while both hold, so the stall is
``min(gap, host wait)``. The rest of the gap is host overhead (Python, kernel launches).
The events are read once, after the window ends and the device has been synchronized.

Pure: works on anything with CUDA events' ``elapsed_time(end) -> milliseconds``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ioprof.core.gpu import CudaStepTimes


class TimingEvent(Protocol):
    def elapsed_time(self, end_event: Any) -> float:
        """Milliseconds from this event to ``end_event`` (as ``torch.cuda.Event``)."""


@dataclass(frozen=True)
class StepEvents:
    """The events one step recorded on its stream."""

    copy_start: TimingEvent
    copy_end: TimingEvent
    step_end: TimingEvent


def _seconds(start: TimingEvent, end: TimingEvent) -> float:
    return max(0.0, start.elapsed_time(end) / 1e3)


def resolve(
    window_start: TimingEvent, steps: Sequence[StepEvents], host_wait_s: Sequence[float]
) -> CudaStepTimes:
    """Per-step GPU idle, data stall, copy and compute of a finished, synchronized window."""
    if len(steps) != len(host_wait_s):
        raise ValueError(f"{len(steps)} steps' events but {len(host_wait_s)} host waits")
    idle, stall, copy, compute = [], [], [], []
    previous_end = window_start
    for ev, wait in zip(steps, host_wait_s, strict=True):
        gap = _seconds(previous_end, ev.copy_start)
        idle.append(gap)
        stall.append(min(gap, max(0.0, wait)))
        copy.append(_seconds(ev.copy_start, ev.copy_end))
        compute.append(_seconds(ev.copy_end, ev.step_end))
        previous_end = ev.step_end
    return CudaStepTimes(
        host_wait_s=tuple(host_wait_s),
        idle_s=tuple(idle),
        data_stall_s=tuple(stall),
        copy_s=tuple(copy),
        compute_s=tuple(compute),
        elapsed_s=_seconds(window_start, previous_end) if steps else 0.0,
    )
