"""``ioprof scale``'s conclusion: how many ranks this host and its storage keep at least 90 % busy,
and the stage that stops the next one. Pure: measured rank counts in, a conclusion out.

A rank count is *busy* when every rank's busy share is at least MIN_BUSY_SHARE beyond its 95 %
interval, *starved* when one rank's is below it beyond the interval, *borderline* otherwise. A
rank's busy share is its accelerator's compute time ÷ its wall time (MLPerf Storage's AU): time
blocked waiting for data is not busy, and neither is time in the all-reduce waiting for a late
rank — with stalls that move from rank to rank, every rank's own data wait stays small while
every step stretches. It is checked against the scaling efficiency (per-rank img/s ÷ the smallest
count's, times that count's busy share). What stops the first count that is not busy is read from
that count's own figures: the storage (its ranks fetched at least SATURATED_SHARE of what the
storage gave the same number of readers alone), the cores (the ranks and their workers used at
least SATURATED_SHARE of the host's cores), one straggling rank, ranks waiting for each other
(each rank's own data wait small, stalls moving from rank to rank), or — none of these — too few
loader workers per rank. When every count measured is busy, the next one is projected from the largest:
the ranks its cores, its storage and (real compute) its GPUs could feed at the per-rank demand
measured there.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from ioprof.core.rates import busy_class
from ioprof.core.results_scale import RankCountResult, ScaleResult
from ioprof.core.stats import Interval
from ioprof.core.thresholds import MIN_BUSY_SHARE, SATURATED_SHARE, STRAGGLER_GAP


@dataclass(frozen=True)
class CountVerdict:
    """One measured rank count in one regime."""

    ranks: int
    regime: str
    status: str  # busy | borderline | starved | failed
    least_busy: Interval | None  # the least busy rank's busy share (None: failed)
    least_busy_rank: int | None
    stragglers: tuple[int, ...]
    efficiency: float | None  # img/s per rank ÷ that of the smallest count measured in the regime
    cores_used: float  # on the busiest host
    host_cores: int
    storage_use: float | None  # fetched MB/s ÷ the storage's MB/s at the same readers (cold)
    reason: str = ""  # failed: why
    busy_mean: float | None = None  # the ranks' mean busy share
    busy_from_efficiency: float | None = None  # efficiency × the smallest count's mean busy share
    own_wait_max: float | None = None  # the largest of the ranks' own data-wait shares
    storage_use_point: float | None = None  # fetched MB/s ÷ the storage's MB/s, its point estimate


@dataclass(frozen=True)
class Limit:
    """What stops the next rank count."""

    # storage | storage-undecided | cores | straggler | lockstep | workers | failed | borderline | undetermined
    stage: str
    at_ranks: int  # the rank count it stops
    projected: bool  # from the largest busy count's demand, not measured at ``at_ranks``
    ranks_by_cores: float | None = None  # how many ranks the cores would feed (projection)
    ranks_by_storage: float | None = None
    ranks_by_devices: int | None = None  # GPUs (real compute)
    reason: str = ""  # failed: why that count failed
    stragglers: tuple[int, ...] = ()


@dataclass(frozen=True)
class RegimeConclusion:
    regime: str
    largest_busy: int  # 0: not even the smallest count measured
    counts: tuple[CountVerdict, ...]
    limit: Limit | None  # None: nothing measured


@dataclass(frozen=True)
class ScaleConclusion:
    regimes: tuple[RegimeConclusion, ...]


def stragglers(count: RankCountResult) -> tuple[int, ...]:
    """Ranks that wait for data clearly longer than the median rank."""
    if len(count.per_rank) < 2:
        return ()
    shares = [r.wait_share() for r in count.per_rank]
    median = statistics.median(s.value for s in shares)
    median_high = statistics.median(s.high if s.known else s.value for s in shares)
    return tuple(
        r.rank
        for r, s in zip(count.per_rank, shares, strict=True)
        if s.value - median >= STRAGGLER_GAP and (s.low if s.known else s.value) > median_high
    )


def _busiest_host(count: RankCountResult) -> tuple[float, int, int]:
    """(cores used, usable cores, ranks) on the host whose ranks use the most cores."""
    hosts: dict[str, list[float | int]] = {}
    for r in count.per_rank:
        h = hosts.setdefault(r.host, [0.0, r.host_cores, 0])
        h[0] += r.cores_used
        h[2] += 1
    used, cores, ranks = max(hosts.values(), key=lambda h: h[0] / max(1, h[1] or 1))
    return float(used), int(cores), int(ranks)


def _storage_use(count: RankCountResult, point: bool = False) -> float | None:
    """What the ranks fetched over what the storage gave as many readers alone: over its
    interval's top (saturation decided only where even that is reached), or ``point``, over its
    point estimate."""
    got = count.fetched_mb_per_s()
    if count.regime != "cold" or count.storage is None or got is None:
        return None
    ceiling = count.storage.bandwidth()
    top = ceiling.high if ceiling.known and not point else ceiling.value
    return got / top if top > 0 else None


def judge(count: RankCountResult, base: tuple[float, float] | None) -> CountVerdict:
    """One count's verdict; ``base``: the smallest count's (img/s per rank, mean busy share)."""
    if count.status != "ok" or not count.per_rank:
        return CountVerdict(
            count.ranks, count.regime, "failed", None, None, (), None, 0.0, 0, None, count.reason
        )
    worst = min(count.per_rank, key=lambda r: r.busy().value)
    least = worst.busy()
    used, cores, _ = _busiest_host(count)
    per_rank = count.aggregate().value / count.ranks
    efficiency = per_rank / base[0] if base and base[0] else None
    return CountVerdict(
        ranks=count.ranks,
        regime=count.regime,
        status=busy_class(least),
        least_busy=least,
        least_busy_rank=worst.rank,
        stragglers=stragglers(count),
        efficiency=efficiency,
        cores_used=used,
        host_cores=cores,
        storage_use=_storage_use(count),
        storage_use_point=_storage_use(count, point=True),
        busy_mean=_mean_busy(count),
        busy_from_efficiency=efficiency * base[1] if efficiency is not None and base else None,
        own_wait_max=max(r.wait_share().value for r in count.per_rank),
    )


def _mean_busy(count: RankCountResult) -> float:
    return statistics.fmean(r.busy().value for r in count.per_rank)


def _diagnose(count: RankCountResult, verdict: CountVerdict) -> Limit:
    """What starved a measured count, from its own figures."""
    if verdict.status == "failed":
        return Limit("failed", count.ranks, False, reason=verdict.reason)
    if verdict.status == "borderline":  # not decided: nothing to blame yet
        return Limit("borderline", count.ranks, False)
    if verdict.storage_use is not None and verdict.storage_use >= SATURATED_SHARE:
        return Limit("storage", count.ranks, False)
    if verdict.host_cores and verdict.cores_used >= SATURATED_SHARE * verdict.host_cores:
        return Limit("cores", count.ranks, False)
    if verdict.storage_use_point is not None and verdict.storage_use_point >= SATURATED_SHARE:
        # the ranks drew as much as the storage's reading says it gives, whose interval is too wide
        # to decide: a rank waiting longer than the others is what a shared storage does too, so no
        # straggler is blamed while the storage is not ruled out
        return Limit("storage-undecided", count.ranks, False)
    if verdict.stragglers:
        return Limit("straggler", count.ranks, False, stragglers=verdict.stragglers)
    if count.ranks > 1 and verdict.own_wait_max is not None and verdict.own_wait_max < 1 - MIN_BUSY_SHARE:
        return Limit("lockstep", count.ranks, False)  # no rank waits much itself: they wait for each other
    return Limit("workers", count.ranks, False)


def _project(count: RankCountResult, verdict: CountVerdict, gpus: int | None) -> Limit:
    """The next count, from the per-rank demand the largest busy count measured."""
    used, cores, ranks_here = _busiest_host(count)
    by_cores = cores / (used / ranks_here) if used > 0 and cores else None
    by_storage = None
    if verdict.storage_use is not None and verdict.storage_use > 0:
        by_storage = count.ranks / verdict.storage_use
    candidates = {"cores": by_cores, "storage": by_storage, "devices": float(gpus) if gpus else None}
    known = {k: v for k, v in candidates.items() if v is not None}
    if not known:
        return Limit("undetermined", count.ranks + 1, True)
    stage = min(known, key=lambda k: known[k])
    fed = known[stage]
    at = max(count.ranks + 1, math.floor(fed) + 1)
    return Limit(stage, at, True, by_cores, by_storage, gpus)


def conclude_regime(regime: str, counts: list[RankCountResult], gpus: int | None) -> RegimeConclusion:
    counts = sorted((c for c in counts if c.regime == regime), key=lambda c: c.ranks)
    ok = [c for c in counts if c.status == "ok" and c.per_rank]
    base = (ok[0].aggregate().value / ok[0].ranks, _mean_busy(ok[0])) if ok else None
    verdicts = [judge(c, base) for c in counts]
    if not counts:
        return RegimeConclusion(regime, 0, (), None)
    busy = [v.ranks for v in verdicts if v.status == "busy"]
    largest = max(busy, default=0)
    above = [
        (c, v) for c, v in zip(counts, verdicts, strict=True) if c.ranks > largest and v.status != "busy"
    ]
    if above:
        limit = _diagnose(*above[0])
    else:
        top = next(c for c, v in zip(counts, verdicts, strict=True) if v.ranks == largest)
        limit = _project(top, verdicts[counts.index(top)], gpus)
    return RegimeConclusion(regime, largest, tuple(verdicts), limit)


def conclude(result: ScaleResult) -> ScaleResult:
    """The result with its conclusion (recomputed on every render)."""
    gpus = result.gpus if result.compute == "real" and result.backend == "nccl" else None
    regimes = tuple(dict.fromkeys(c.regime for c in result.counts))
    return replace(
        result,
        conclusion=ScaleConclusion(tuple(conclude_regime(r, list(result.counts), gpus) for r in regimes)),
    )
