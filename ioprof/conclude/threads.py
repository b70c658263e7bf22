"""Threads against processes (``ioprof run``): whether the user's pipeline releases the GIL.

The probe runs the user's dataset, transforms and collate from memory in one process alone, in
worker processes and, at the loader's own count, in as many threads of one process (a thread
pool). Two readings are then possible. Where the pipeline's work holds the GIL (a transform
written in Python), threads take turns: they make what one process alone makes. Where it releases
the GIL (decode in PIL, torchvision's tensor ops), threads work at once, as processes do: they
make what the processes make, less Python's own steps around each sample. The threads' rate is
called by the reading it is nearer — below or above midway between one process alone and the
processes — and only where its distance from midway is beyond that distance's interval. Where the
processes gain nothing over one process alone, there is nothing for threads to keep or lose, and
no call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ioprof.core.results import DatasetCeilings, DecodeCeiling
from ioprof.core.stats import Interval, combination, quotient

ThreadsCall = Literal["holds-the-gil", "releases-the-gil", "no-gain", "undecided"]


@dataclass(frozen=True)
class ThreadsAgainstProcesses:
    dataset: str
    workers: int
    threads: Interval  # img/s in ``workers`` threads of one process
    processes: Interval  # img/s in ``workers`` worker processes
    one: Interval  # img/s in one process alone (no workers): one sample at a time
    call: ThreadsCall

    @property
    def share(self) -> Interval:
        """The threads' rate as a share of the processes' (its interval from both)."""
        return quotient(self.threads, self.processes)


def threads_against_processes(dc: DatasetCeilings) -> ThreadsAgainstProcesses | None:
    """The threads' ceiling beside the processes' at the same count and one process's alone, or
    None where not all three ran."""
    found = trio(dc.decode)
    if found is None:
        return None
    t, p, o = (d.throughput() for d in found)
    return ThreadsAgainstProcesses(dc.dataset, found[0].workers, t, p, o, call_of(t, p, o))


def trio(decode: Sequence[DecodeCeiling]) -> tuple[DecodeCeiling, DecodeCeiling, DecodeCeiling] | None:
    """The threads' reading, the processes' at the same count and one process's alone, in that
    order, or None where not all three ran."""
    threads = next((d for d in decode if d.loader == "threads"), None)
    if threads is None:
        return None
    procs = next((d for d in decode if d.loader == "multiprocess" and d.workers == threads.workers), None)
    one = next((d for d in decode if d.loader == "serial"), None)
    if procs is None or one is None:
        return None
    return threads, procs, one


def call_of(threads: Interval, processes: Interval, one: Interval) -> ThreadsCall:
    """Threads' rate against the two readings it can be nearer: one process alone (the GIL
    held) or the processes at the same count (released). The three are measured apart, so the
    distances compared carry all three intervals, in quadrature (``stats.combination``)."""
    if not (threads.known and processes.known and one.known):
        return "undecided"
    if combination([(1.0, processes), (-1.0, one)]).low <= 0:
        return "no-gain"  # the processes' gain over one alone is not confirmed: nothing to tell apart
    past_midway = combination([(1.0, threads), (-0.5, one), (-0.5, processes)])
    if past_midway.high < 0:
        return "holds-the-gil"
    if past_midway.low > 0:
        return "releases-the-gil"
    return "undecided"
