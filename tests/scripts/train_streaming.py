"""A training loop over a MosaicML Streaming dataset, as Streaming's CIFAR-10 example
(``examples/cifar10.ipynb``) writes one: a ``StreamingDataset`` subclass that takes ``remote`` and
``local`` and applies torchvision transforms to each sample in ``__getitem__``, a plain
``DataLoader`` over it (here with workers), a torchvision model, SGD. Streaming downloads each
shard of its ``remote`` whole into ``local`` as its workers first need it, and reads its samples
from there. It knows nothing of ioprof: the tests run it unchanged under ``ioprof run``.

    python train_streaming.py REMOTE --local DIR [-a squeezenet1_1] [--crop 32] [-b 8] [-j 2] [--epochs 2]

``REMOTE``: a folder of MDS shards and their ``index.json``, or ``s3://BUCKET/PREFIX`` (the
store's endpoint from ``S3_ENDPOINT_URL``, as Streaming reads it).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch
import torchvision.models as models
from streaming import StreamingDataset
from torch import nn
from torch.utils.data import DataLoader
from torchvision import transforms


class Photos(StreamingDataset):  # type: ignore[misc]
    def __init__(self, remote: str, local: str, shuffle: bool, batch_size: int, transforms: Callable) -> None:  # type: ignore[type-arg]
        super().__init__(local=local, remote=remote, shuffle=shuffle, batch_size=batch_size)
        self.transforms = transforms

    def __getitem__(self, idx: int) -> Any:
        obj = super().__getitem__(idx)
        return self.transforms(obj["x"]), obj["y"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("remote")
    p.add_argument("--local", required=True)
    p.add_argument("-a", "--arch", default="squeezenet1_1")
    p.add_argument("--crop", type=int, default=32)
    p.add_argument("-b", "--batch-size", type=int, default=8)
    p.add_argument("-j", "--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args()
    transformation = transforms.Compose(
        [transforms.RandomResizedCrop(args.crop), transforms.RandomHorizontalFlip(), transforms.ToTensor()]
    )
    train_dataset = Photos(args.remote, args.local, True, args.batch_size, transformation)
    train_dataloader = DataLoader(train_dataset, batch_size=args.batch_size, num_workers=args.workers)
    model: nn.Module = models.__dict__[args.arch](num_classes=10)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=5e-4)
    for epoch in range(args.epochs):
        model.train()
        t0, seen = time.perf_counter(), 0
        for imgs, labels in train_dataloader:
            optimizer.zero_grad()
            loss = criterion(model(imgs), labels % 10)
            loss.backward()
            optimizer.step()
            seen += imgs.shape[0]
        took = time.perf_counter() - t0
        print(f"epoch {epoch}: {seen} images in {took:.1f} s, {seen / took:.1f} img/s", flush=True)


if __name__ == "__main__":
    main()
