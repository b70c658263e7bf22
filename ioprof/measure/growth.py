"""A loader's processes' memory against the samples they made: what grows, what one life of a
worker forked each epoch reaches, and what a persistent worker holds more from one epoch to the
next (``InsideRecorder.memory``).

Each reading is placed at the samples its process had made (``samples_vs_uss``): a worker's own,
at the end of a batch, exactly; a recorder's, anywhere in a batch, at the batches done and the
share of the one in progress its fetch had made.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ioprof.core.stats import Interval, pooled_slope, t_975
from ioprof.core.thresholds import (
    GROWTH_LATER_SHARE,
    GROWTH_MIN_READINGS,
    GROWTH_MIN_SAMPLES,
    GROWTH_NOISE_BYTES,
    GROWTH_WARMUP_BATCHES,
    GROWTH_WARMUP_SHARE,
)
from ioprof.host.processes import ProcessReading

# a life's peak (bytes) and the slope per sample it was carried at (None: not read past its warm-up)
LifePeak = tuple[float, float | None]


def one_life_peak(
    lives: Sequence[Sequence[tuple[float, float]]],
    share: float,
    resident: Sequence[Sequence[tuple[float, float]]] = (),
    warm: Sequence[float] = (),
) -> LifePeak | None:
    """Workers forked again each epoch, each making its ``share`` of an epoch's samples and then
    exiting: the most one reaches at its life's end, and the slope per sample it was carried at.
    Each life's last reading (samples made, USS) is carried on to ``share`` at the slope pooled
    over the lives read at least twice (each its own level; never below 0); a life cut short by the
    training's end is carried to where its epoch would have ended. None: no worker was read.

    A forked worker's own memory (USS) also grows by pages it was handed at the fork becoming its
    alone — as it writes them (copy-on-read), or as the training process writes its own copies —
    which is no more than it maps: never above its resident memory (``resident``, the same lives'
    RSS), carried on at its own slope, which only what the worker itself allocates raises.

    ``warm``: each life's samples at the end of its warm-up (``warm_from``). A fresh worker's first
    batches are a step — the inherited pages it writes become its own at once, its first allocations
    are made —, not a rate it goes on at: the slopes are fitted to the readings after it, where two
    of a life are (a step of 100 MB read mid-way through a first batch of 8, carried to a life of
    40 samples, said 149 MB of a worker that held 116). Where no life was read twice after it, how
    a life grows past its warm-up was not read, and the step is no rate (a short sweep cell's
    worker, its readings all before its first full collection, was carried to several times what
    a worker making a whole epoch held): the most a life reached is said as read, its slope None.
    Without ``warm``, fitted to every reading."""
    read = [sorted(points) for points in lives if points]
    if not read:
        return None
    mapped = [sorted(p) for p in resident if p]
    slope, grows = (_warm_slope(series, warm) for series in (lives, resident))
    if slope is None:
        return max(points[-1][1] for points in read), None
    if grows is None:  # what it maps is known no further than what it holds
        mapped, grows = [], 0.0

    def carried(points: Sequence[tuple[float, float]], rate: float) -> float:
        return points[-1][1] + rate * max(0.0, share - points[-1][0])

    peak = max(carried(points, slope) for points in read)
    if mapped and (most := max(carried(points, grows) for points in mapped)) < peak:
        return most, grows  # carried (to another count's share too) at what it allocates itself
    return peak, slope


def _warm_slope(lives: Sequence[Sequence[tuple[float, float]]], warm: Sequence[float]) -> float | None:
    """The slope pooled over the lives' readings after their warm-up (``warm``, a life each, where
    two readings of a life are); None where ``warm`` is given and no life has two (none is known
    past it); without ``warm``, over all of them. Never below 0 (0 where none is known)."""
    after = [[(x, y) for x, y in sorted(p) if x >= w] for p, w in zip(lives, warm, strict=False)]
    if any(len(p) >= 2 for p in after):
        fit = pooled_slope(after)
    elif warm and any(lives):
        return None
    else:
        fit = pooled_slope([sorted(p) for p in lives if p])
    return max(0.0, fit.value) if math.isfinite(fit.value) else 0.0


def goes_on(fits: Sequence[GrowthFit], growth: Interval) -> bool:
    """Whether the growth goes on in the later half of each process's points, at no less than
    ``GROWTH_LATER_SHARE`` of the whole's rate and above the noise. An allocator settling (heap
    high-water, decoder buffers) slows down; a leak or copy-on-read goes on at its rate. Decided on
    the later half's estimate: its interval is too wide with few readings (2 a worker in a 14 s
    window) and, with many, tight enough to call a 1.5 % difference slower."""
    later = pooled_slope([f.points[len(f.points) // 2 :] for f in fits])
    return later.value * 1000 >= GROWTH_NOISE_BYTES and later.value >= GROWTH_LATER_SHARE * growth.value


@dataclass(frozen=True)
class GrowthFit:
    points: list[tuple[float, float]]  # (samples produced, USS) after the warm-up
    samples: int  # samples spanned by those points
    revisited: bool  # it produced more samples than the dataset holds: indices seen again


def warm_points(
    readings: Sequence[ProcessReading], rows: Sequence[dict[str, Any]], batch: int
) -> list[tuple[float, float]]:
    """One process's (samples produced, USS) after its warm-up (a fresh worker's first batches and
    first share of samples, whose allocations are no growth), however few. A worker's first full
    garbage collection is warm-up too, wherever it falls: it writes to every object the worker
    inherited, and the pages that hold them become its own once — a step, never a growth."""
    series = samples_vs_uss(readings, rows)
    if not series:
        return []
    warm = warm_from(series, rows, batch)
    return [(x, y) for x, y in series if x >= warm]


def warm_from(series: Sequence[tuple[float, float]], rows: Sequence[dict[str, Any]], batch: int) -> float:
    """The samples a process had made when its warm-up ended (``warm_points``): its first
    ``GROWTH_WARMUP_BATCHES`` batches, its first ``GROWTH_WARMUP_SHARE`` of the samples its readings
    reach (``series``, in order), and its first full garbage collection."""
    last = series[-1][0] if series else 0.0
    return max(GROWTH_WARMUP_BATCHES * batch, GROWTH_WARMUP_SHARE * last, _first_full_gc(rows))


def _first_full_gc(rows: Sequence[dict[str, Any]]) -> float:
    """Samples a process had produced at the end of the batch its first full collection was counted
    in (``stageclock.StageClock``), where its rows saw none before it; else 0."""
    produced = 0
    for k, row in enumerate(rows):
        produced += row["n"]
        if row.get("full_gcs"):
            return float(produced) if k > 0 else 0.0
    return 0.0


def after_warmup(points: list[tuple[float, float]], epoch: int | None) -> GrowthFit | None:
    """One process's (samples produced, USS) after its warm-up (``warm_points``), or None when too
    few are left for a slope over the run. ``revisited``: it went on growing after it had produced
    as many samples as the dataset holds (``epoch``) — over indices it had seen."""
    spanned = int(points[-1][0] - points[0][0]) if len(points) >= 2 else 0
    if len(points) < GROWTH_MIN_READINGS or spanned < GROWTH_MIN_SAMPLES:
        return None
    again = [(x, y) for x, y in points if epoch and x >= epoch]
    grew = (
        len(again) >= 2
        and again[-1][1] - again[0][1] > GROWTH_NOISE_BYTES * (again[-1][0] - again[0][0]) / 1000
    )
    return GrowthFit(points, spanned, grew)


@dataclass(frozen=True)
class EpochGrowth:
    """What one persistent worker holds more from one epoch to the next, at the same point of both
    (bytes, with its 95 % interval), and the most epochs one worker's readings spanned."""

    per_epoch: Interval
    epochs: int


