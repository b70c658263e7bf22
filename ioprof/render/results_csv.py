"""``results.csv``: one row per cell, written from the same DataFrame ``ioprof.load`` gives."""

from __future__ import annotations

from ioprof.core.results import SweepResult
from ioprof.render.frames import CELL_COLUMNS, cells_frame

COLUMNS = CELL_COLUMNS


def render_csv(result: SweepResult) -> str:
    return cells_frame(result).to_csv(index=False, lineterminator="\n")
