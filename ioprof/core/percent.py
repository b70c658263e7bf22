"""A share written as a percentage, one form in every layer's words: ``31.0 %``, a space before
the sign (the host's notes, the observer's and the report's alike)."""

from __future__ import annotations

import math


def pct(x: float | None, digits: int = 1) -> str:
    """A share as a percentage: ``31.0 %``; ``—`` where there is none."""
    return "—" if x is None or not math.isfinite(x) else f"{x * 100:.{digits}f} %"


def signed_pct(x: float | None, digits: int = 1) -> str:
    """A change as a signed percentage: ``+17 %``, ``-3 %``."""
    return "—" if x is None or not math.isfinite(x) else f"{x * 100:+.{digits}f} %"
