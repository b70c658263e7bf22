"""The in-order hand-over of a DataLoader with workers, replayed from what each batch cost: how
much of the training loop's wait its slowest samples caused.

torch's DataLoader (``in_order=True``, the default) gives batch k of a pass to worker k mod W,
sends a worker the index of batch k + prefetch_factor·W when batch k is handed to the loop, and
hands batches over in order: batch k is taken only after batch k − 1, however early it was made.
So a slow sample holds back its batch, then the loop, then — once their prefetch is used up —
every other worker. What it cost is a counterfactual: the pass replayed from each batch's own
measured fetch and the loop's own measured time between batches, and again with each slow
sample taking the median's time. The replay of what happened is checked against the waits the
loop measured over the same batches; its error there widens the counterfactual's interval.

Slow: beyond the far fence of the samples' own times (Tukey: the upper quartile plus three
interquartile ranges), an outlier by the distribution's own spread, no fixed multiple of it.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ioprof.core.stats import Interval, nearest_rank, ratio_interval


@dataclass(frozen=True)
class PassBatch:
    """Batch k of a pass as its worker made it: its fetch's wall-clock time, the time its slow
    samples took beyond the median (and of that, their own work on a CPU), and when the loop asked
    for it and got it."""

    worker: int  # 0 … W − 1 (k mod W)
    start_s: float  # when its fetch began
    fetch_s: float
    excess_s: float
    call_s: float
    return_s: float
    on_cpu_excess_s: float | None = None  # None: their time on a CPU was not told apart


Shed = Literal["nothing", "excess", "on-cpu"]


def _shed(b: PassBatch, without: Shed) -> float:
    """What a replay takes off a batch's fetch."""
    if without == "excess":
        return b.excess_s
    if without == "on-cpu":
        return b.on_cpu_excess_s or 0.0
    return 0.0


def far_fence(times: Sequence[float]) -> tuple[float, float]:
    """(the median, the far fence: Q3 + 3 IQR) of ``times``, quartiles by nearest rank."""
    s = sorted(times)
    q1, q3 = nearest_rank(s, 0.25), nearest_rank(s, 0.75)
    return nearest_rank(s, 0.5), q3 + 3.0 * (q3 - q1)


def replay(
    batches: Sequence[PassBatch], workers: int, prefetch: int, *, without: Shed = "nothing"
) -> list[float]:
    """The loop's wait for each batch of one pass, replayed: a worker begins batch k once it has
    made batch k − W and put it in the loader's queue (the time putting it took, where it had the
    next index already; for its first batch, when it began) and — beyond the first prefetch·W — once
    batch k − prefetch·W was handed over; the loop takes batch k once it is made (plus the
    hand-over's own latency, where the loop waited for it) and once the loop is back for it: batch
    k − 1 taken, plus the time the loop actually spent before asking again — and taking a batch that
    is there costs the loop what it did. Each of these is the batch's own, measured where the run
    showed it and their mean over the pass where it did not (a batch the loop did not wait for
    shows no latency), so the pass replayed as it ran gives back the waits it recorded, and a
    counterfactual keeps each batch's own costs.
    ``without``: "excess", each batch's slow samples at the median's time; "on-cpu", only their
    own work on a CPU beyond the median's taken off."""
    n = len(batches)
    latency, overhead, receive = _Costs.of(batches, workers, prefetch).own()
    ready: list[float] = [0.0] * n
    handed: list[float] = [0.0] * n
    waits: list[float] = [0.0] * n
    for k, b in enumerate(batches):
        fetch = max(0.0, b.fetch_s - _shed(b, without))
        begin = batches[b.worker].start_s if k < workers else ready[k - workers] + overhead[k]
        if k >= prefetch * workers:
            begin = max(begin, handed[k - prefetch * workers])
        ready[k] = begin + fetch
        back = b.call_s if k == 0 else handed[k - 1] + (b.call_s - batches[k - 1].return_s)
        handed[k] = max(ready[k] + latency[k], back + receive[k])
        waits[k] = handed[k] - back
    return waits


def replay_unordered(batches: Sequence[PassBatch], workers: int, prefetch: int) -> list[float]:
    """The loop's wait for each batch it takes, in the order it takes them, replayed as
    ``DataLoader(in_order=False)`` runs the pass: an index goes, at each hand-over, to the next
    worker in turn that holds fewer than prefetch_factor of them, each worker makes its batches in
    the order it got them, and the loop takes whichever batch arrives first. Each batch costs what
    it did in the run; the loop spends after its j-th batch what it spent after its j-th in the
    run."""
    n = len(batches)
    latency, overhead, receive = _Costs.of(batches, workers, prefetch).means()
    free = [batches[w].start_s if w < n else math.inf for w in range(workers)]
    holding = [0] * workers
    arriving: list[tuple[float, int]] = []  # (when the loop could have it, its worker)
    turn = itertools.cycle(range(workers))
    sent = 0

    def send(now: float) -> None:
        nonlocal sent
        if sent >= n:
            return
        for _ in range(workers):
            w = next(turn)
            if holding[w] < prefetch:
                break
        else:
            return
        made = max(free[w], now) + batches[sent].fetch_s
        free[w] = made + overhead
        holding[w] += 1
        heapq.heappush(arriving, (made + latency, w))
        sent += 1

    for _ in range(prefetch * workers):
        send(-math.inf)
    waits: list[float] = []
    back = batches[0].call_s
    for j in range(n):
        if not arriving:
            break
        at, w = heapq.heappop(arriving)
        handed = max(at, back + receive)
        waits.append(handed - back)
        holding[w] -= 1
        send(handed)
        if j + 1 < n:
            back = handed + (batches[j + 1].call_s - batches[j].return_s)
    return waits


