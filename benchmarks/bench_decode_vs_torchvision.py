"""ioprof's decode ceiling against a plain torchvision ImageFolder + DataLoader loop, same files.

Not a test: prints the figures and saves them to reports/benchmarks/decode_vs_torchvision.json.
Goal: ratio within 0.95–1.05 at 0, 1 and 2 workers, on generated data and on a folder of real
photographs (benchmarks/photos.py). Both sides use the same transform (RandomResizedCrop(224),
flip, ToTensor, Normalize), batch size and shuffling, with every file in memory (ioprof: its
in-memory sample; torchvision: the page cache, warmed and verified); each is timed over the same
span after its start-up burst, alternating, three times, and the medians are compared.

    pip install -e '.[bench]' && python benchmarks/bench_decode_vs_torchvision.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402
import photos  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, RandomSampler  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402

from ioprof.core.config import LoaderSetting  # noqa: E402
from ioprof.datasets.discover import find_images  # noqa: E402
from ioprof.datasets.synth import DatasetSpec, generate  # noqa: E402
from ioprof.host.pagecache import filesystem_of, prepare  # noqa: E402
from ioprof.measure.decode import probe_decode  # noqa: E402
from ioprof.measure.loader import train_transform  # noqa: E402
from ioprof.measure.sample import load_sample  # noqa: E402

BATCH = 8
CROP = 224
SPAN_S = 6.0  # each side is timed this long after its burst
REPEATS = 5
GOAL = (0.95, 1.05)


def plain_loop_img_per_s(root: Path, workers: int, seed: int) -> float:
    """What a plain torchvision loop gets: ImageFolder, DataLoader, iterate, count images."""
    dataset = ImageFolder(str(root), transform=train_transform(CROP))
    sampler = RandomSampler(dataset, num_samples=10**6, generator=torch.Generator().manual_seed(seed))
    loader = DataLoader(dataset, batch_size=BATCH, sampler=sampler, num_workers=workers, drop_last=True)
    it = iter(loader)
    for _ in range(max(1, workers)):  # the start-up burst, as ioprof discards it
        next(it)
    images, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < SPAN_S:
        images += next(it)[0].shape[0]
    elapsed = time.perf_counter() - t0
    del it
    return images / elapsed


def ioprof_img_per_s(root: Path, workers: int, seed: int) -> float:
    images = find_images(root)
    sample = load_sample(images, filesystem_of(root), seed=seed, max_files=len(images.paths))
    setting = LoaderSetting.multiprocess(workers) if workers else LoaderSetting.serial()
    d = probe_decode(
        sample, setting, crop_px=CROP, batch_size=BATCH, seed=seed, min_seconds=SPAN_S, max_seconds=SPAN_S
    )
    return d.img_per_s


def compare(root: Path, name: str) -> list[dict]:
    cache = prepare([str(p) for p in root.rglob("*.jpg")], "warm", filesystem_of(root))
    assert cache.verified, cache.note
    rows = []
    for workers in (0, 1, 2):
        ours, theirs = [], []
        for r in range(REPEATS):
            ours.append(ioprof_img_per_s(root, workers, seed=r))
            theirs.append(plain_loop_img_per_s(root, workers, seed=r))
        o, t = sorted(ours)[1], sorted(theirs)[1]
        rows.append(
            {
                "data": name,
                "workers": workers,
                "ioprof_img_per_s": round(o, 1),
                "torchvision_img_per_s": round(t, 1),
                "ratio": round(o / t, 3),
                "within_goal": GOAL[0] <= o / t <= GOAL[1],
                "ioprof_runs": [round(x, 1) for x in ours],
                "torchvision_runs": [round(x, 1) for x in theirs],
            }
        )
        print(
            f"{name:24s} workers={workers}: ioprof {o:7.1f} img/s   torchvision {t:7.1f} img/s   ratio {o / t:.3f}"
        )
    return rows


def main() -> int:
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ioprof-decode-") as tmp:
        generated = Path(tmp) / "generated"
        generate(DatasetSpec(500, 375, 240), generated)
        rows += compare(generated, "generated 500x375")
        real = photos.make_photo_folder(Path(tmp) / "photos", files=240)
        rows += compare(real, "real photographs")
    figures.save(
        {
            "benchmark": "ioprof decode ceiling vs a plain torchvision ImageFolder + DataLoader loop, same files, "
            f"batch {BATCH}, crop {CROP}, {SPAN_S:g} s each after the burst, medians of {REPEATS} alternating runs",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "goal": f"ratio within {GOAL[0]}–{GOAL[1]}",
            "rows": rows,
        },
        REPO / "reports" / "benchmarks" / "decode_vs_torchvision.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
