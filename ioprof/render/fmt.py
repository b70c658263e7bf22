"""Number formatting for humans: the only place values are rounded.

A figure with an interval reads ``252 ± 3 %`` (the half-width of its 95 % interval relative to
it) where the interval is symmetric about it as far as the figure shows, else its ends:
``2,691 [2,691–3,009]`` (an interval held to a bound, or stretched to take in the figure); a
share reads ``31 % [28–34]``, or ``94 %`` alone where its ends round to the same (an interval
narrower than the digits shown tells nothing the figure does not). Where too few samples give no
interval, it says so.
"""

from __future__ import annotations

import math

from ioprof.core.percent import pct as pct
from ioprof.core.percent import signed_pct as signed_pct
from ioprof.core.stats import Interval


def rate(x: float | None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    # three significant figures, chosen by the value as printed: 9.998 is "10.0", not "10.00"
    if round(x, 1) >= 100:
        return f"{x:,.0f}"
    if round(x, 2) >= 10:
        return f"{x:,.1f}"
    return f"{x:,.2f}"


def plus_minus(i: Interval) -> str:
    """`` ± 3 %``, or `` (± ?)`` where the samples were too few for any interval (empty for an exact
    figure); an interval wider than the figure (cut off at 0: a rate cannot be negative) in words,
    with its range: `` (too few to tell: 0–12.6)``; an interval whose two sides differ as shown
    (held to a bound on one side) by its ends: `` [2,691–3,009]``."""
    if i.batches == 0 and i.low == i.high:
        return ""
    if not i.known:
        return " (± ?)"
    if i.low <= 0 < i.value and i.high - i.value > i.value:
        return f" (too few to tell: 0–{rate(i.high)})"
    if i.value > 0 and _percent(i.value - i.low, i.value) != _percent(i.high - i.value, i.value):
        return f" [{rate(i.low)}–{rate(i.high)}]"
    return f" ± {_percent(i.rel_half_width, 1.0)} %"


def _percent(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole`` to the digits ``plus_minus`` shows: whole from 1 % as
    printed (0.998 % is "1", not "1.0"), one decimal under it."""
    x = part / whole * 100
    return f"{x:.0f}" if round(x, 1) >= 1 else f"{x:.1f}"


def rate_ci(i: Interval) -> str:
    """A rate with its interval: ``252 ± 3 %``."""
    return rate(i.value) + plus_minus(i)


def share_ci(i: Interval, digits: int = 1) -> str:
    """A share with its interval: ``31.0 % [28.4–33.7]``."""
    if not i.known:
        return pct(i.value, digits) + " [± ?]"
    return pct(i.value, digits) + share_ends(i.low, i.high, digits)


def rate_span(low: float, high: float) -> str:
    """A range of rates by its ends, ``3.44–3.56``; one figure where both print the same
    (``3.56–3.56`` says no more than ``3.56``)."""
    a, b = rate(low), rate(high)
    return a if a == b else f"{a}–{b}"


def share_ends(low: float, high: float, digits: int = 1) -> str:
    """`` [28.4–33.7]``: a share's interval by its ends, as percentages to ``digits``; nothing
    where both ends show the same (``94 % [94–94]`` says no more than ``94 %``)."""
    a, b = f"{low * 100:.{digits}f}", f"{high * 100:.{digits}f}"
    return "" if a == b else f" [{a}–{b}]"


def share_range(value: float, low: float | None, high: float | None) -> str:
    """A share with its interval where there is one: ``62 % [58–66]``."""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return share_ci(Interval.unknown(value), 0)
    return share_ci(Interval(value, max(0.0, low), min(1.0, high), 2), 0)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and its noun, plural unless one: ``1 shard``, ``3 shards`` (``plural``: where not an s)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def mb(x_bytes: float) -> str:
    return f"{x_bytes / 1e6:,.1f} MB"


def size(x_bytes: float) -> str:
    """Bytes in the unit that reads best: kB, MB or GB, chosen by the value as printed (999.7 kB is
    "1.0 MB", not "1,000 kB")."""
    if round(abs(x_bytes) / 1e6, 1) >= 1000:
        return gb(x_bytes)
    if round(abs(x_bytes) / 1e3) >= 1000:
        return mb(x_bytes)
    return f"{x_bytes / 1e3:,.0f} kB"


def gb(x_bytes: float) -> str:
    return f"{x_bytes / 1e9:,.2f} GB"


def ms(x_s: float | None) -> str:
    return "—" if x_s is None else f"{x_s * 1e3:,.2f} ms"


def duration(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "—"
    # the unit chosen by the value as printed: 59.97 s is "1.0 min", not "60.0 s"
    if round(abs(s) / 60, 1) >= 60:
        return f"{s / 3600:,.1f} h"
    if round(abs(s), 1) >= 60:
        return f"{s / 60:,.1f} min"
    if round(abs(s) * 1e3) < 1000:
        return f"{s * 1e3:,.0f} ms"
    return f"{s:,.1f} s"
