"""A cell's rate and data-wait share, from the training loop's steps or the workers' own batches.

The loop sees one wait per batch, but with a fast step (a GPU's) and W workers the waits come in
turns: one long wait, then the other W − 1 batches at once. Batch means over whole turns then
leave a handful of groups, a t-interval with one or two degrees of freedom, for a rate that
the loader knows far better: every worker times each batch it makes. A worker is a renewal
process — it makes a batch, hands it over, takes the next index — so each batch it completes
after its first gives one cycle (the time since its previous batch was done: the making, the
hand-over and any wait for an index), and the loader delivers W batches per mean cycle. Where
the workers keep up, the loop paces them and their cycles are its period; where they do not,
their cycles are their own. Either way the cycles measure the rate the loop received. A window's
first cycles can still run at the workers' start-up pace (pages first touched, the cell before
still exiting); where they differ from the rest beyond chance they are left out
(``stats.transient_start``).

Which side an interval rests on is decided by counting the independent observations each
side has, never by which interval is narrower: the loop's whole turns of the workers against the
workers' cycles — the workers', where they completed more cycles than the loop took whole turns,
else the loop's. Where the workers keep ahead in turn, a turn of the loop is one worker's cycle (it
waits for the batch of the one it is on; the others' are ready): it sees one worker's cycle a turn
where the workers' own batches hold W. The window holds whole turns (``RunLength.warmup_for``,
``stats.Looks``), and the loop's own total (images ÷ its window's time) must agree with the
workers' interval (``_agrees``), else the loop's side is used: a window over a new pass's forked
workers holds their start-up, a wait the loop took that no cycle holds (each one's first batch has
none), and where it moves the loop's total beyond the workers' interval, their interval is not
the loop's. Where it does not, the interval still reaches the loop's own total.
Each figure rests on the side that observes it where that side has the observations: the rate on
the workers', the data-wait share on the loop's own waits (the loop waits; the workers only tell
the rate that share follows from with the step, and where their batches vary as a network's reads
do, a share of 89 % read from them reached below 5 %) — from the workers' rate and the step only
where the loop's window holds fewer than ``stats.MIN_BATCHES`` whole turns.
Where the workers could make wholly more than the step takes (their time making batches, never
idle, against the step alone), the loop's steps are the pace and each is its own observation.
Where the workers completed fewer batches in the window than the loop took in it (the batches
counted on both sides) and their cycles say they made them more slowly, the loop drained a queue
filled before its window — its first steps slow (an accelerator's set-up, a compile) while the
workers read ahead —, which no longer run holds: the rate is the workers', from their cycles, and
the wait share what the loop's own steps leave at that rate; a drain only spares the loop waits, so
that share is never below the loop's own. Whether it drained is counted, not tested for
significance: a drain's bias is not noise — it is counted before the workers' side is taken,
where the loop's window holds the ``stats.MIN_BATCHES`` whole turns that its own share, which a
drain's rests on, needs (in fewer, a turn's batches made before the window are most of the count's
difference, and the workers' side stands where the loop's total agrees). Where they outpace the loop, the queue only fills, and
the loop's figures stand; a loop that never steps (a decode ceiling's) takes each batch as it
comes, fills no queue and drains none.
Whatever side, no interval reaches beyond what the hardware allows: a rate above what
the step alone allows (images ÷ the step's time, the loop with no wait at all), or above what the
workers could make were they never idle; a wait share outside [0, 1 − the rate ÷ the step's].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ioprof.core.stats import MIN_BATCHES, Interval, ratio_interval, transient_start, wait_share_interval
from ioprof.core.thresholds import HIGHLY_INPUT_BOUND_SHARE, MIN_BUSY_SHARE, MODERATELY_INPUT_BOUND_SHARE

# the loop in whole turns, its steps one by one, the workers (where its turns are few), what the
# workers made in the window (where the loop drained a queue they had filled before it)
Method = Literal["loop", "steps", "workers", "drained"]

# A batch a worker completed in a cell's window: (its cycle in s — since that worker's previous
# batch was done, 0 for a worker's first batch —, the seconds it spent making it, its images).
Produced = tuple[float, float, int]


@dataclass(frozen=True)
class CellRates:
    """A cell's rate (img/s) and data-wait share with their 95 % intervals, the side they rest on,
    and the whole turns of the workers the loop's window held."""

    throughput: Interval
    wait_share: Interval
    method: Method
    turns: float  # measured steps ÷ workers (steps, for a loader without workers)

    @property
    def share_from_workers(self) -> bool:
        """Whether the wait share's interval rests on the workers' batches (their rate with the
        step, where the loop's turns are too few; or a drained window's), not the loop's waits."""
        return self.method == "drained" or (self.method == "workers" and self.turns < MIN_BATCHES)

    @property
    def busy(self) -> Interval:
        """The share of the loop's time not spent waiting for data: MLPerf Storage's accelerator
        utilization (compute time ÷ run time), the wait share's complement with its interval."""
        w = self.wait_share
        return Interval(1.0 - w.value, 1.0 - w.high, 1.0 - w.low, w.batches)


