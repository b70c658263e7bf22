"""What `ioprof compare` concludes: each run against the reference, cell by cell."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CellComparison:
    """One cell of the reference run against its match in another run."""

    dataset: str
    setting_a: str
    setting_b: str
    img_per_s_a: float
    img_per_s_b: float
    interval_a: tuple[float, float] | None
    interval_b: tuple[float, float] | None
    ratio: float  # b ÷ a
    ratio_low: float | None  # the conservative interval of the ratio (b.low ÷ a.high, b.high ÷ a.low)
    ratio_high: float | None
    wait_share_a: float
    wait_share_b: float
    change: str  # faster | slower | within-noise


@dataclass(frozen=True)
class RunComparison:
    """Another run against the reference: what differs, cell by cell, and the verdicts."""

    label: str
    settings: tuple[tuple[str, str, str], ...]  # (setting, reference's value, this run's)
    other_machine: bool
    other_version: bool
    machines: tuple[str, str]
    versions: tuple[str, str]
    cells: tuple[CellComparison, ...]
    unmatched: tuple[str, ...]  # cells in only one of the two
    verdicts: tuple[tuple[str, str, str], tuple[str, str, str]]  # (bottleneck, class, dataset) before, after
    verdict_changed: bool
    environment: tuple[tuple[str, str, str], ...] = ()  # (what, reference's, this run's): not options

    @property
    def slower(self) -> tuple[CellComparison, ...]:
        return tuple(c for c in self.cells if c.change == "slower")

    @property
    def conclusive(self) -> bool:
        """At least one matched cell with intervals on both sides: a change could have been seen."""
        return any(c.ratio_low is not None for c in self.cells)


@dataclass(frozen=True)
class Comparison:
    """Runs against a reference. ``repeats``: runs the user declared repeats of the reference
    (``--repeat``); their spread raises the noise floor. Equal options never make a repeat."""

    reference: str
    kind: str
    runs: tuple[RunComparison, ...]
    min_effect: float  # the smallest change that counts (raised by the spread among repeats)
    repeats: int = 0
    repeat_spread: float | None = None  # the largest move of a declared repeat from the reference
    outcome: str = "same"  # slower | inconclusive | same (the exit code's meaning)
