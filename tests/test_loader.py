from __future__ import annotations

from pathlib import Path

import torch

from ioprof.datasets.discover import find_images
from ioprof.loader import ImageFiles, collate, make_loader, probe_decode, train_transform
from ioprof.pagecache import filesystem_of

FIXTURES = Path(__file__).resolve().parent.parent / "datasets_fixtures" / "awkward"


def test_awkward_files_are_skipped_or_converted_never_fatal() -> None:
    images = find_images(FIXTURES)
    by_name = {Path(p).name: i for i, p in enumerate(images.paths)}
    ds = ImageFiles(images.paths, images.labels, train_transform(32))
    outcome = {}
    for name, i in by_name.items():
        img, _label, path, err, converted = ds[i]
        assert path == images.paths[i]
        outcome[name] = "failed" if err else ("converted" if converted else "ok")
        if not err:
            assert img.shape == (3, 32, 32)
    assert outcome == {
        **{f"ok_{i}.JPEG": "ok" for i in range(6)},
        "cmyk.JPEG": "converted",
        "grayscale.JPEG": "converted",
        "png_named.JPEG": "ok",  # PIL reads the content, not the name
        "truncated.JPEG": "failed",
        "zero_bytes.JPEG": "failed",
        "not_an_image.JPEG": "failed",
        "bomb.png": "failed",
        "broken_link.JPEG": "failed",
    }
    _, _, _, err, _ = ds[by_name["bomb.png"]]
    assert "DecompressionBomb" in err
    _, _, _, err, _ = ds[by_name["broken_link.JPEG"]]
    assert "FileNotFoundError" in err


def test_collate_carries_failures_back_with_their_paths() -> None:
    ok = (torch.zeros(3, 4, 4), 1, "/a.jpg", "", True)
    bad = (None, 2, "/b.jpg", "OSError: truncated", False)
    batch = collate([ok, bad, ok])
    assert batch.images is not None and batch.images.shape == (2, 3, 4, 4)
    assert batch.failures == [("/b.jpg", "OSError: truncated")]
    assert batch.converted == 2
    assert collate([bad]).images is None


def test_multiprocess_loader_survives_bad_files() -> None:
    images = find_images(FIXTURES)
    dl = make_loader(images.paths, images.labels, 32, "multiprocess", 2, 5, 30, seed=0)
    n_ok = n_bad = 0
    for batch in dl:
        n_ok += 0 if batch.images is None else batch.images.shape[0]
        n_bad += len(batch.failures)
    assert n_ok + n_bad == 30 and n_bad > 0


def test_decode_probe_runs_from_ram(small_set: Path) -> None:
    images = find_images(small_set)
    d = probe_decode(
        images.paths,
        images.labels,
        32,
        "multiprocess",
        2,
        8,
        filesystem_of(small_set),
        measured_batches=4,
        min_seconds=0.2,
        max_seconds=5.0,
    )
    assert d.cache.regime == "warm" and d.cache.verified
    assert d.images >= 32 and d.img_per_s > 0 and d.workers == 2
