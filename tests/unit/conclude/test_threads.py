"""Threads against processes, the rule: threads are called by the reading they are nearer — one
process alone (the GIL held: one sample at a time) or the processes at the same count (released)
— only where their interval and the midway's lie on one side; where the processes gain nothing
over one process alone, there is nothing to tell apart."""

from __future__ import annotations

import math
import random
import statistics

from ioprof.conclude.threads import call_of
from ioprof.core.stats import Interval, t_975

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


def test_three_readings_measured_apart_are_weighed_together() -> None:
    # as CI saw PIL's decode in 3 s a loader: threads well past midway (117), yet their low end
    # (129) short of midway's high end (131) — the bounds of three independent readings summed as
    # if all three erred to their far ends at once, which is far rarer than 5 %
    threads = Interval(150.6, 128.9, 172.3, 10)
    assert (
        call_of(threads, Interval(146.0, 128.0, 164.0, 10), Interval(88.8, 79.0, 98.5, 10))
        == "releases-the-gil"
    )


def test_threads_exactly_midway_are_called_at_most_one_time_in_twenty() -> None:
    # the rule's own false calls: three loaders each read as 10 batch means with their spread,
    # threads' true rate exactly midway between one process (100) and the processes (200); the
    # threads' interval alone against midway's point would call 17 % of them
    rng = random.Random(7)

    def reading(mean: float, sd: float) -> Interval:
        xs = [rng.gauss(mean, sd) for _ in range(10)]
        m = statistics.fmean(xs)
        half = t_975(9) * statistics.stdev(xs) / math.sqrt(10)
        return Interval(m, m - half, m + half, 10)

    trials = 4000
    calls = sum(
        call_of(reading(150.0, 15.0), reading(200.0, 30.0), reading(100.0, 20.0)) != "undecided"
        for _ in range(trials)
    )
    assert calls / trials <= 0.06, calls / trials
