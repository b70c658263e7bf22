"""``ioprof gen``: write synthetic ImageFolder trees that compress like photographs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ioprof.commands.args import add_images, add_resolutions, add_seed, typed
from ioprof.commands.values import positive_int
from ioprof.core.config import DEFAULT_IMAGES_PER_DATASET, DEFAULT_RESOLUTIONS
from ioprof.core.resultfile import atomic_write_text
from ioprof.datasets.synth import DatasetSpec, generate_many

if TYPE_CHECKING:
    from ioprof.measure.session import Progress

NAME = "gen"
HELP = "write synthetic ImageFolder datasets that compress like photographs"
DEFAULT_CLASSES = DatasetSpec(1, 1, 1).classes


def add_arguments(p: argparse.ArgumentParser) -> None:
    res = ",".join(f"{w}x{h}" for w, h in DEFAULT_RESOLUTIONS)
    add_resolutions(p, f"WIDTHxHEIGHT list, one dataset each (default {res})", default=DEFAULT_RESOLUTIONS)
    add_images(
        p, f"images per dataset (default {DEFAULT_IMAGES_PER_DATASET})", default=DEFAULT_IMAGES_PER_DATASET
    )
    p.add_argument(
        "--classes",
        type=typed(positive_int, "classes"),
        default=DEFAULT_CLASSES,
        help=f"class folders per dataset (default {DEFAULT_CLASSES})",
    )
    add_seed(p, "seed: the same seed and options give the same bytes (default 0)", default=0)
    p.add_argument(
        "--out", metavar="DIR", required=True, help="folder to write the datasets into (one WxH folder each)"
    )


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    return gen(ns.resolutions, ns.images, ns.out, seed=ns.seed, classes=ns.classes, progress=progress)


def gen(
    resolutions: tuple[tuple[int, int], ...],
    images: int,
    out: str,
    *,
    seed: int,
    classes: int,
    progress: Progress,
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
