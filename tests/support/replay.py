"""Recorded runs (``tests/support/record.py``): real runs' measurements, replayed through
``conclude/`` and ``render/`` without measuring."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import paths

from ioprof.core.resultfile import load, to_jsonable
from ioprof.render.kinds import conclude

RECORDED = paths.DATA / "recorded"


def recorded(name: str) -> Path:
    """The folder of a recorded run (``compare/two``): it must be there, or the tests say how to make it."""
    path = RECORDED / name
    assert path.exists(), f"{path} is missing: python tests/support/record.py {name.split('/')[0]}"
    return path


def replay(name: str) -> tuple[Any, dict[str, Any]]:
    """A recorded run concluded again from its measurements (never its stored conclusions): the
    result, and the same as ``results.json`` would hold it."""
    result = conclude(load(recorded(name)))
    return result, to_jsonable(result)