def epoch_fields(g: EpochGrowth | None) -> dict[str, Any]:
    if g is None:
        return {}
    known = g.per_epoch.known and g.epochs >= 2
    return {
        "epoch_growth_bytes": g.per_epoch.value if known else None,
        "epoch_growth_low": g.per_epoch.low if known else None,
        "epoch_growth_high": g.per_epoch.high if known else None,
        "epochs_seen": g.epochs,
    }


def epoch_starts(rows: Sequence[dict[str, Any]], pass_starts_s: Sequence[float]) -> dict[int, list[float]]:
    """Each process's samples produced when each pass began: where its epochs begin, in its own
    count (a persistent worker idles between epochs, so the count is the last epoch's end)."""
    out: dict[int, list[float]] = {}
    for pid in {r["pid"] for r in rows}:
        mine = [r for r in rows if r["pid"] == pid]
        out[pid] = [float(sum(r["n"] for r in mine if r["t"] <= s)) for s in pass_starts_s]
    return out


def across_epochs(
    series: Mapping[int, Sequence[tuple[float, float]]], starts: Mapping[int, Sequence[float]]
) -> EpochGrowth:
    """Growth per epoch of persistent workers from (samples produced, USS) readings: each reading
    of an epoch against its worker's level at the same point of the epoch before — read there, or
    between its readings on either side — and nowhere else (``_placed``, ``_level``). A worker
    that lives on grows only if it holds more at the same point of a later epoch: what it takes on
    inside every epoch and gives back is no growth.

    A worker's first epoch is compared at its end only: through it the worker meets each of its
    samples for the first time, and what follows the largest met so far (decoder buffers, the
    allocator's high-water mark) grows until that end; at a point inside it the worker is still
    warming up, and a comparison there counts its warm-up as growth. (timm's workers here rose
    0.6 MB over the last quarter of their first epoch and stayed flat through the second: matched
    inside the first, the growth read 1.4-1.5 MB an epoch where they kept 1.0-1.3 from end to end.)

    The workers are the independent units (``_between_workers``)."""
    diffs: dict[int, dict[int, list[float]]] = {}  # each worker's, by the epoch compared with
    most = 0
    for pid, points in series.items():
        placed = _placed(points, sorted(set(starts.get(pid, ()))))
        epochs = sorted(placed)
        most = max(most, len(epochs) or (1 if points else 0))
        for e in epochs:
            if e + 1 not in placed:
                continue
            before = placed[e] if e > 0 else [(k, y) for k, y in placed[e] if k >= 1.0]
            for k, y in placed[e + 1]:
                level = _level(before, k)
                if level is not None:
                    diffs.setdefault(pid, {}).setdefault(e, []).append(y - level)
    return EpochGrowth(_between_workers(diffs), most)


