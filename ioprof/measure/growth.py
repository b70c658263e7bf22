"""A loader's processes' memory against the samples they made: what grows, what one life of a
worker forked each epoch reaches, and what a persistent worker holds more from one epoch to the
next (``InsideRecorder.memory``).

Each reading is placed at the samples its process had made (``samples_vs_uss``): a worker's own,
at the end of a batch, exactly; a recorder's, anywhere in a batch, at the batches done and the
share of the one in progress its fetch had made.
"""

from __future__ import annotations

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


def one_life_peak(
    lives: Sequence[Sequence[tuple[float, float]]],
    share: float,
    resident: Sequence[Sequence[tuple[float, float]]] = (),
) -> tuple[float, float] | None:
    """Workers forked again each epoch, each making its ``share`` of an epoch's samples and then
    exiting: the most one reaches at its life's end, and the slope per sample it was carried at.
    Each life's last reading (samples made, USS) is carried on to ``share`` at the slope pooled
    over the lives read at least twice (each its own level; never below 0); a life cut short by the
    training's end is carried to where its epoch would have ended. None: no worker was read.

    A forked worker's own memory (USS) also grows by pages it was handed at the fork becoming its
    alone — as it writes them (copy-on-read), or as the training process writes its own copies —
    which is no more than it maps: never above its resident memory (``resident``, the same lives'
    RSS), carried on at its own slope, which only what the worker itself allocates raises."""
    read = [sorted(points) for points in lives if points]
    if not read:
        return None
    fit = pooled_slope(read)
    slope = max(0.0, fit.value) if math.isfinite(fit.value) else 0.0
    mapped = [sorted(p) for p in resident if p]
    bound = pooled_slope(mapped) if mapped else None
    grows = max(0.0, bound.value) if bound is not None and math.isfinite(bound.value) else 0.0

    def carried(points: Sequence[tuple[float, float]], rate: float) -> float:
        return points[-1][1] + rate * max(0.0, share - points[-1][0])

    peak = max(carried(points, slope) for points in read)
    if mapped and (most := max(carried(points, grows) for points in mapped)) < peak:
        return most, grows  # carried (to another count's share too) at what it allocates itself
    return peak, slope


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
    warm = max(GROWTH_WARMUP_BATCHES * batch, GROWTH_WARMUP_SHARE * series[-1][0], _first_full_gc(rows))
    return [(x, y) for x, y in series if x >= warm]


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


# Readings of a persistent worker are compared at the same point of consecutive epochs: its epoch
# cut in at most this many parts, each part its own level (what a worker holds mid-epoch is not what
# it holds at the start), so that only the epoch-to-epoch change is fitted.
EPOCH_PARTS_MAX = 4


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
    placed at its epoch and its point in it (by the samples its worker had produced when each pass
    began), the levels of each worker at each part of an epoch fitted apart, one slope per epoch
    shared by all (``pooled_slope``). A worker that lives on grows only if it holds more at the
    same point of a later epoch: what it takes on inside every epoch and gives back is no growth."""
    groups: dict[tuple[int, int], list[tuple[float, float]]] = {}
    most = 0
    for pid, points in series.items():
        bounds = sorted(set(starts.get(pid, ())))
        lengths = sorted(b - a for a, b in itertools.pairwise(bounds) if b > a)
        if not lengths:
            most = max(most, 1 if points else 0)
            continue
        length = lengths[len(lengths) // 2]
        placed = []
        for x, y in points:
            at = max((i for i, b in enumerate(bounds) if b <= x), default=None)
            if at is not None:
                placed.append((at, min((x - bounds[at]) / length, 0.999), y))
        epochs = len({e for e, _, _ in placed})
        most = max(most, epochs)
        parts = max(1, min(EPOCH_PARTS_MAX, len(placed) // max(1, 2 * epochs)))
        for e, k, y in placed:
            groups.setdefault((pid, int(k * parts)), []).append((e + k, y))
    fitted = {key: g for key, g in groups.items() if len({int(x) for x, _ in g}) >= 2}
    if not fitted:
        return EpochGrowth(Interval.unknown(0.0), most)
    return EpochGrowth(_between_workers(pooled_slope(list(fitted.values())), fitted), most)


def _between_workers(
    pooled: Interval, groups: Mapping[tuple[int, int], list[tuple[float, float]]]
) -> Interval:
    """``pooled`` (one slope shared by every worker, each reading an observation) widened to what
    the workers' own slopes allow: a worker's readings rise in its allocator's steps, not each on
    its own, and workers differ (timm's two kept 1.15 and 0.03 MB from one epoch to the next, read
    from outside), so the independent units of a growth shared by workers are the workers. The
    half-width is the larger of the two: the readings' (``pooled``), and a t-interval over the
    workers' slopes (from two workers on)."""
    pids = sorted({pid for pid, _ in groups})
    slopes = [
        one.value
        for pid in pids
        if (one := pooled_slope([g for (p, _), g in groups.items() if p == pid])).batches
        and math.isfinite(one.value)
    ]
    if len(slopes) < 2 or not pooled.known:
        return pooled
    mean = sum(slopes) / len(slopes)
    sd = math.sqrt(sum((b - mean) ** 2 for b in slopes) / (len(slopes) - 1))
    half = max(pooled.high - pooled.value, t_975(len(slopes) - 1) * sd / math.sqrt(len(slopes)))
    return Interval(pooled.value, pooled.value - half, pooled.value + half, pooled.batches)


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
