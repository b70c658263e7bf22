"""What every benchmark does with its figures: print them, and save them as JSON."""

from __future__ import annotations

import json
import os
import platform
import tempfile
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def save(figures: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(figures, indent=2)
    path.write_text(text + "\n")
    print(text)
    print(f"saved {path}")


def shapes(
    name: str,
    how: str,
    shapes: Mapping[str, tuple[str, ...]],
    one: Callable[[Path, str, tuple[str, ...]], dict[str, Any]],
    rounds: int,
) -> dict[str, Any]:
    """``one`` run of each shape (its arguments), ``rounds`` times, in a folder of their own: the
    figures of each, printed as they come, with when, where and how they were taken."""
    out: dict[str, Any] = {
        "benchmark": name,
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": {
            "cores": len(os.sched_getaffinity(0)),
            "processor": platform.processor() or platform.machine(),
        },
        "how": how,
        "shapes": {},
    }
    with tempfile.TemporaryDirectory(prefix=f"ioprof-bench-{name}-") as tmp:
        for i, (shape, args) in enumerate(shapes.items()):
            got = []
            for r in range(rounds):
                got.append(one(Path(tmp), f"s{i}r{r}", args))
                print(shape, got[-1], flush=True)
            out["shapes"][shape] = got
    return out
