"""The façade for notebooks: ``ioprof.load(path)`` gives a finished run with its conclusions
recomputed and its tables as pandas DataFrames, units in the column names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ioprof.core.resultfile import AnyResult

if TYPE_CHECKING:  # pandas is imported where a table is built, not with ioprof
    import pandas as pd


@dataclass(frozen=True)
class Run:
    """A finished run: the result (conclusions recomputed) and its tables. A table the run's kind
    does not have is empty."""

    path: str
    result: AnyResult

    @property
    def kind(self) -> str:
        return self.result.kind

    @property
    def verdict(self) -> str:
        from ioprof.render import kinds

        return kinds.headline(self.result)

    def _frame(self, name: str) -> pd.DataFrame:
        from ioprof.render import kinds

        return kinds.frame(self.result, name)

    @property
    def cells(self) -> pd.DataFrame:
        """Sweeps and runs: one row per cell."""
        return self._frame("cells")

    @property
    def ceilings(self) -> pd.DataFrame:
        """Sweeps, runs and place: one row per stage ceiling."""
        return self._frame("ceilings")

    @property
    def stages(self) -> pd.DataFrame:
        """Sweeps and runs: one row per stage inside each cell's loader (``Inside the loader``)."""
        return self._frame("stages")

    @property
    def loaders(self) -> pd.DataFrame:
        """``ioprof run``: every DataLoader of the user's script."""
        return self._frame("loaders")

    @property
    def alternatives(self) -> pd.DataFrame:
        """``ioprof whatif``: each alternative, ranked where measured."""
        return self._frame("alternatives")

    @property
    def decisions(self) -> pd.DataFrame:
        """``ioprof place``: one row per location."""
        return self._frame("decisions")

    @property
    def ranks(self) -> pd.DataFrame:
        """``ioprof scale``: one row per rank of each count."""
        return self._frame("ranks")

    @property
    def devices(self) -> pd.DataFrame:
        """``ioprof devices``: one row per model, batch size and device setup."""
        return self._frame("devices")

    @property
    def layers(self) -> pd.DataFrame:
        """``ioprof profile``: one row per layer."""
        return self._frame("layers")


def load(path: str | Path) -> Run:
    """A run's ``results.json`` (or its folder), with the conclusions recomputed."""
    from ioprof.core import resultfile
    from ioprof.render import kinds

    return Run(str(path), kinds.conclude(resultfile.load(path)))