BusyClass = Literal["busy", "starved", "borderline"]


def busy_class(share: Interval) -> BusyClass:
    """Against MLPerf Storage's bar (``MIN_BUSY_SHARE``): busy or starved only beyond the 95 %
    interval; a figure whose interval straddles the bar, or has none, is not decided."""
    if not share.known:
        return "borderline"
    if share.low >= MIN_BUSY_SHARE:
        return "busy"
    return "starved" if share.high < MIN_BUSY_SHARE else "borderline"


def workers_rate(produced: Sequence[Produced], workers: int, looks: int = 1) -> Interval | None:
    """What ``workers`` deliver together, from their cycles: W × Σimages ÷ Σcycles, with its
    interval (batch means over cycles in completion order); None with fewer than two cycles."""
    return _all_workers([(c, n) for c, _, n in produced], workers, looks)


def workers_capacity(produced: Sequence[Produced], workers: int, looks: int = 1) -> Interval | None:
    """What the workers could make were they never idle: W × Σimages ÷ Σ their time making
    batches, with its interval (None with fewer than two batches)."""
    return _all_workers([(b, n) for _, b, n in produced], workers, looks)


def _all_workers(spans: Sequence[tuple[float, int]], workers: int, looks: int) -> Interval | None:
    """W × one worker's images ÷ seconds over (seconds, images) of its batches, with its interval."""
    kept = [(s, n) for s, n in spans if s > 0 and n > 0]
    if workers < 1 or len(kept) < 2:
        return None
    images, seconds = [float(n) for _, n in kept], [s for s, _ in kept]
    # fresh workers' first batches can come at a start-up pace (pages first touched, caches filled,
    # the cell before still exiting): left out where they differ from the rest beyond chance
    cut = transient_start(images, seconds)
    one = ratio_interval(images[cut:], seconds[cut:], 1, looks)
    if not one.known:
        return None
    return Interval(one.value * workers, one.low * workers, one.high * workers, one.batches)


