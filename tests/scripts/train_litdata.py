"""A training loop over a LitData ``StreamingDataset`` (optimized chunks in an S3-API store), as
LitData's README writes one: a ``StreamingDataset`` subclass that decodes and transforms in
``__getitem__``, its ``StreamingDataLoader``, a torchvision model. LitData downloads each chunk
into its local cache before it yields that chunk's samples: a first epoch waits for its chunks,
later ones read the cache.

    python train_litdata.py s3://BUCKET/PREFIX --cache DIR [-a squeezenet1_1] [--crop 32] [-b 8] [-j 2] [--epochs 2]

The store's endpoint and credentials come from the environment (``AWS_ENDPOINT_URL`` …), as
boto3 reads them.
"""

from __future__ import annotations

import argparse
import time

import litdata as ld
import torch
import torchvision
from torchvision.transforms import v2


class Photos(ld.StreamingDataset):
    def __init__(self, *args, augment=None, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.augment = augment  # not ``transform``: StreamingDataset applies that to the whole sample

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        sample = super().__getitem__(index)
        return self.augment(sample["image"]), sample["label"]  # LitData decodes its JPEGs to tensors


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("input_dir")
    p.add_argument("--cache", required=True)
    p.add_argument("-a", "--arch", default="squeezenet1_1")
    p.add_argument("--crop", type=int, default=32)
    p.add_argument("-b", "--batch-size", type=int, default=8)
    p.add_argument("-j", "--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args()
    tf = v2.Compose(
        [
            v2.RandomResizedCrop(args.crop, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
        ]
    )
    dataset = Photos(args.input_dir, cache_dir=args.cache, shuffle=True, augment=tf)
    loader = ld.StreamingDataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers)
    model = torchvision.models.get_model(args.arch, num_classes=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        t0, n = time.perf_counter(), 0
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            n += 1
        print(f"epoch {epoch}: {n} steps in {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
