"""Number formatting for humans: the only place values are rounded."""

from __future__ import annotations

import math

from ioprof.config import worker_count


def rate(x: float | None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:,.1f}"
    return f"{x:,.2f}"


def pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x * 100:.{digits}f} %"


def mb(x_bytes: float) -> str:
    return f"{x_bytes / 1e6:,.1f} MB"


def ms(x_s: float | None) -> str:
    return "—" if x_s is None else f"{x_s * 1e3:,.2f} ms"


def setting(loader: str, workers: int) -> str:
    return "serial (in-process)" if loader == "serial" else worker_count(workers)
