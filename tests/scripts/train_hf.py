"""A user's training loop on a Hugging Face ``datasets`` dataset, written as the datasets
documentation shows it ("Use with PyTorch", "Process → Transform"): ``load_from_disk`` of a saved
dataset (or ``load_dataset("imagefolder", data_dir=…)`` of a folder of images), torchvision
transforms applied on the fly with ``set_transform``, a ``DataLoader`` over the dataset itself, a
torchvision model, SGD. Its rows are read from Arrow files the dataset memory-maps. With
``--streaming``, as the documentation's "Stream" page shows it: ``load_dataset(…, streaming=True)``
of a folder or of Parquet files (``data_files``), a buffered ``shuffle``, the transform by ``map``,
``with_format("torch")``; the ``IterableDataset`` deals its shards (``num_shards``) out among the
loader's workers.
It knows nothing of ioprof: the tests run it unchanged under ``ioprof run``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torchvision.models as models
import torchvision.transforms as transforms
from datasets import load_dataset, load_from_disk
from torch import nn
from torch.utils.data import DataLoader


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Hugging Face datasets training")
    p.add_argument("data", help="a dataset saved with save_to_disk, or a folder of class folders of images")
    p.add_argument("-a", "--arch", default="squeezenet1_1", help="torchvision model name")
    p.add_argument("-j", "--workers", default=2, type=int)
    p.add_argument("-b", "--batch-size", default=16, type=int)
    p.add_argument("--crop", default=64, type=int)
    p.add_argument("--epochs", default=1, type=int)
    p.add_argument(
        "--blur", default=0, type=int, help="a GaussianBlur of this kernel size (a costly transform)"
    )
    p.add_argument("--streaming", action="store_true", help="stream it: an IterableDataset of its shards")
    return p.parse_args()


def main() -> int:
    args = parse()
    if args.streaming:
        return streamed(args)
    if os.path.exists(os.path.join(args.data, "dataset_info.json")):
        ds = load_from_disk(args.data)
    else:
        ds = load_dataset("imagefolder", data_dir=args.data, split="train")
    blur = [transforms.GaussianBlur(args.blur, sigma=args.blur / 4)] if args.blur else []
    train_tf = transforms.Compose(
        [
            transforms.RandomResizedCrop(args.crop),
            *blur,
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
        ]
    )

    def transform(batch: dict) -> dict:  # type: ignore[type-arg]
        batch["pixel_values"] = [train_tf(image.convert("RGB")) for image in batch["image"]]
        return batch

    ds.set_transform(transform)

    def collate(rows: list) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[type-arg]
        return torch.stack([r["pixel_values"] for r in rows]), torch.tensor([r["label"] for r in rows])

    loader = DataLoader(
        ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers, collate_fn=collate
    )
    classes = ds.features["label"].num_classes if hasattr(ds.features["label"], "num_classes") else 10
    model: nn.Module = models.__dict__[args.arch](num_classes=classes)
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


def streamed(args: argparse.Namespace) -> int:
    if args.data.endswith(".parquet") or os.path.isfile(args.data):
        ds = load_dataset("parquet", data_files=args.data, split="train", streaming=True)
    else:
        ds = load_dataset("imagefolder", data_dir=args.data, split="train", streaming=True)
    train_tf = transforms.Compose(
        [transforms.RandomResizedCrop(args.crop), transforms.RandomHorizontalFlip(), transforms.ToTensor()]
    )
    ds = ds.shuffle(seed=42, buffer_size=64)
    ds = ds.map(lambda row: {"pixel_values": train_tf(row["image"].convert("RGB")), "label": row["label"]})
    ds = ds.remove_columns("image").with_format("torch")
    loader = DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers)
    model: nn.Module = models.__dict__[args.arch](num_classes=10)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.01, momentum=0.9)
    for epoch in range(args.epochs):
        ds.set_epoch(epoch)
        t0, seen = time.perf_counter(), 0
        for batch in loader:
            loss = criterion(model(batch["pixel_values"]), batch["label"] % 10)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += batch["pixel_values"].shape[0]
        print(f"epoch {epoch}: {seen} images, {seen / (time.perf_counter() - t0):.1f} img/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
