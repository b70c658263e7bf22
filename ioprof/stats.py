"""Pure statistics over raw samples. No I/O, no torch: tested on hand-built numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


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