@dataclass(frozen=True)
class SlowWait:
    """What the slow samples cost the loop over its window: replayed, and checked against it.

    ``wait``: their share of the loop's wait; ``loop``: their share of the loop's time (wait and
    step), the time a run would save without them — each with its 95 % interval from batch means
    over the window's batches, widened by the replay's own error on the wait it could check."""

    fence_s: float  # a sample slower than this is slow
    median_s: float
    slow: int  # slow samples in the replayed passes
    samples: int  # samples timed in them
    batches: int  # the window's batches replayed
    measured_wait_s: float  # the loop's wait over them, as it measured it
    replayed_wait_s: float  # the replay's, from the batches' own times
    without_s: float  # the replay's, with each slow sample at the median's time
    wait: Interval
    loop: Interval
    # the replay's wait over as many batches taken, the loader handing them over as they are made
    # (``in_order=False``), the slow samples as they were
    unordered_s: float | None = None
    # the share of the loop's time the replay saves with only the slow samples' own work on a CPU
    # beyond the median's taken off (None: their time on a CPU was not told apart)
    on_cpu: Interval | None = None
    loop_s: float = 0.0  # the loop's time over the window's batches (wait and step)

    def own(self, headroom: float | None) -> tuple[Interval, Interval]:
        """Of the loop's time and of its wait, the shares the slow samples cost by themselves. Their
        work on a CPU is theirs. Their time off a CPU may be a wait for bytes: where the storage
        delivered at its limit, taking one sample's wait away gives it to the next reader of the
        same storage, so it is theirs only up to the storage's ``headroom`` — the share of the loop's
        time a storage delivering at its ceiling would save (math.inf: nothing read from one);
        where that is unknown, only their work on a CPU is sure to be theirs (the high end may be
        it all)."""
        whole = self.loop
        if headroom is not None and math.isinf(headroom):
            return whole, self.wait
        cpu = self.on_cpu if self.on_cpu is not None and self.on_cpu.known else None
        if not whole.known:
            return whole, self.wait
        floor = (cpu.value, cpu.low, cpu.high) if cpu is not None else (0.0, 0.0, 0.0)
        if headroom is None:
            ends = (floor[0], floor[1], whole.high)
        else:
            parts = zip((whole.value, whole.low, whole.high), floor, strict=True)
            v, lo, hi = (max(c, min(w, headroom)) for w, c in parts)
            ends = (v, lo, hi)
        loop = Interval(ends[0], min(ends[0], ends[1]), max(ends[0], ends[2]), whole.batches)
        f = self.loop_s / self.replayed_wait_s  # a share of the loop's time as one of its wait
        return loop, Interval(loop.value * f, loop.low * f, loop.high * f, loop.batches).clipped(0.0, 1.0)

    @property
    def unordered_saves(self) -> float | None:
        """The share of the replayed wait ``in_order=False`` would save (None: not replayed)."""
        if self.unordered_s is None or self.replayed_wait_s <= 0:
            return None
        return 1.0 - self.unordered_s / self.replayed_wait_s

    @property
    def replay_error(self) -> float:
        """The replay's error on the wait it could check, relative to the measured wait."""
        m = self.measured_wait_s
        return abs(self.replayed_wait_s - m) / m if m > 0 else math.inf


