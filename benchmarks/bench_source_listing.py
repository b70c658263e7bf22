"""What finding a dataset's files and copying a sample of them into memory costs `run` on a dataset
the size of ImageNet's training set (1.28 M samples), against one walk of its list.

Not a test: it prints and saves its figures (reports/benchmarks/source_listing.json). Two datasets
of 1,281,167 samples name 50 real files in a temporary folder: one keeps a list of (path, label)
tuples as torchvision's ImageFolder does, the other a pandas DataFrame of file names joined to its
``img_dir`` (PyTorch's "Datasets & DataLoaders" tutorial). For each, three rounds of:
``sources.find`` (the files listed, spread over the dataset), ``sources.in_memory`` (a sample of
its files copied into memory, the decode ceiling's input) and, as the yardstick measured beside
them, one walk of its list (``list(samples)``, or the column's ``tolist()``). The figure is each
one's median seconds, and find and copy each as a number of list walks.

    python benchmarks/bench_source_listing.py
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402

SAMPLES = 1_281_167  # ImageNet-1k's training set
FILES = 50
ROUNDS = 3


class _Listed:
    """A dataset that lists its files as ImageFolder does (``samples``: (path, label) tuples)."""

    def __init__(self, folder: str) -> None:
        self.root = folder
        self.samples = [(os.path.join(folder, f"{i % FILES}.jpg"), i % 1000) for i in range(SAMPLES)]

    def __len__(self) -> int:
        return SAMPLES


class _Table:
    """A dataset that keeps its file names in a DataFrame, each joined to ``img_dir``."""

    def __init__(self, folder: str) -> None:
        import pandas as pd

        self.img_dir = folder
        self.img_labels = pd.DataFrame(
            {
                "file": [f"{i % FILES}.jpg" for i in range(SAMPLES)],
                "label": [i % 1000 for i in range(SAMPLES)],
            }
        )

    def __len__(self) -> int:
        return SAMPLES


def _timed(run: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = run()
    return time.perf_counter() - t0, out


def _measure(ds: Any, walk: Callable[[], Any]) -> dict[str, Any]:
    from ioprof import sources

    times: dict[str, list[float]] = {"walk": [], "find": [], "copy": []}
    for _ in range(ROUNDS):
        times["walk"].append(_timed(walk)[0])
        took, source = _timed(lambda: sources.find(ds))
        times["find"].append(took)
        assert source is not None and source.count == SAMPLES, source
        took, view = _timed(lambda: sources.in_memory(source, ds, workers=2))  # noqa: B023 (called here)
        times["copy"].append(took)
        assert not isinstance(view, str), view
        view.close()
    median = {k: statistics.median(v) for k, v in times.items()}
    return {
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "median_s": {k: round(m, 3) for k, m in median.items()},
        "find_in_list_walks": round(median["find"] / median["walk"], 1),
        "copy_in_list_walks": round(median["copy"] / median["walk"], 1),
    }


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ioprof-bench-") as folder:
        for i in range(FILES):
            Path(folder, f"{i}.jpg").write_bytes(os.urandom(2000))
        listed, table = _Listed(folder), _Table(folder)
        out = {
            "list": _measure(listed, lambda: list(listed.samples)),
            "dataframe": _measure(table, lambda: table.img_labels["file"].tolist()),
        }
    figures.save(
        {
            "benchmark": "run's source of a dataset of 1.28 M listed files: find and copy, against one walk of its list",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
            "samples": SAMPLES,
            **out,
        },
        REPO / "reports" / "benchmarks" / "source_listing.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
