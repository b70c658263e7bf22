"""``run_scale``'s own duties around the ranks it starts, with the ranks' launch stood in for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from groundtruth import resident_pages

from ioprof.core.config import ScaleConfig, run_length_for
from ioprof.datasets.dataset import load_datasets
from ioprof.datasets.synth import DatasetSpec, generate
from ioprof.measure.session import open_session
from ioprof.runners.scale import run_scale
from ioprof.runners.torchrun import Launched


class Quiet:
    def __call__(self, text: str) -> None:
        return None

    def measured(self, result: object, *, dataset: str = "", position: str = "", took_s: float = 0.0) -> None:
        return None


def test_what_the_ranks_evicted_of_your_cached_files_is_read_back_after_them(tmp_path: Path) -> None:
    """The ranks evict the dataset in their own processes, where ioprof keeps no record: the
    runner records what the page cache holds of the files before the first count starts, and reads
    it back after the last, as ``fincore`` counts the pages (outside ioprof)."""
    data = tmp_path / "data"
    generate(DatasetSpec(128, 96, 40, seed=1), data)
    files = sorted(str(f) for f in data.rglob("*.jpg"))
    (dataset,) = load_datasets(str(data), (), 0, seed=0, cache_dir=None, progress=Quiet())
    if dataset.fs.ram_backed:
        pytest.skip(f"the test folder is on {dataset.fs.fs_type}: nothing can be evicted there")
    for f in files:
        Path(f).read_bytes()
    before = resident_pages(files)
    evicted: list[int] = []

    def start(n: int, cfg: dict[str, object], name: str) -> Launched:
        # a rank evicts the files in its own process, as ``ioprof.runners.rank`` does
        code = "import sys; from ioprof.host.pagecache import evict; evict(sys.argv[1:])"
        subprocess.run([sys.executable, "-c", code, *files], check=True)
        evicted.append(sum(resident_pages(files).values()))
        return Launched(False, "rank 0: stood in for", [], 0.1, None)

    config = ScaleConfig(data_path=str(data), ranks=(1, 2), cache=("cold",), steps=5, crop_px=64)
    run = run_length_for("cpu", config.compute, batch_size=4, steps=5)
    session = open_session("scale", torch.device("cpu"), "test", run, None)
    result = run_scale(config, session, dataset, tmp_path / "o", Quiet(), backend="gloo", gpus=0, start=start)
    assert evicted == [0, 0]  # each count's ranks found the files evicted
    back = result.run.read_back
    assert back is not None and back.files == sum(p > 0 for p in before.values()) and back.left_bytes == 0, (
        back
    )
    assert resident_pages(files) == before
