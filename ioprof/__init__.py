"""ioprof: find out whether PyTorch image training is limited by storage, CPU decode or GPU compute."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ioprof.core.version import __version__

if TYPE_CHECKING:  # imported when used: `import ioprof` stays light
    from torch.utils.data import DataLoader

    from ioprof.notebook import Run
    from ioprof.observe.watch import Watch

__all__ = ["__version__", "load", "watch"]


def watch(
    loader: DataLoader[Any] | None = None,
    *,
    steps: int = 100,
    seconds: float | None = 60.0,
    probe: bool = True,
) -> Watch:
    """Watch your own training from code: ``with ioprof.watch() as w: train()``; see ``ioprof.watch``'s module."""
    from ioprof.observe.watch import watch as _watch

    return _watch(loader, steps=steps, seconds=seconds, probe=probe)


def load(path: str | Path) -> Run:
    """A finished run for a notebook: ``run = ioprof.load("reports/sweep-…")``; then ``run.cells``,
    ``run.ceilings`` (and ``run.loaders``, ``run.alternatives``, ``run.decisions``) as pandas DataFrames."""
    from ioprof.notebook import load as _load

    return _load(path)
