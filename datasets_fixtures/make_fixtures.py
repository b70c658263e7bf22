"""Writes the awkward-files fixture: the kinds of file real image datasets contain.

Run once; its output is committed. ``PYTHONPATH=. python datasets_fixtures/make_fixtures.py``
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
OUT = HERE / "awkward"


def photo(w: int = 80, h: int = 60, seed: int = 0) -> Image.Image:
    from ioprof.datasets.synth import synth_image

    return Image.fromarray(synth_image(w, h, np.random.default_rng(seed)))


def jpeg_bytes(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    good, odd = OUT / "good", OUT / "odd"
    good.mkdir(parents=True)
    odd.mkdir()
    for i in range(6):
        (good / f"ok_{i}.JPEG").write_bytes(jpeg_bytes(photo(seed=i)))
    # decodes, in another mode: converted to RGB like torchvision's ImageFolder does
    photo(seed=10).convert("CMYK").save(odd / "cmyk.JPEG", format="JPEG", quality=90)
    photo(seed=11).convert("L").save(odd / "grayscale.JPEG", format="JPEG", quality=90)
    # ImageNet has one: n02105855_2933.JPEG is a PNG
    photo(seed=12).save(odd / "png_named.JPEG", format="PNG")
    # cannot decode
    data = jpeg_bytes(photo(seed=13))
    (odd / "truncated.JPEG").write_bytes(data[: len(data) // 3])
    (odd / "zero_bytes.JPEG").write_bytes(b"")
    (odd / "not_an_image.JPEG").write_text("this is a text file with an image's extension\n")
    # a symlink whose target is gone
    (odd / "broken_link.JPEG").symlink_to("deleted_long_ago.JPEG")
    # 20000 x 20000 pixels in a few kB: PIL refuses it as a decompression bomb
    Image.new("1", (20000, 20000)).save(odd / "bomb.png", format="PNG", optimize=True)


if __name__ == "__main__":
    main()
