"""A user's training script, written as PyTorch's ImageNet example is (examples/imagenet/main.py):
argparse, ImageFolder over DIR/train and DIR/val, DataLoader(num_workers, pin_memory=True), a
torchvision model, SGD, a train and a validate loop per epoch. It knows nothing of ioprof: the
tests run it unchanged under ``ioprof run``. Under torchrun it trains with DDP over gloo.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torchvision.datasets as datasets
import torchvision.models as models
import torchvision.transforms as transforms
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


class ListKeepingFolder(datasets.ImageFolder):
    """An ImageFolder that also keeps a large Python list and reads a slice of it per sample, as
    datasets that hold their annotations in Python objects do: in a forked worker each read
    touches reference counts, so the pages are copied (copy-on-read, pytorch/pytorch#13246)."""

    def keep(self, n: int) -> None:
        self.kept = [{"id": i, "label": str(i)} for i in range(n)]

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        span = max(1, len(self.kept) // len(self))
        start = index * span
        sum(len(d) for d in self.kept[start : start + span])
        return super().__getitem__(index)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="PyTorch ImageNet Training")
    p.add_argument("data", metavar="DIR", help="path to dataset (with train/ and val/)")
    p.add_argument("-a", "--arch", default="mobilenet_v3_small", help="torchvision model name")
    p.add_argument("-j", "--workers", default=2, type=int, help="data loading workers")
    p.add_argument("--epochs", default=1, type=int)
    p.add_argument("-b", "--batch-size", default=8, type=int)
    p.add_argument("--lr", default=0.05, type=float)
    p.add_argument("--crop", default=224, type=int, help="training crop size")
    p.add_argument("--fail-at", default=0, type=int, help="raise after this many training steps")
    p.add_argument(
        "--blur", default=0, type=int, help="a GaussianBlur of this kernel size in the training transform"
    )
    p.add_argument("--prefetch-factor", default=None, type=int)
    p.add_argument("--persistent", action="store_true", help="persistent_workers=True")
    p.add_argument(
        "--worker-threads",
        default=0,
        type=int,
        help="each worker raises torch's threads to this (worker_init_fn), for transforms that use torch ops",
    )
    p.add_argument(
        "--keep-list",
        default=0,
        type=int,
        help="the dataset keeps a Python list this long, touched per sample",
    )
    return p.parse_args()


def train(
    loader: DataLoader,
    model: nn.Module,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
    args: argparse.Namespace,
    done: list[int],
) -> float:
    """One epoch; returns the training rate in img/s after the first 5 steps (the script's own figure)."""
    model.train()
    images_seen, t5 = 0, 0.0
    for step, (images, target) in enumerate(loader):
        if step == 5:
            t5, images_seen = time.perf_counter(), 0
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        done[0] += 1
        images_seen += images.shape[0]
        if args.fail_at and done[0] >= args.fail_at:
            raise RuntimeError(f"planted failure after {done[0]} steps")
    return images_seen / (time.perf_counter() - t5) if t5 else 0.0


def validate(loader: DataLoader, model: nn.Module) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, target in loader:
            correct += (model(images).argmax(1) == target).sum().item()
            total += target.numel()
    return correct / max(1, total)


class WorkerThreads:
    """A worker_init_fn that raises torch's intra-op threads in each worker (torch sets 1)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def __call__(self, worker_id: int) -> None:
        torch.set_num_threads(self.threads)


def main() -> int:
    args = parse()
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    blur = [transforms.GaussianBlur(args.blur, sigma=args.blur / 4)] if args.blur else []
    folder = ListKeepingFolder if args.keep_list else datasets.ImageFolder
    train_dataset = folder(
        os.path.join(args.data, "train"),
        transforms.Compose(
            [
                transforms.RandomResizedCrop(args.crop),
                *blur,
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                normalize,
            ]
        ),
    )
    if args.keep_list:
        train_dataset.keep(args.keep_list)
    val_dataset = datasets.ImageFolder(
        os.path.join(args.data, "val"),
        transforms.Compose(
            [
                transforms.Resize(args.crop * 256 // 224),
                transforms.CenterCrop(args.crop),
                transforms.ToTensor(),
                normalize,
            ]
        ),
    )
    sampler = DistributedSampler(train_dataset) if distributed else None
    train_loader = DataLoader(
        train_dataset,
        batch_size=args.batch_size,
        shuffle=sampler is None,
        num_workers=args.workers,
        pin_memory=True,
        sampler=sampler,
        prefetch_factor=args.prefetch_factor if args.workers else None,
        persistent_workers=args.persistent and args.workers > 0,
        worker_init_fn=WorkerThreads(args.worker_threads) if args.worker_threads else None,
    )
    val_loader = DataLoader(
        val_dataset, batch_size=args.batch_size, shuffle=False, num_workers=args.workers, pin_memory=True
    )
    model: nn.Module = models.__dict__[args.arch](num_classes=len(train_dataset.classes))
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    done = [0]
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        t0 = time.perf_counter()
        rate = train(train_loader, model, criterion, optimizer, args, done)
        acc = validate(val_loader, model)
        print(
            f"epoch {epoch}: {done[0]} steps, train {rate:.1f} img/s, val acc {acc:.3f}, "
            f"{time.perf_counter() - t0:.1f} s",
            flush=True,
        )
    if distributed:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
