"""Threads against processes, the rule: threads are called by the reading they are nearer — one
process alone (the GIL held: one sample at a time) or the processes at the same count (released)
— only where their interval and the midway's lie on one side; where the processes gain nothing
over one process alone, there is nothing to tell apart."""

from __future__ import annotations

from ioprof.conclude.threads import call_of
from ioprof.core.stats import Interval

ONE = Interval(112.0, 106.0, 118.0, 10)  # one process alone
PROCESSES = Interval(218.0, 207.0, 230.0, 10)  # two worker processes, on two cores


def test_threads_are_called_by_the_reading_they_are_nearer() -> None:
    # PIL's decode on a loaded host (as CI saw it): threads 11 % behind the processes, beyond both
    # intervals — Python's own steps around a released decode, far nearer the processes than one
    assert call_of(Interval(193.6, 187.1, 200.1, 10), PROCESSES, ONE) == "releases-the-gil"
    # a transform that holds the GIL: threads at one process's rate, or below it (they contend)
    assert call_of(Interval(113.0, 106.0, 120.0, 10), PROCESSES, ONE) == "holds-the-gil"
    assert call_of(Interval(95.0, 90.0, 100.0, 10), PROCESSES, ONE) == "holds-the-gil"
    # threads faster than processes (no batches to send between processes): released
    assert call_of(Interval(240.0, 235.0, 245.0, 10), PROCESSES, ONE) == "releases-the-gil"


def test_an_interval_reaching_midway_is_not_decided() -> None:
    # midway is 162.5 [156.5–174]: threads at 170 [150–190] could be either
    assert call_of(Interval(170.0, 150.0, 190.0, 10), PROCESSES, ONE) == "undecided"
    assert call_of(Interval(165.0, 160.0, 170.0, 10), PROCESSES, ONE) == "undecided"
    assert call_of(Interval(193.6, 187.1, 200.1, 1), PROCESSES, ONE) == "undecided"  # too few batches


def test_processes_that_gain_nothing_over_one_leave_nothing_to_tell_apart() -> None:
    # one core, or a pipeline too cheap to share: processes no faster than one process alone
    same = Interval(115.0, 105.0, 125.0, 10)
    assert call_of(Interval(113.0, 106.0, 120.0, 10), same, ONE) == "no-gain"
