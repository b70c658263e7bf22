"""A training loop whose dataset has a slow path of its own: one sample in ``--every`` takes
``--slow`` times the others (a huge image, a retry, a sample on a slow shard), each waiting
in ``time.sleep`` so that the host's pace does not move it. It knows nothing of ioprof: the
tests run it unchanged under ``ioprof run``. It times its own loop — each ``next()`` and each
sample's ``__getitem__`` — and writes them to ``--record``: the truth ioprof's figures are held to.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

SAMPLE_S = 0.01  # a usual sample's time


class SlowPath(Dataset):
    """Samples of ``SAMPLE_S``, one in ``every`` of them ``slow`` times that."""

    def __init__(self, n: int, every: int, slow: float, times: str) -> None:
        self.n, self.every, self.slow, self.times = n, every, slow, times

    def __len__(self) -> int:
        return self.n

    def is_slow(self, index: int) -> bool:
        return index % self.every == self.every // 2

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        t0 = time.perf_counter()
        time.sleep(SAMPLE_S * (self.slow if self.is_slow(index) else 1.0))
        with open(f"{self.times}.{os.getpid()}", "a", encoding="utf-8") as f:
            f.write(f"{index} {time.perf_counter() - t0:.6f}\n")
        return torch.zeros(3, 8, 8), index % 10


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--every", type=int, default=50)
    p.add_argument("--slow", type=float, default=20.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--step", type=float, default=0.015, help="seconds of the training step")
    p.add_argument("--in-order", type=int, default=1, help="DataLoader's in_order (0: as they are made)")
    p.add_argument("--record", required=True, help="where the loop's own waits go (JSON)")
    a = p.parse_args()
    data = SlowPath(a.samples, a.every, a.slow, a.record + ".samples")
    loader = DataLoader(data, batch_size=a.batch_size, num_workers=a.workers, in_order=bool(a.in_order))
    waits = []
    it = iter(loader)
    while True:
        t0 = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        waits.append(time.perf_counter() - t0)
        time.sleep(a.step)
    with open(a.record, "w", encoding="utf-8") as f:
        json.dump({"waits": waits, "slow": [i for i in range(a.samples) if data.is_slow(i)]}, f)
    print(f"{len(waits)} batches, {sum(waits):.2f} s waiting")


if __name__ == "__main__":
    main()
