"""The one table from a result's kind to what concludes it, what writes its report and what says
its headline — used by ``ioprof report``, ``ioprof.load`` and every command, so that the branch on
result type is written once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ioprof.conclude import place as place_conclusion
from ioprof.conclude import profile as profile_conclusion
from ioprof.conclude import scale as scale_conclusion
from ioprof.conclude import sweep as sweep_conclusion
from ioprof.conclude import whatif as whatif_conclusion
from ioprof.core.resultfile import AnyResult
from ioprof.core.results import SweepResult
from ioprof.core.results_devices import DevicesResult
from ioprof.core.results_place import PlaceResult
from ioprof.core.results_profile import ProfileResult
from ioprof.core.results_scale import ScaleResult
from ioprof.core.results_whatif import WhatifResult
from ioprof.render import devices, frames, place, profile, run, scale, sweep, whatif

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Kind:
    conclude: Callable[[Any], Any]  # conclusions recomputed from the measurements
    write: Callable[[Any, Path], Path]  # report.md (and CSV, plots) into a folder; returns report.md
    headline: Callable[[Any], str]  # the answer in one plain line
    frames: dict[str, Callable[[Any], pd.DataFrame]] = field(default_factory=dict)  # pandas tables, by name


def _unchanged(result: Any) -> Any:
    return result  # ``devices``: its figures are derived when rendered


_SWEEP_FRAMES: dict[str, Callable[[Any], pd.DataFrame]] = {
    "cells": frames.cells_frame,
    "ceilings": frames.ceilings_frame,
    "stages": frames.stages_frame,
}
KINDS: dict[str, Kind] = {
    "sweep": Kind(sweep_conclusion.conclude, sweep.write, sweep.headline, _SWEEP_FRAMES),
    "run": Kind(
        sweep_conclusion.conclude,
        run.write,
        sweep.headline,
        {**_SWEEP_FRAMES, "loaders": frames.loaders_frame},
    ),
    "place": Kind(
        place_conclusion.conclude,
        place.write,
        place.headline,
        {"ceilings": frames.ceilings_frame, "decisions": frames.decisions_frame},
    ),
    "whatif": Kind(
        whatif_conclusion.conclude, whatif.write, whatif.headline, {"alternatives": frames.alternatives_frame}
    ),
    "profile": Kind(
        profile_conclusion.conclude, profile.write, profile.headline, {"layers": frames.layers_frame}
    ),
    "scale": Kind(scale_conclusion.conclude, scale.write, scale.headline, {"ranks": frames.ranks_frame}),
    "devices": Kind(_unchanged, devices.write, devices.headline, {"devices": frames.devices_frame}),
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


def frame(result: AnyResult, name: str) -> pd.DataFrame:
    """One of the result's pandas tables (an empty one where its kind has no such table)."""
    build = kind_of(result).frames.get(name)
    if build is None:
        import pandas as pd

        return pd.DataFrame()
    return build(result)