def loader_rate(
    *,
    images: Sequence[float],
    durations: Sequence[float],
    img_per_s: float,
    workers: int,
    produced: Sequence[Produced] = (),
    looks: int = 1,
    alone: Interval | None = None,
) -> tuple[Interval, Method]:
    """What a loader delivered over a window of ``durations`` (one per batch received), centred on
    ``img_per_s``, from the loop's batch means or the workers' cycles (see the module's
    docstring), its upper end held to what the step ``alone`` allows and to what the workers could
    make never idle. Where the workers could make wholly more than the step takes, the loop's
    own steps set the pace: its batches wait for no turn, each step is its own observation, and a
    worker's cycles then hold the idle time the warm-up left it (no steady state to read)."""
    concurrency = max(1, workers)
    capacity = workers_capacity(produced, workers, looks)
    step_high = alone.high if alone is not None and alone.known else math.inf
    paced = capacity is not None and capacity.low > step_high
    top = min(step_high, capacity.high if capacity else math.inf)
    turns = len(durations) / concurrency
    # a loop with no step (``alone`` None: a decode ceiling's) takes each batch as it comes
    made = sum(n for _, _, n in produced) if workers and not paced and alone is not None else 0
    drained = workers_rate(produced, workers, looks) if 0 < made < sum(images) else None
    if drained is None or not drained.known or drained.value >= img_per_s:
        drained = None
    # the loop took more than its workers made in its window: it drained a queue they filled before
    # it (while its first steps were slow), which no longer run holds. Their cycles give the rate,
    # the loop's own share shrunk by it the wait share — where the loop's turns give that share
    if drained is not None and turns >= MIN_BATCHES:
        return _drained(drained, top), "drained"
    mine = sum(1 for c, _, n in produced if c > 0 and n > 0) > turns
    theirs = workers_rate(produced, workers, looks) if mine and not paced else None
    if theirs is not None and _agrees(
        _steady(images, durations, concurrency) or (img_per_s, sum(durations)), theirs, produced
    ):
        low, high = min(img_per_s, theirs.low), max(img_per_s, min(theirs.high, top))
        return Interval(img_per_s, low, high, theirs.batches), "workers"
    if drained is not None:
        return _drained(drained, top), "drained"
    method: Method = "steps" if paced else "loop"
    loop = ratio_interval(list(images), list(durations), 1 if paced else concurrency, looks).centered_on(
        img_per_s
    )
    if not loop.known:
        return loop, method
    return Interval(img_per_s, loop.low, max(img_per_s, min(loop.high, top)), loop.batches), method


def cell_rates(
    *,
    images: Sequence[float],
    wait_s: Sequence[float],
    step_s: Sequence[float],
    img_per_s: float,
    workers: int,
    produced: Sequence[Produced] = (),
    looks: int = 1,
) -> CellRates:
    """The rate and wait share of one cell's window (see the module's docstring)."""
    durations = [w + s for w, s in zip(wait_s, step_s, strict=True)]
    # the step alone: the loop can go no faster, however quickly its batches come
    alone = ratio_interval(list(images), list(step_s), 1, looks) if durations else Interval.unknown(0.0)
    rate, method = loader_rate(
        images=images,
        durations=durations,
        img_per_s=img_per_s,
        workers=workers,
        produced=produced,
        looks=looks,
        alone=alone,
    )
    turns = len(durations) / max(1, workers)
    if method == "workers" and turns < MIN_BATCHES:  # the loop's own waits give no interval
        share = _share_from_rate(rate, alone, wait_s, step_s)
    elif method == "drained":  # the loop's steps stand; its batches came faster than they were made
        share = share_left(
            rate, img_per_s, wait_share_interval(list(wait_s), list(step_s), max(1, workers), looks)
        )
    else:
        group = 1 if method == "steps" else max(1, workers)
        share = wait_share_interval(list(wait_s), list(step_s), group, looks)
    return CellRates(rate, share, method, turns)


def _steady(
    images: Sequence[float], durations: Sequence[float], concurrency: int
) -> tuple[float, float] | None:
    """The loop's own rate and seconds over its window's whole turns after the first (None where it
    holds none). The first turn begins when the start-up burst's last batch was handed over, however
    far apart the workers finished theirs (forked one after another, they start apart), and a window
    a time cap ends mid-turn holds that turn's whole wait for a part of its batches: neither edge is
    a turn's, and in a window of three turns they moved the loop's total by a fifth."""
    whole = len(durations) // concurrency * concurrency
    seconds = sum(durations[concurrency:whole])
    return (sum(images[concurrency:whole]) / seconds, seconds) if seconds > 0 else None


def _drained(rate: Interval, top: float) -> Interval:
    """A drained window's rate: the workers' (a count of what they made is off by up to a turn
    where they work in step), its upper end held to ``top``."""
    return Interval(rate.value, rate.low, max(rate.value, min(rate.high, top)), rate.batches)


