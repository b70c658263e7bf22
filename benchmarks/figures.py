"""What every benchmark does with its figures: print them, and save them as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def save(figures: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(figures, indent=2)
    path.write_text(text + "\n")
    print(text)
    print(f"saved {path}")
