"""This host's own pace, measured before a live test plants a bottleneck.

A live test that plants slow storage under a real training step must leave the storage the
slowest stage by a wide margin on whatever host it lands on: CI hosts train the same model at
speeds up to 2× apart, so a link set in fixed Mbit/s that is 4× slower than the step on one host is
2× slower on the next, and the wait share that carries the verdict drifts towards its threshold.
Here the test first trains the script's model, at its batch and crop, from a local copy of the same
images, through a DataLoader with the script's usual transforms and worker count: the pace that the
compute and the decode together allow on this host when storage costs nothing. The link is then
set to carry a third of the bytes that pace draws (``MARGIN``): storage is the slowest stage by 3×,
whichever of the others comes next.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

MARGIN = 3.0  # the planted stage at least this many times slower than the next one on this host


@dataclass(frozen=True)
class Pace:
    """A training loop's images a second from local data, and what an image weighs on the link."""

    what: str
    img_per_s: float
    bytes_per_image: float

    def link_mbit(self, at_most: float, margin: float = MARGIN) -> float:
        """The link rate (Mbit/s, to 0.1) that carries 1/``margin`` of the bytes this pace draws,
        and no more than ``at_most`` (the rig's own rate: a faster link leaves a short run mostly
        to start-up, which is not what these tests plant)."""
        rate = self.img_per_s * self.bytes_per_image * 8 / 1e6 / margin
        return max(0.1, round(min(at_most, rate), 1))

    def carried(self, rate_mbit: float) -> float:
        """The images a second a link of ``rate_mbit`` carries."""
        return rate_mbit * 1e6 / 8 / self.bytes_per_image

    def demand_between(self, carried_img_per_s: float) -> int:
        """A simulated step's demand (img/s) as many times above what the storage carries as below
        this pace (their geometric mean): the copy that escapes the storage keeps it busy, the
        storage does not, each by the same margin on this host. At least ``MARGIN`` apart."""
        ratio = self.img_per_s / carried_img_per_s
        assert ratio >= MARGIN, f"{self.what}: {self.img_per_s:.0f} img/s is only {ratio:.1f}× the storage's"
        return round(math.sqrt(self.img_per_s * carried_img_per_s))

    def said(self, rate_mbit: float) -> str:
        carried = self.carried(rate_mbit)
        return (
            f"{self.what}: trains at {self.img_per_s:.1f} img/s from local data on this host; the link set "
            f"to {rate_mbit:.1f} Mbit/s carries {carried:.1f} img/s ({self.img_per_s / carried:.1f}× slower)"
        )


def training_pace(
    folder: Path,
    what: str,
    arch: str | None,
    batch: int,
    crop: int,
    *,
    workers: int = 2,
    timm_model: bool = False,
    steps: int = 10,
    bytes_per_image: float | None = None,
) -> Pace:
    """Train ``arch`` (a torchvision model, or timm's with ``timm_model``; with None, only draw the
    batches: the pace the decode alone allows) on the JPEG class folders under ``folder`` for
    ``steps`` steps after two of warm-up: the images a second of the steps' wall time.
    ``bytes_per_image``: what an image weighs on the link, where that is not the mean of the files
    here (tar shards add their headers)."""
    import torch
    import torchvision
    from torchvision import datasets, transforms

    tf = transforms.Compose(
        [
            transforms.RandomResizedCrop(crop),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]
    )
    data = datasets.ImageFolder(str(folder), tf)
    model: torch.nn.Module | None = None
    if arch is not None and timm_model:
        import timm

        model = timm.create_model(arch, num_classes=len(data.classes))
    elif arch is not None:
        model = getattr(torchvision.models, arch)(num_classes=len(data.classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.01) if model is not None else None
    stamps: list[float] = []
    with warnings.catch_warnings():
        # the script's worker count on the cores this test was given (one, under --core-each), as
        # the script itself runs there: torch's advice to use fewer is not the test's to take
        warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
        loader = torch.utils.data.DataLoader(
            data,
            batch_size=batch,
            shuffle=True,
            num_workers=workers,
            persistent_workers=workers > 0,
            drop_last=True,
        )
        while len(stamps) < steps + 3:
            for x, y in loader:
                if model is not None and opt is not None:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                stamps.append(time.perf_counter())
                if len(stamps) >= steps + 3:
                    break
    step_s = statistics.fmean(b - a for a, b in itertools.pairwise(stamps[2:]))
    if bytes_per_image is None:
        sizes = [f.stat().st_size for f in folder.rglob("*.jpg")]
        bytes_per_image = sum(sizes) / len(sizes)
    return Pace(what, batch / step_s, bytes_per_image)
