"""A user's training script whose dataset reads its images as members of one zip archive, as
datasets packed for network storage do: each worker opens the archive once and keeps it open,
and every sample is one member read and decoded. The dataset names no files ioprof knows, so
its verdict must come from what the kernel sees. It knows nothing of ioprof: the tests run it
unchanged under ``ioprof run``.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import zipfile

import torch
import torchvision.models as models
import torchvision.transforms as transforms
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset


class ZipImages(Dataset):
    """Images stored as ``<class>/<name>.jpg`` members of one zip file."""

    def __init__(self, archive: str, transform: transforms.Compose) -> None:
        self.archive = archive
        self.transform = transform
        with zipfile.ZipFile(archive) as z:
            self.members = sorted(n for n in z.namelist() if n.endswith(".jpg"))
        self.classes = sorted({m.split("/")[0] for m in self.members})
        self._zip: zipfile.ZipFile | None = None  # opened in each worker, on first use

    def __len__(self) -> int:
        return len(self.members)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self._zip is None:
            self._zip = zipfile.ZipFile(self.archive)
        name = self.members[index]
        image = Image.open(io.BytesIO(self._zip.read(name))).convert("RGB")
        return self.transform(image), self.classes.index(name.split("/")[0])


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="training from a zip archive")
    p.add_argument("archive", help="a zip of <class>/<name>.jpg members")
    p.add_argument("-a", "--arch", default="squeezenet1_1")
    p.add_argument("-j", "--workers", default=2, type=int)
    p.add_argument("-b", "--batch-size", default=8, type=int)
    p.add_argument("--crop", default=64, type=int)
    p.add_argument("--epochs", default=1, type=int)
    return p.parse_args()


def main() -> int:
    args = parse()
    transform = transforms.Compose(
        [transforms.RandomResizedCrop(args.crop), transforms.RandomHorizontalFlip(), transforms.ToTensor()]
    )
    dataset = ZipImages(args.archive, transform)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    model: nn.Module = models.__dict__[args.arch](num_classes=len(dataset.classes))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.01, momentum=0.9)
    for epoch in range(args.epochs):
        t0, seen = time.perf_counter(), 0
        for images, target in loader:
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += images.shape[0]
        print(f"epoch {epoch}: {seen} images, {seen / (time.perf_counter() - t0):.1f} img/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
