"""A folder of real photographs for benchmarks: crops of the sample photos packages ship.

scikit-image ships a handful of real photographs (an astronaut, coffee, a cat, a rocket, a retina,
the Hubble deep field, a microscopy slide) and matplotlib one (Grace Hopper). Random crops of
them, resized to ImageNet-like sizes and re-encoded as JPEG at quality 90, give an ImageFolder
of real image content — the statistics synthetic images only imitate. Deterministic (seeded).
Needs scikit-image (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
from PIL import Image

SKIMAGE_PHOTOS = (
    "astronaut",
    "coffee",
    "chelsea",
    "rocket",
    "hubble_deep_field",
    "retina",
    "immunohistochemistry",
)
JPEG_QUALITY = 90


def sources() -> list[Image.Image]:
    import matplotlib
    import skimage.data

    photos = [Image.fromarray(np.asarray(getattr(skimage.data, n)())).convert("RGB") for n in SKIMAGE_PHOTOS]
    hopper = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    if hopper.exists():
        photos.append(Image.open(hopper).convert("RGB"))
    return photos


def make_photo_folder(out: Path, files: int = 240, classes: int = 4, seed: int = 0) -> Path:
    """``files`` JPEGs cropped from real photographs into ``out/class_NNN/``; returns ``out``."""
    if out.exists() and len(list(out.rglob("*.jpg"))) == files:
        return out
    rng = random.Random(seed)
    photos = sources()
    for c in range(classes):
        (out / f"class_{c:03d}").mkdir(parents=True, exist_ok=True)
    for i in range(files):
        src = photos[i % len(photos)]
        side = min(src.size)
        crop = rng.randint(int(0.6 * side), side)
        x, y = rng.randint(0, src.width - crop), rng.randint(0, src.height - crop)
        w = int(crop * rng.uniform(1.0, 1.33))
        box = (x, y, min(src.width, x + w), y + crop)
        target_short = rng.randint(300, 400)  # ImageNet's training images: about 400 × 350 on average
        img = src.crop(box)
        scale = target_short / min(img.size)
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.BICUBIC)
        img.save(out / f"class_{i % classes:03d}" / f"photo_{i:05d}.jpg", quality=JPEG_QUALITY)
    os.sync()
    return out
