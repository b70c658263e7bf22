"""A user's training loop streaming WebDataset tar shards, written as WebDataset's README shows it:
``wds.WebDataset(urls)`` with a shard shuffle, ``.shuffle().decode("pil").to_tuple("jpg", "cls")
.map_tuple(transform, int)``, batched by the DataLoader (or by the pipeline, ``--batched``:
``.batched(n)`` with ``batch_size=None``), a torchvision model, SGD; or (``--pipeline``) composed
stage by stage as ``wds.DataPipeline``, as WebDataset's README also shows it. URLs are local paths,
``http(s)://`` (WebDataset pipes them through curl), ``pipe:`` commands or ``s3://bucket/key``
(read with boto3, registered as WebDataset's handler for the scheme, as a user without the AWS
command line does), in brace notation.
It knows nothing of ioprof: the tests run it unchanged under ``ioprof run``.
"""

from __future__ import annotations

import argparse
import sys
import time
from urllib.parse import urlparse

import torch
import torchvision.models as models
import torchvision.transforms as transforms
import webdataset as wds
from torch import nn
from torch.utils.data import DataLoader
from webdataset.gopen import gopen_schemes


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="WebDataset training")
    p.add_argument("urls", help="shard URLs, brace notation: http://host/train-{000000..000009}.tar")
    p.add_argument("-a", "--arch", default="squeezenet1_1", help="torchvision model name")
    p.add_argument("-j", "--workers", default=2, type=int)
    p.add_argument("-b", "--batch-size", default=16, type=int)
    p.add_argument("--crop", default=64, type=int)
    p.add_argument("--epochs", default=1, type=int)
    p.add_argument("--steps", default=0, type=int, help="stop each epoch after this many steps (0: all)")
    p.add_argument(
        "--blur", default=0, type=int, help="a GaussianBlur of this kernel size (a costly transform)"
    )
    p.add_argument(
        "--batched", action="store_true", help="batch in the pipeline, DataLoader(batch_size=None)"
    )
    p.add_argument("--classes", default=4, type=int)
    p.add_argument("--shuffle", default=64, type=int, help="samples in each worker's shuffle buffer")
    p.add_argument(
        "--cache-dir", default=None, help="download each shard whole into this folder before reading it"
    )
    p.add_argument(
        "--pipeline",
        action="store_true",
        help="compose it as wds.DataPipeline (the shard list split by worker, no check for empty workers)",
    )
    return p.parse_args()


def open_s3(url: str, mode: str = "rb", bufsize: int = 8192) -> object:
    """An object of an S3-API store, its body streamed (the endpoint and credentials from the
    environment, as boto3 takes them)."""
    import boto3

    parsed = urlparse(url)
    return boto3.client("s3").get_object(Bucket=parsed.netloc, Key=parsed.path.lstrip("/"))["Body"]


def main() -> int:
    args = parse()
    if args.urls.startswith("s3://"):
        gopen_schemes["s3"] = open_s3
    blur = [transforms.GaussianBlur(args.blur, sigma=args.blur / 4)] if args.blur else []
    transform = transforms.Compose(
        [
            transforms.RandomResizedCrop(args.crop),
            *blur,
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
        ]
    )
    if args.pipeline:
        dataset = wds.DataPipeline(
            wds.SimpleShardList(args.urls),
            wds.shuffle(100),
            wds.split_by_worker,
            wds.tarfile_to_samples(),
            wds.shuffle(args.shuffle),
            wds.decode("pil"),
            wds.to_tuple("jpg", "cls"),
            wds.map_tuple(transform, int),
        )
    else:
        dataset = (
            wds.WebDataset(
                args.urls, shardshuffle=100, nodesplitter=wds.split_by_node, cache_dir=args.cache_dir
            )
            .shuffle(args.shuffle)
            .decode("pil")
            .to_tuple("jpg", "cls")
            .map_tuple(transform, int)
        )
    if args.batched:
        size = args.batch_size
        dataset = dataset.compose(wds.batched(size)) if args.pipeline else dataset.batched(size)
        loader = DataLoader(dataset, batch_size=None, num_workers=args.workers)
    else:
        loader = DataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers)
    model: nn.Module = models.__dict__[args.arch](num_classes=args.classes)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.01, momentum=0.9)
    for epoch in range(args.epochs):
        t0, seen = time.perf_counter(), 0
        for step, (images, target) in enumerate(loader):
            loss = criterion(model(images), torch.as_tensor(target))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += images.shape[0]
            if args.steps and step + 1 >= args.steps:
                break
        print(f"epoch {epoch}: {seen} images, {seen / (time.perf_counter() - t0):.1f} img/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
