"""The default datasets, generated once into the user's cache and reused."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from ioprof.datasets.synth import DatasetSpec, generate


def default_cache_dir() -> Path:
    """``$IOPROF_CACHE_DIR``, else ``$XDG_CACHE_HOME/ioprof``, else ``~/.cache/ioprof``."""
    env = os.environ.get("IOPROF_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ioprof"


def cached_dataset_root(spec: DatasetSpec, cache_dir: Path) -> Path:
    """Folder of the set for ``spec``: named by the spec's hash, so a changed spec gets a new set."""
    digest = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir / "datasets" / f"{spec.label}-{spec.images}img-{digest}"


def ensure_datasets(
    specs: Sequence[DatasetSpec],
    cache_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Roots of the generated sets for ``specs``, generating those not cached yet."""
    base = cache_dir or default_cache_dir()
    roots = []
    for spec in specs:
        root = cached_dataset_root(spec, base)
        generate(spec, root, progress=progress)
        roots.append(root)
    return roots
