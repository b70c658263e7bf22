"""Pure statistics over raw samples. No I/O, no torch: tested on hand-built numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile (in [0, 1]) of samples already sorted, by nearest rank: a value observed."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def percentile(samples: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), ``q`` in [0, 100]."""
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    xs = sorted(samples)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Summary:
    """Summary of a list of samples; the samples themselves are kept elsewhere."""

    n: int
    mean: float
    std: float
    min: float
    p5: float
    p50: float
    p95: float
    p99: float
    max: float

    @property
    def rel_std_error(self) -> float:
        """Standard error of the mean relative to the mean (0 when undefined)."""
        if self.n < 2 or self.mean == 0:
            return 0.0
        return self.std / math.sqrt(self.n) / abs(self.mean)


def summarize(samples: Sequence[float]) -> Summary:
    """Mean, sample standard deviation and percentiles of ``samples``."""
    if not samples:
        raise ValueError("summary of no samples")
    n = len(samples)
    mean = sum(samples) / n
    var = sum((x - mean) ** 2 for x in samples) / (n - 1) if n > 1 else 0.0
    return Summary(
        n=n,
        mean=mean,
        std=math.sqrt(var),
        min=min(samples),
        p5=percentile(samples, 5),
        p50=percentile(samples, 50),
        p95=percentile(samples, 95),
        p99=percentile(samples, 99),
        max=max(samples),
    )


def share_below(samples: Sequence[float], threshold: float) -> float:
    """Fraction of samples strictly below ``threshold``."""
    if not samples:
        raise ValueError("share of no samples")
    return sum(1 for x in samples if x < threshold) / len(samples)


# Two-sided 95 % quantiles of Student's t by degrees of freedom (standard tables); beyond 30
# the normal quantile with a 1/df correction is within 0.2 % of the exact value.
_T_975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
# Batch means: at most this many groups of consecutive samples, each at least ``min_group`` long
# when there are samples enough for MIN_BATCHES such groups (shorter ones otherwise: wider intervals).
MAX_BATCHES = 10
MIN_BATCHES = 5


def t_975(df: int) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= len(_T_975):
        return _T_975[df - 1]
    return 1.959964 + 2.37 / df


def _t_within(t: float, df: int) -> float:
    """P(|T| ≤ t) for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    c2, sin = math.cos(theta) ** 2, math.sin(theta)
    if df % 2:
        term = total = math.cos(theta)
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + (sin * total if df > 1 else 0.0))
    term = total = 1.0
    for k in range(1, df // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return sin * total


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t with integer ``df``, by bisection."""
    if df < 1 or not 0.5 < p < 1.0:
        raise ValueError(f"t quantile needs df ≥ 1 and 0.5 < p < 1, got df={df}, p={p}")
    if abs(p - 0.975) < 1e-12:
        return t_975(df)
    target = 2 * p - 1
    low, high = 0.0, 1.0
    while _t_within(high, df) < target:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if _t_within(mid, df) < target else (low, mid)
    return (low + high) / 2


# A measurement that stops once its interval is narrow enough looks at the interval only at fixed
# counts — the first, then each doubling, INTERIM_LOOKS times in all — and once more at its cap;
# every interval it reports is held to 95 % / LOOKS, so that the look it stopped at still covers
# with 95 % (Bonferroni: the looks' miss rates add up). Looking after every step would not.
INTERIM_LOOKS = 5
LOOKS = INTERIM_LOOKS + 1


def is_look(n: int, first: int) -> bool:
    """Whether a count of ``n`` samples is one of the fixed looks: first, 2×, 4×, 8×, 16× first."""
    if first < 1 or n < first or n % first:
        return False
    q = n // first
    return q & (q - 1) == 0 and q.bit_length() <= INTERIM_LOOKS