def _agrees(loop: tuple[float, float], theirs: Interval, produced: Sequence[Produced]) -> bool:
    """Whether the loop's own rate over whole turns (img/s, seconds) agrees with the workers'
    interval. Such a window still has edges the loop sees one batch at a time: where a turn's
    batches arrive spread over the spread of the workers' cycles, it may end (or start) anywhere in
    it, so its rate is compared with the interval stretched by that spread over its seconds."""
    img_per_s, elapsed_s = loop
    cycles = [c for c, _, n in produced if c > 0 and n > 0]
    slack = (max(cycles) - min(cycles)) / elapsed_s if elapsed_s > 0 else math.inf
    return theirs.low * (1 - slack) <= img_per_s <= theirs.high * (1 + slack)


def _share_from_rate(
    rate: Interval, alone: Interval, wait_s: Sequence[float], step_s: Sequence[float]
) -> Interval:
    """The wait share a rate leaves the step: 1 − rate ÷ the step's own rate, its interval from
    both intervals' ends (a slower delivery, a faster step: more waiting), within [0, 1]."""
    total = sum(wait_s) + sum(step_s)
    value = sum(wait_s) / total if total > 0 else 0.0
    if not alone.known or alone.low <= 0:
        return Interval.unknown(value)
    low = 1 - rate.high / alone.low
    high = 1 - rate.low / alone.high
    return Interval(value, min(value, max(0.0, low)), max(value, min(1.0, high)), rate.batches)


def share_left(rate: Interval, img_per_s: float, loop: Interval) -> Interval:
    """The wait share a loop would have had at ``rate`` rather than the ``img_per_s`` it took: its
    steps are what they were, a batch each, and only fewer batches come a second, so the time not
    waiting (1 − its own share) shrinks by rate ÷ img_per_s. The interval from both intervals'
    ends (a slower delivery, a busier loop: more waiting), within [0, 1]. ``rate`` is a drained
    loop's workers': a drain only spared the loop waits, so the share is never below the loop's own
    interval (where few cycles leave the workers' rate reaching far above what the loop took)."""
    if img_per_s <= 0 or not loop.known:
        return Interval.unknown(loop.value)
    value = min(1.0, max(0.0, 1 - rate.value / img_per_s * (1 - loop.value)))
    if not rate.known:
        return Interval.unknown(value)
    low = max(loop.low, 1 - rate.high / img_per_s * (1 - loop.low))
    high = 1 - rate.low / img_per_s * (1 - loop.high)
    return Interval(
        value, min(value, max(0.0, low)), max(value, min(1.0, high)), min(rate.batches, loop.batches)
    )


def class_decided(share: Interval) -> bool:
    """Whether a wait share's interval is known and lies on one side of each class threshold."""
    if not share.known:
        return False
    return all(
        (share.low >= t) == (share.high >= t)
        for t in (MODERATELY_INPUT_BOUND_SHARE, HIGHLY_INPUT_BOUND_SHARE)
    )


def wait_per_batch(share: Interval, step_s: Sequence[float]) -> Interval:
    """The loop's wait per batch with the interval its data-wait share has: a wait share ``f`` of
    a loop whose step takes ``s`` a batch is ``s·f/(1 − f)`` of wait a batch. The waits' own batch
    means would count each batch as an observation where a turn of the workers is one (a long wait,
    then the rest at once): 8 batches of 4 workers read 339 ms [0–766]. Unknown where the share is,
    or where its top leaves the step no time."""
    n = len(step_s)
    step = ratio_interval(list(step_s), [1.0] * n) if n else Interval.unknown(0.0)
    value = step.value * share.value / (1 - share.value) if share.value < 1 else 0.0
    if not share.known or not step.known or share.high >= 1:
        return Interval.unknown(value)
    low = step.low * share.low / (1 - share.low)
    high = step.high * share.high / (1 - share.high)
    return Interval(value, min(value, low), max(value, high), share.batches)