def _placed(
    points: Sequence[tuple[float, float]], bounds: Sequence[float]
) -> dict[int, list[tuple[float, float]]]:
    """A worker's readings by epoch, each at its point in it (0 to 1), from the samples it had
    produced when each epoch began (``bounds``, ascending). A reading taken when it had produced
    exactly an epoch's samples ends that epoch (1): the worker idles there, its epoch done, until
    the next begins — the last epoch's end as the others'. The last epoch's length is the median
    of the others'; none without two bounds."""
    lengths = sorted(b - a for a, b in itertools.pairwise(bounds) if b > a)
    if not lengths:
        return {}
    typical = lengths[len(lengths) // 2]
    out: dict[int, list[tuple[float, float]]] = {}
    for x, y in points:
        if x < bounds[0]:
            continue
        e = max(0, bisect.bisect_left(bounds, x) - 1)  # the epoch whose span (b_e, b_e+1] holds x
        length = bounds[e + 1] - bounds[e] if e + 1 < len(bounds) else typical
        out.setdefault(e, []).append((min(1.0, (x - bounds[e]) / length), y))
    return out


def _level(points: Sequence[tuple[float, float]], k: float) -> float | None:
    """What a worker held at point ``k`` of an epoch from its readings there: their mean where read
    at ``k``, else the line between the nearest on either side; None beyond its readings."""
    at = [y for x, y in points if x == k]
    if at:
        return sum(at) / len(at)
    below = max((x for x, _ in points if x < k), default=None)
    above = min((x for x, _ in points if x > k), default=None)
    if below is None or above is None:
        return None
    y0, y1 = _level(points, below), _level(points, above)
    assert y0 is not None and y1 is not None
    return y0 + (y1 - y0) * (k - below) / (above - below)


def _between_workers(diffs: Mapping[int, Mapping[int, Sequence[float]]]) -> Interval:
    """The growth per epoch from each worker's differences at matched points, by the pair of
    epochs compared: each pair one epoch's growth however many readings it holds (a first epoch is
    compared at its end only, later ones at every point: pooling the readings let the later
    epochs, where timm's workers kept a tenth of what they kept in their second, outweigh it), a
    worker's growth the mean of its pairs', the growth the mean of the workers'. A worker's
    readings rise in its allocator's steps, not each on its own, and workers differ (timm's two
    kept 1.15 and 0.03 MB from one epoch to the next, read from outside), so the independent
    units of a growth shared by workers are the workers. The half-width is the larger of the two:
    the readings' (their spread about their pair's mean), and a t-interval over the workers'
    growths (from two workers on)."""
    # every worker in ``diffs`` has a pair, every pair a difference (``across_epochs`` adds them so)
    pairs = {pid: {e: sum(d) / len(d) for e, d in by.items()} for pid, by in diffs.items()}
    means = {pid: sum(p.values()) / len(p) for pid, p in pairs.items()}
    if not means:
        return Interval.unknown(0.0)
    w = len(means)
    n = sum(len(d) for by in diffs.values() for d in by.values())
    value = sum(means.values()) / w
    halves = []
    if (df := n - sum(len(p) for p in pairs.values())) >= 1:
        ss = sum((x - pairs[pid][e]) ** 2 for pid, by in diffs.items() for e, d in by.items() for x in d)
        # a worker's growth: the mean of its pairs' means, each of its own readings
        spread = sum(sum(1 / len(d) for d in by.values()) / len(pairs[pid]) ** 2 for pid, by in diffs.items())
        halves.append(t_975(df) * math.sqrt(ss / df * spread) / w)
    if w >= 2:
        mean_sd = math.sqrt(sum((m - value) ** 2 for m in means.values()) / (w - 1))
        halves.append(t_975(w - 1) * mean_sd / math.sqrt(w))
    if not halves:
        return Interval(value, -math.inf, math.inf, 0)
    half = max(halves)
    return Interval(value, value - half, value + half, n)


def samples_vs_uss(
    readings: Sequence[ProcessReading], rows: Sequence[dict[str, Any]], memory: str = "uss"
) -> list[tuple[float, float]]:
    """(samples this process had produced, its USS — or ``memory="rss"``, its RSS) at each reading:
    its own, taken at the end of a batch (``stageclock.StageClock``: the count exact), and this
    recorder's, in order of the samples. A reading of this recorder's falls anywhere in a batch:
    it counts the batches done by then and the share of the one in progress its fetch had made
    (the samples of a batch come one after another over its fetch; counting the batches alone put
    a reading up to a batch's samples short of what the process held, and a persistent worker's
    growth from one epoch to the next a quarter too high where such readings fell late in one)."""
    out, produced = [], 0
    for row in rows:
        produced += row["n"]
        if row.get(memory):
            out.append((float(produced), float(row[memory])))
    for r in readings:
        value = r.uss_bytes if memory == "uss" else r.rss_bytes
        if value:
            out.append((_made_by(rows, r.at_s), float(value)))
    return sorted(out)


def _made_by(rows: Sequence[dict[str, Any]], at_s: float) -> float:
    """The samples a process had made at ``at_s``: its batches done, and of the next, the share
    its fetch had run (a batch is fetched, then collated, and ends at its row's ``t``)."""
    done = 0.0
    for row in rows:
        if row["t"] <= at_s:
            done += row["n"]
            continue
        fetch_s = float(row.get("fetch_s") or 0.0)
        begun = row["t"] - float(row.get("collate_s") or 0.0) - fetch_s
        if fetch_s > 0 and at_s > begun:
            done += row["n"] * min(1.0, (at_s - begun) / fetch_s)
        break
    return done