@dataclass
class Looks:
    """When a stopping rule may look at its interval: at the first count of at least ``first``
    samples reached after ``min_seconds`` (its base), then at each doubling of the base, at most
    INTERIM_LOOKS looks in all — so that the correction for LOOKS holds however fast samples come.

    With a time cap (``cap_s``), the looks the schedule can hold are known at the base look, from
    its time: the doublings that come before the cap. Only those are taken (``planned``), and every
    interval is held to them and the cap's (``count``): a cell that can look twice before its cap
    pays for three looks, not six."""

    first: int
    min_seconds: float = 0.0
    base: int = 0
    unit: int = 1  # the base is a whole number of these (a turn of the workers: one batch each)
    cap_s: float | None = None
    planned: int = INTERIM_LOOKS

    def due(self, n: int, elapsed_s: float = 0.0) -> bool:
        if not self.base:
            if n >= self.first and elapsed_s >= self.min_seconds and n % max(1, self.unit) == 0:
                self.base = n
                if self.cap_s is not None and 0 < elapsed_s < self.cap_s:
                    fit = 1 + math.floor(math.log2(self.cap_s / elapsed_s))
                    self.planned = max(1, min(INTERIM_LOOKS, fit))
                elif self.cap_s is not None and elapsed_s >= self.cap_s:
                    self.planned = 1  # a first look at or past the cap is the only one
                return True
            return False
        return is_look(n, self.base) and (n // self.base).bit_length() <= self.planned

    @property
    def count(self) -> int:
        """The looks every interval this rule reports is held to: its planned ones and the cap's."""
        return self.planned + 1


def looks_level(looks: int, level: float = 0.95) -> float:
    """The two-sided level each of ``looks`` interim looks needs so that the one a stopping rule
    stops at still covers with ``level`` (Bonferroni: the miss rates of the looks add up)."""
    return 1 - (1 - level) / max(1, looks)


@dataclass(frozen=True)
class Interval:
    """A figure with its 95 % interval (``batches`` batch means; fewer than 2: no interval)."""

    value: float
    low: float
    high: float
    batches: int

    @property
    def known(self) -> bool:
        return self.batches >= 2 and math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def rel_half_width(self) -> float:
        """Half the interval's width relative to the value (inf when unknown)."""
        if not self.known or self.value == 0:
            return math.inf
        return (self.high - self.low) / 2 / abs(self.value)

    def centered_on(self, value: float) -> Interval:
        """The same relative width around another estimate of the same figure."""
        if not self.known or self.value == 0:
            return Interval(value, self.low, self.high, self.batches)
        scale = value / self.value
        return Interval(value, self.low * scale, self.high * scale, self.batches)

    def clipped(self, lo: float, hi: float) -> Interval:
        """The same figure held to [lo, hi] (a share cannot lie outside [0, 1])."""
        return Interval(
            min(hi, max(lo, self.value)),
            min(hi, max(lo, self.low)),
            min(hi, max(lo, self.high)),
            self.batches,
        )

    @classmethod
    def exact(cls, value: float) -> Interval:
        """A figure with no spread to speak of (a simulated rate)."""
        return cls(value, value, value, 0)

    @classmethod
    def unknown(cls, value: float) -> Interval:
        return cls(value, -math.inf, math.inf, 0)


def quotient(top: Interval, bottom: Interval, times: float = 1.0) -> Interval:
    """top ÷ (times × bottom), its bounds from both intervals' ends; unknown where either is."""
    value = top.value / (times * bottom.value) if bottom.value > 0 else 0.0
    if not (top.known and bottom.known) or bottom.low <= 0:
        return Interval.unknown(value)
    low, high = top.low / (times * bottom.high), top.high / (times * bottom.low)
    return Interval(value, low, high, min(top.batches, bottom.batches))


def combination(terms: Sequence[tuple[float, Interval]]) -> Interval:
    """Σ c·x over independent readings x, its 95 % interval from theirs: each reading's half-width
    on the side it moves the sum, scaled by c, in quadrature (the bounds of independent intervals
    do not add: both readings at their far ends at once is far rarer than 5 %). Unknown where any
    reading is."""
    value = sum(c * x.value for c, x in terms)
    if not all(x.known for _, x in terms):
        return Interval.unknown(value)
    down = math.sqrt(sum((c * ((x.value - x.low) if c > 0 else (x.high - x.value))) ** 2 for c, x in terms))
    up = math.sqrt(sum((c * ((x.high - x.value) if c > 0 else (x.value - x.low))) ** 2 for c, x in terms))
    return Interval(value, value - down, value + up, min(x.batches for _, x in terms))


def groups(n: int, min_group: int = 1, max_groups: int = MAX_BATCHES) -> list[range]:
    """Split ``n`` consecutive samples into at most ``max_groups`` near-equal groups.

    Groups are whole multiples of ``min_group`` (say, one batch per loader worker: a DataLoader
    hands its workers' batches over in turn, so any ``workers`` consecutive batches hold one from
    each, and a burst of them falls inside one group), the last taking what is left over, where
    ``n`` allows MIN_BATCHES of them; with fewer samples the groups are shorter, which makes the
    interval wider, never narrower, when batches come in bursts. Groups of 6.2 batches of a
    4-worker loader held one burst or two by where they fell: an H100 cell's rate read ± 26 %
    where groups of whole turns read ± 14 % (8 workers: ± 15 % against ± 3.6 %).
    """
    min_group = max(1, min_group)
    if n // min_group < MIN_BATCHES:
        min_group = max(1, n // MIN_BATCHES)
    units = n // min_group
    k = min(max_groups, units)
    if k < 1:
        return []
    bounds = [round(i * units / k) * min_group for i in range(k + 1)]
    bounds[-1] = n
    return [range(bounds[i], bounds[i + 1]) for i in range(k)]


def ratio_interval(
    numerators: Sequence[float], denominators: Sequence[float], min_group: int = 1, looks: int = 1
) -> Interval:
    """Σnumerators / Σdenominators (a rate, a share) with a 95 % interval from batch means.

    Consecutive samples are grouped (``min_group`` at least, e.g. one per loader worker, so that
    a burst of batches falls inside one group); the spread of the group ratios gives the
    interval around the ratio of the sums. ``looks``: how many times a stopping rule could have
    looked at this interval before it was reported; each look is held to 95 % / ``looks``.
    """
    if len(numerators) != len(denominators):
        raise ValueError(f"{len(numerators)} numerators but {len(denominators)} denominators")
    total = sum(denominators)
    value = sum(numerators) / total if total > 0 else 0.0
    parts = groups(len(numerators), min_group)
    ratios = []
    for g in parts:
        den = sum(denominators[i] for i in g)
        if den <= 0:
            return Interval.unknown(value)
        ratios.append(sum(numerators[i] for i in g) / den)
    if len(ratios) < 2:
        return Interval.unknown(value)
    mean = sum(ratios) / len(ratios)
    sd = math.sqrt(sum((r - mean) ** 2 for r in ratios) / (len(ratios) - 1))
    df = len(ratios) - 1
    t = t_975(df) if looks <= 1 else t_quantile(1 - (1 - looks_level(looks)) / 2, df)
    half = t * sd / math.sqrt(len(ratios))
    # a ratio of amounts that cannot be negative (images, bytes, seconds) cannot be: an interval
    # wider than the figure itself ends at 0, not below it (its coverage is the same)
    low = value - half if any(n < 0 for n in numerators) else max(0.0, value - half)
    return Interval(value, low, value + half, len(ratios))


def gaps(completed_s: Sequence[float]) -> list[float]:
    """Each completion's time since the one before it (the first's since 0, the start): the
    denominators of a rate whose completions were stamped from its start."""
    return [t - p for p, t in zip((0.0, *completed_s[:-1]), completed_s, strict=True)]


# MSER-5: a start-up transient is cut in whole batches of this many samples (or more), and only
# where there are MSER_MIN_BATCHES batches to judge it by.
MSER_BATCH = 5
MSER_MIN_BATCHES = 4
MSER_SLACK = 1.5
MSER_ROUNDING = 1e-9  # a spread of batches this small, relative to their mean, is rounding


def steady_start(numerators: Sequence[float], denominators: Sequence[float], min_group: int = 1) -> int:
    """How many leading samples of a rate (Σnumerators / Σdenominators) are a start-up transient —
    a token bucket's burst, a connection's slow start — by MSER-5 (White 1997; White, Cobb and
    Spratt 2000): the samples in batches of MSER_BATCH (at least ``min_group``), each batch's
    denominator per numerator (seconds per byte: finite for a burst that took no time), and the
    cut d, at most half the batches, that minimises the marginal standard error of what is left,
    Σ_{j≥d}(x_j − x̄)² / (k − d)². 0 where nothing is gained by a cut, or with too few batches."""
    xs = _mser_batches(numerators, denominators, min_group)
    return 0 if xs is None else _mser_cut(xs) * max(MSER_BATCH, min_group)


def _mser_cut(xs: Sequence[float]) -> int:
    """MSER-5's cut over its batches (``steady_start``), in batches."""
    k = len(xs)
    mser = []
    for d in range(k // 2 + 1):
        tail = xs[d:]
        mean = sum(tail) / len(tail)
        mser.append(sum((x - mean) ** 2 for x in tail) / len(tail) ** 2)
    # the earliest cut within MSER_SLACK of the best: past the transient, later cuts differ only by
    # the noise of a variance from a few batches, and would throw steady reads away; a tail as
    # steady as rounding (a paced emulation, a fake clock) leaves only rounding to choose by: none
    best = min(mser)
    rounding = (MSER_ROUNDING * sum(xs) / k) ** 2
    return next(d for d, v in enumerate(mser) if v <= MSER_SLACK * best + rounding)


def _mser_batches(
    numerators: Sequence[float], denominators: Sequence[float], min_group: int
) -> list[float] | None:
    """MSER-5's batches (``steady_start``): each one's denominator per numerator; None where there
    are too few to judge a cut by, or a batch with no numerator."""
    if len(numerators) != len(denominators):
        raise ValueError(f"{len(numerators)} numerators but {len(denominators)} denominators")
    m = max(MSER_BATCH, min_group)
    k = len(numerators) // m
    if k < MSER_MIN_BATCHES:
        return None
    xs = []
    for j in range(k):
        num = sum(numerators[j * m : (j + 1) * m])
        if num <= 0:
            return None
        xs.append(sum(denominators[j * m : (j + 1) * m]) / num)
    return xs


def transient_start(numerators: Sequence[float], denominators: Sequence[float], min_group: int = 1) -> int:
    """MSER-5's cut (``steady_start``), taken only where what it leaves out differs from what is
    left beyond chance: the mean of its batches against the rest's, by the spread within both
    (Student's t, 95 % shared among the cuts MSER weighed). MSER picks the cut that leaves the
    steadiest tail, so it finds one in a steady series by chance — in 16 % of steady series of 45
    steps and 45 % of 20, each narrowing the interval by selection — where this keeps 1-4 %.
    0 where the leading batches are within chance of the rest."""
    xs = _mser_batches(numerators, denominators, min_group)
    cut = 0 if xs is None else _mser_cut(xs)  # in batches
    if xs is None or not cut:
        return 0
    head, tail = xs[:cut], xs[cut:]
    first, mean = sum(head) / len(head), sum(tail) / len(tail)
    # the spread within both parts, pooled: the tail's own was chosen for being the steadiest
    within = sum((x - first) ** 2 for x in head) + sum((x - mean) ** 2 for x in tail)
    sd = math.sqrt(within / (len(xs) - 2))
    se = sd * math.sqrt(1 / len(head) + 1 / len(tail))
    gap = abs(first - mean)
    rounding = MSER_ROUNDING * mean
    # the cut is the likeliest of the len(xs) // 2 MSER weighed: each is held to 95 % / that many
    t = t_quantile(1 - (1 - looks_level(len(xs) // 2)) / 2, len(xs) - 2)
    return cut * max(MSER_BATCH, min_group) if gap > t * se + rounding else 0


def data_wait_share(wait_s: Sequence[float], step_s: Sequence[float]) -> float:
    """Share of step time spent blocked waiting for the next batch."""
    total = sum(wait_s) + sum(step_s)
    return sum(wait_s) / total if total > 0 else 0.0


def wait_share_interval(
    wait_s: Sequence[float], step_s: Sequence[float], min_group: int = 1, looks: int = 1
) -> Interval:
    """The data-wait share with its 95 % interval (batch means), clipped to [0, 1]."""
    totals = [w + s for w, s in zip(wait_s, step_s, strict=True)]
    i = ratio_interval(wait_s, totals, min_group, looks)
    return Interval(i.value, max(0.0, i.low), min(1.0, i.high), i.batches)


def pooled_slope(series: Sequence[Sequence[tuple[float, float]]]) -> Interval:
    """The slope of y on x shared by several series (each its own intercept: one worker's memory
    against the samples it produced), with a 95 % interval; unknown with too few points."""
    sxx = sxy = 0.0
    centred: list[list[tuple[float, float]]] = []
    for points in series:
        if len(points) < 2:
            continue
        mx = sum(x for x, _ in points) / len(points)
        my = sum(y for _, y in points) / len(points)
        c = [(x - mx, y - my) for x, y in points]
        centred.append(c)
        sxx += sum(x * x for x, _ in c)
        sxy += sum(x * y for x, y in c)
    if sxx <= 0:
        return Interval.unknown(0.0)
    slope = sxy / sxx
    n = sum(len(c) for c in centred)
    df = n - len(centred) - 1
    if df < 1:
        return Interval(slope, -math.inf, math.inf, 0)
    ssr = sum((y - slope * x) ** 2 for c in centred for x, y in c)
    half = t_975(df) * math.sqrt(ssr / df / sxx)
    return Interval(slope, slope - half, slope + half, n)
