"""The one table from a result's kind to what concludes it, what writes its report and what says
its headline — used by ``ioprof report``, ``ioprof.load`` and every command, so that the branch on
result type is written once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ioprof.conclude import place as place_conclusion
from ioprof.conclude import profile as profile_conclusion
from ioprof.conclude import scale as scale_conclusion
from ioprof.conclude import sweep as sweep_conclusion
from ioprof.conclude import whatif as whatif_conclusion
from ioprof.core.resultfile import AnyResult
from ioprof.core.results import (
    DevicesResult,
    PlaceResult,
    ProfileResult,
    ScaleResult,
    SweepResult,
    WhatifResult,
)
from ioprof.render import devices, place, profile, run, scale, sweep, whatif


@dataclass(frozen=True)
class Kind:
    conclude: Callable[[Any], Any]  # conclusions recomputed from the measurements
    write: Callable[[Any, Path], Path]  # report.md (and CSV, plots) into a folder; returns report.md
    headline: Callable[[Any], str]  # the answer in one plain line


def _unchanged(result: Any) -> Any:
    return result  # ``devices``: its figures are derived when rendered


KINDS: dict[str, Kind] = {
    "sweep": Kind(sweep_conclusion.conclude, sweep.write, sweep.headline),
    "run": Kind(sweep_conclusion.conclude, run.write, run.headline),
    "place": Kind(place_conclusion.conclude, place.write, place.headline),
    "whatif": Kind(whatif_conclusion.conclude, whatif.write, whatif.headline),
    "profile": Kind(profile_conclusion.conclude, profile.write, profile.headline),
    "scale": Kind(scale_conclusion.conclude, scale.write, scale.headline),
    "devices": Kind(_unchanged, devices.write, devices.headline),
}


def kind_of(result: AnyResult) -> Kind:
    return KINDS[result.kind]


R = TypeVar("R", bound=SweepResult | PlaceResult | WhatifResult | ProfileResult | ScaleResult | DevicesResult)


def conclude(result: R) -> R:
    """The result with its verdicts, decisions, ranking or prediction recomputed."""
    concluded: R = kind_of(result).conclude(result)
    return concluded


def write(result: AnyResult, out_dir: Path) -> Path:
    return kind_of(result).write(result, out_dir)


def headline(result: AnyResult) -> str:
    return kind_of(result).headline(result)
