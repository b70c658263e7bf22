"""Generated datasets compress like photographs; a user's dataset is found and described, never
modified."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import paths
import pytest

from ioprof.core.errors import IoprofError
from ioprof.datasets.cache import cached_dataset_root, ensure_datasets
from ioprof.datasets.discover import describe, find_images
from ioprof.datasets.synth import DatasetSpec, encode_jpeg, generate, read_manifest, synth_image

FIXTURES = paths.AWKWARD


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.jpg")):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def test_generation_is_deterministic(tmp_path: Path) -> None:
    spec = DatasetSpec(64, 48, 10, seed=3)
    a = generate(spec, tmp_path / "a", processes=1)
    b = generate(spec, tmp_path / "b", processes=2)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert a["total_bytes"] == b["total_bytes"]
    generate(DatasetSpec(64, 48, 10, seed=4), tmp_path / "c")
    assert _digest(tmp_path / "c") != _digest(tmp_path / "a")


def test_imagenet_like_images_compress_like_photographs() -> None:
    rng = np.random.default_rng(0)
    sizes = [len(encode_jpeg(synth_image(500, 375, rng), 92)) for _ in range(6)]
    bpp = sum(sizes) * 8 / (6 * 500 * 375)
    assert 3.0 <= bpp <= 6.0
    assert 90_000 <= sum(sizes) / 6 <= 140_000  # ImageNet averages about 115 kB
    noise = rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)
    assert len(encode_jpeg(noise, 92)) * 8 / (500 * 375) > 10  # noise would be far larger
    flat = np.full((375, 500, 3), 128, dtype=np.uint8)
    assert len(encode_jpeg(flat, 92)) * 8 / (500 * 375) < 0.5  # flat colour far smaller


def test_manifest_and_layout(tmp_path: Path) -> None:
    m = generate(DatasetSpec(64, 48, 12, classes=3), tmp_path / "set")
    assert m["files"] == 12 and len(m["files_list"]) == 12
    assert sorted(p.name for p in (tmp_path / "set").iterdir()) == [
        *"class_000 class_001 class_002 manifest.json".split(),
    ]
    images = find_images(tmp_path / "set")
    assert images.layout == "imagefolder" and len(images.paths) == 12 and len(images.classes) == 3


def test_generate_refuses_to_overwrite_something_else(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    with pytest.raises(IoprofError, match="already exists"):
        generate(DatasetSpec(64, 48, 4), tmp_path / "busy")


def test_cache_reuses_and_regenerates_on_spec_change(tmp_path: Path) -> None:
    spec = DatasetSpec(64, 48, 6)
    messages: list[str] = []
    (root,) = ensure_datasets([spec], tmp_path, messages.append)
    assert "generated" in messages[-1]
    (again,) = ensure_datasets([spec], tmp_path, messages.append)
    assert again == root and "generated earlier" in messages[-1]
    (other,) = ensure_datasets([DatasetSpec(64, 48, 7)], tmp_path, messages.append)
    assert other != root and "generated 7 images" in messages[-1]
    assert cached_dataset_root(spec, tmp_path) == root
    assert read_manifest(root) is not None


def test_flat_folder_and_describe(tmp_path: Path) -> None:
    for p in (FIXTURES / "good").iterdir():
        shutil.copy(p, tmp_path / p.name)
    images = find_images(tmp_path)
    assert images.layout == "flat" and len(images.paths) == 6  # .JPEG counts, case-insensitive
    info = describe(images, "mine", generated=False)
    assert (info.mean_width_px, info.mean_height_px) == (80.0, 60.0)
    assert info.files == 6 and info.total_bytes == sum(Path(p).stat().st_size for p in images.paths)
    assert info.fs_type


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda p: p / "missing", "no such directory"),
        (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "is a file"),
        (lambda p: p, "holds no images"),
        (lambda p: ((p / "cls").mkdir(), (p / "cls" / "notes.txt").write_text("x"), p)[2], "holds no images"),
    ],
)
def test_bad_locations_name_the_path(tmp_path: Path, make, needle: str) -> None:  # type: ignore[no-untyped-def]
    target = make(tmp_path)
    with pytest.raises(IoprofError, match=needle) as e:
        find_images(target)
    assert str(target) in str(e.value)


def test_a_header_is_read_from_the_first_page_or_from_the_whole_file_behind_a_long_block(
    tmp_path: Path,
) -> None:
    """Image sizes come from each file's first page (readahead off: on a slow mount, a quarter of
    the bytes); a header behind a 20 kB block (an EXIF thumbnail, a comment) is read from the file."""
    import io
    import os

    from PIL import Image

    from ioprof.datasets.discover import HEADER_BYTES, file_header, mean_resolution

    plain, long = tmp_path / "plain.jpg", tmp_path / "long.jpg"
    Image.new("RGB", (640, 480), (90, 120, 30)).save(plain, quality=90)
    Image.new("RGB", (320, 200), (90, 120, 30)).save(long, quality=90, comment=os.urandom(20_000))
    assert isinstance(file_header(str(plain)), io.BytesIO)
    assert len(file_header(str(plain)).getvalue()) == HEADER_BYTES  # type: ignore[union-attr]
    assert file_header(str(long)) == str(long)  # its header does not lie in the first page
    assert mean_resolution([lambda: file_header(str(long))]) == (320.0, 200.0)
    assert mean_resolution([lambda: file_header(str(plain)), lambda: file_header(str(long))]) == (
        480.0,
        340.0,
    )
