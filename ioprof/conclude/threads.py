"""Threads against processes (``ioprof run``): whether the user's pipeline releases the GIL.

The probe runs the user's dataset, transforms and collate from memory in worker processes and,
at the loader's own count, in as many threads of one process (torchdata's thread pool). Decode
in PIL and torchvision's tensor ops release the GIL, so threads keep pace with processes; a
transform written in Python holds it, so threads take turns and fall behind. Decided only beyond
both 95 % intervals: threads slower than processes — they will not help; as fast (the threads'
interval's low end within ``DECIDED_REL_HALF_WIDTH`` of the processes' rate) — they would serve
as well, without a process (its own memory, its start-up) for each worker.
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
    call: ThreadsCall = "undecided"
    if t.known and p.known:
        if t.high < p.low:
            call = "holds-the-gil"
        elif t.low >= (1 - DECIDED_REL_HALF_WIDTH) * p.value:  # within what changes no answer
            call = "as-fast"
    return ThreadsAgainstProcesses(dc.dataset, threads.workers, t, p, call)
