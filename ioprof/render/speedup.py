"""The sweep report's speed-up table: each dataset's fastest multiprocess cell against its serial one.

A ratio of two measured rates is only as sure as both: its interval runs from the low end of one
over the high end of the other. And a loader can gain no more than the serial loader's wait for
data (the step staying what it is): a speed-up beyond that came from the step itself running
faster in the faster cell, as when the host's pace drifts between two windows — said beside the
figure, as the answer says it.
"""

from __future__ import annotations

from ioprof.conclude.sweep import loader_gain, speedup_over_serial
from ioprof.core.results import CellResult, SweepResult
from ioprof.render import words
from ioprof.render.mdtable import table


def section(result: SweepResult) -> list[str]:
    rows = []
    for info in result.datasets:
        serial, best, ratio = speedup_over_serial([c for c in result.cells if c.dataset == info.label])
        rows.append(
            [
                info.label,
                words.cell_figures(serial)[0] if serial else "—",
                f"{words.cell_figures(best)[0]} ({best.setting.label})" if best else "—",
                _ratio(serial, best, ratio) if serial and best and ratio else "—",
            ]
        )
    head = ["dataset", "serial img/s", "fastest multiprocess img/s", "speed-up"]
    return ["## Speed-up of the multiprocess loader over the serial one", "", *table(head, rows), ""]


def _ratio(serial: CellResult, best: CellResult, ratio: float) -> str:
    """The speed-up with its interval where both rates have one; what it means where it does not
    tell the loaders apart, or goes beyond what a loader can gain."""
    s, b = serial.rates().throughput, best.rates().throughput
    if not (words.decided(s) and words.decided(b)):  # a rate printed without its interval
        return f"{ratio:.2f}×"
    low, high = b.low / s.high, b.high / s.low
    spread = f" [{low:.2f}–{high:.2f}]" if f"{low:.2f}" != f"{high:.2f}" else ""
    text = f"{ratio:.2f}×{spread}"
    most, beyond = loader_gain(serial, best)
    if beyond and most is not None:
        return (
            f"{text}: beyond the {most:.2f}× a loader can gain here (all of the serial loader's wait "
            "removed) — the step itself ran faster in the faster cell, as when the machine's speed changes "
            "between two windows"
        )
    if low <= 1 <= high:
        return f"{text}: not told apart from the serial loader"
    return text
