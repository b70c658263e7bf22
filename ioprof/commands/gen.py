"""``ioprof gen``: write synthetic ImageFolder trees that compress like photographs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ioprof.datasets.synth import DatasetSpec, generate_many
from ioprof.results import atomic_write_text


def gen(
    resolutions: tuple[tuple[int, int], ...],
    images: int,
    out: str,
    seed: int,
    classes: int,
    progress: Callable[[str], None],
) -> int:
    specs = [DatasetSpec(w, h, images, classes=classes, seed=seed) for w, h in resolutions]
    out_dir = Path(out)
    roots = generate_many(specs, out_dir, progress)
    summary = []
    for root in roots:
        m = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        summary.append(
            {k: m[k] for k in ("label", "files", "total_bytes", "mean_file_bytes", "bits_per_pixel")}
            | {"path": str(root)}
        )
        print(
            f"{root}: {m['files']} images, mean {m['mean_file_bytes'] / 1e3:,.0f} kB, "
            f"{m['bits_per_pixel']:.2f} bits/pixel"
        )
    atomic_write_text(out_dir / "manifest.json", json.dumps({"datasets": summary}, indent=2) + "\n")
    return 0