def slow_wait(
    passes: Sequence[Sequence[PassBatch]],
    window: Sequence[tuple[int, int]],
    workers: int,
    prefetch: int,
    *,
    fence_s: float,
    median_s: float,
    slow: int,
    samples: int,
) -> SlowWait | None:
    """The slow samples' cost over the window's batches (``window``: (pass index, k) of each),
    each pass replayed whole, as it ran and without its slow samples' excess; None where the
    window's batches were not all in the replayed passes or the loop never waited."""
    replayed: dict[tuple[int, int], tuple[float, float, float, float, float]] = {}
    for p, batches in enumerate(passes):
        if not batches:
            continue
        ran = replay(batches, workers, prefetch)
        without = replay(batches, workers, prefetch, without="excess")
        unordered = replay_unordered(batches, workers, prefetch)
        told = all(b.on_cpu_excess_s is not None for b in batches)
        mine = replay(batches, workers, prefetch, without="on-cpu") if told else [math.nan] * len(batches)
        for k, b in enumerate(batches):
            replayed[(p, k)] = (
                b.return_s - b.call_s,
                ran[k],
                without[k],
                unordered[k] if k < len(unordered) else math.nan,
                mine[k],
            )
    units = [replayed[key] for key in window if key in replayed]
    if len(units) < len(window) or not units:
        return None
    steps = _steps(passes, window)
    measured, ran_w, without_w, unordered_w, on_cpu_w = (sum(u[i] for u in units) for i in range(5))
    if measured <= 0 or ran_w <= 0:
        return None
    # a batch's own difference may be negative (the loop reaches it sooner without the slow
    # samples, and waits there instead): only the sums mean what they say
    caused = [u[1] - u[2] for u in units]
    loop_s = [u[0] + s for u, s in zip(units, steps, strict=True)]
    error = abs(ran_w - measured) / measured
    # batch means over the loop's time (never 0 in a group, as its wait may be); the share of
    # the wait is the same figure over the replayed wait's total
    loop = ratio_interval(caused, loop_s, max(1, workers))
    on_cpu = (
        _widened(ratio_interval([u[1] - u[4] for u in units], loop_s, max(1, workers)), error)
        if math.isfinite(on_cpu_w)
        else None
    )
    return SlowWait(
        fence_s=fence_s,
        median_s=median_s,
        slow=slow,
        samples=samples,
        batches=len(units),
        measured_wait_s=measured,
        replayed_wait_s=ran_w,
        without_s=without_w,
        wait=_widened(loop.centered_on(loop.value * sum(loop_s) / ran_w), error),
        loop=_widened(loop, error),
        unordered_s=unordered_w if math.isfinite(unordered_w) else None,
        on_cpu=on_cpu,
        loop_s=sum(loop_s),
    )


def _steps(passes: Sequence[Sequence[PassBatch]], window: Sequence[tuple[int, int]]) -> list[float]:
    """The loop's time after each of the window's batches, to its next call (0 after a pass's last)."""
    out = []
    for p, k in window:
        batches = passes[p]
        out.append(batches[k + 1].call_s - batches[k].return_s if k + 1 < len(batches) else 0.0)
    return out


def _widened(share: Interval, error: float) -> Interval:
    """A share's interval widened by the replay's relative error, held to [0, 1]."""
    if not share.known or not math.isfinite(error):
        return Interval.unknown(share.value)
    low = share.low * (1 - error) if share.low > 0 else share.low * (1 + error)
    return Interval(share.value, low, share.high * (1 + error), share.batches).clipped(0.0, 1.0)


@dataclass(frozen=True)
class _Costs:
    """What each batch of a pass cost around its fetch, as far as the run showed it (None where
    it did not): the hand-over's own latency, from the batch made to the loop holding it, where
    the loop was already waiting for it; its worker's time before it (putting the batch before in
    the loader's queue), where the next index was already there; what the loop spent in
    ``next()`` taking it (unpickling it, the loader's bookkeeping), where it was made a mean
    hand-over's latency before the call."""

    latency: list[float | None]
    overhead: list[float | None]
    receive: list[float | None]

    @staticmethod
    def of(batches: Sequence[PassBatch], workers: int, prefetch: int) -> _Costs:
        latency: list[float | None] = [None] * len(batches)
        overhead: list[float | None] = [None] * len(batches)
        for k, b in enumerate(batches):
            made = b.start_s + b.fetch_s
            if b.call_s < made <= b.return_s:
                latency[k] = b.return_s - made
            if k >= workers:
                before = batches[k - workers].start_s + batches[k - workers].fetch_s
                if k < prefetch * workers or batches[k - prefetch * workers].return_s <= before:
                    overhead[k] = max(0.0, b.start_s - before)
        lag = _mean(latency)
        receive = [
            b.return_s - b.call_s if b.start_s + b.fetch_s + lag <= b.call_s else None for b in batches
        ]
        return _Costs(latency, overhead, receive)

    def means(self) -> tuple[float, float, float]:
        """(latency, overhead, receive): each one's mean where it was seen, 0 where never."""
        return _mean(self.latency), _mean(self.overhead), _mean(self.receive)

    def own(self) -> tuple[list[float], list[float], list[float]]:
        """Each batch's own, its mean where the run did not show it."""
        latency, overhead, receive = self.means()
        return (
            _filled(self.latency, latency),
            _filled(self.overhead, overhead),
            _filled(self.receive, receive),
        )


def _filled(seen: Sequence[float | None], mean: float) -> list[float]:
    return [mean if v is None else v for v in seen]


def _mean(seen: Sequence[float | None]) -> float:
    values = [v for v in seen if v is not None]
    return sum(values) / len(values) if values else 0.0
