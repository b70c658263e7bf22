"""Threads against processes (``ioprof run``): whether the user's pipeline releases the GIL.

The probe runs the user's dataset, transforms and collate from memory in worker processes and,
at the loader's own count, in as many threads of one process (a thread pool). Decode
in PIL and torchvision's tensor ops release the GIL, so threads keep pace with processes; a
transform written in Python holds it, so threads take turns and fall behind. A rate within
``DECIDED_REL_HALF_WIDTH`` of another changes no answer: threads slower than processes by more
than that, beyond both 95 % intervals, will not help (the pipeline holds the GIL); threads within
it would serve as well, without a process (its own memory, its start-up) for each worker. A small
deficit beyond the intervals is not the GIL held: Python's own steps around a released decode
cost threads a few per cent; and a deficit the intervals cannot confirm is not decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ioprof.core.config import DECIDED_REL_HALF_WIDTH
from ioprof.core.results import DatasetCeilings
from ioprof.core.stats import Interval

ThreadsCall = Literal["holds-the-gil", "as-fast", "undecided"]


@dataclass(frozen=True)
class ThreadsAgainstProcesses:
    dataset: str
    workers: int
    threads: Interval  # img/s in ``workers`` threads of one process
    processes: Interval  # img/s in ``workers`` worker processes
    call: ThreadsCall


def threads_against_processes(dc: DatasetCeilings) -> ThreadsAgainstProcesses | None:
    """The threads' ceiling beside the processes' at the same count, or None where not both ran."""
    threads = next((d for d in dc.decode if d.loader == "threads"), None)
    if threads is None:
        return None
    procs = next((d for d in dc.decode if d.loader == "multiprocess" and d.workers == threads.workers), None)
    if procs is None:
        return None
    t, p = threads.throughput(), procs.throughput()
    return ThreadsAgainstProcesses(dc.dataset, threads.workers, t, p, call_of(t, p))


def call_of(threads: Interval, processes: Interval) -> ThreadsCall:
    """Threads' rate against the processes' at the same count, in one word."""
    near = 1 - DECIDED_REL_HALF_WIDTH  # a rate within this of another changes no answer
    if threads.known and processes.known and threads.high < near * processes.low:
        return "holds-the-gil"  # slower than the processes by more than that, beyond both intervals
    if threads.value >= near * processes.value:
        return "as-fast"
    return "undecided"
