"""A training loop whose first step is a set-up (``--first`` seconds, as cuDNN's autotuning or a
compile takes on an accelerator) while its loader's workers read ahead, then steps of ``--step``
seconds against workers that make batches a little more slowly than the loop takes them: their
queue, full after the first step, drains over the steps that follow. Each sample and step waits
in ``time.sleep`` so that the host's pace does not move them. It knows nothing of ioprof: the
tests run it unchanged under ``ioprof run``. It times its own ``next()`` calls and steps and
writes them to ``--record``: the truth ioprof's figures are held to.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Sleeping(Dataset):
    def __init__(self, n: int, sample_s: float) -> None:
        self.n, self.sample_s = n, sample_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.sample_s)
        return torch.zeros(3, 8, 8), index % 10


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=260)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--sample", type=float, default=0.0225, help="seconds a sample takes its worker")
    p.add_argument("--step", type=float, default=0.04, help="seconds of a training step")
    p.add_argument("--first", type=float, default=3.0, help="seconds of the first step")
    p.add_argument("--record", required=True, help="where the loop's own waits and steps go (JSON)")
    a = p.parse_args()
    data = Sleeping(a.steps * a.batch_size * 2, a.sample)
    loader = DataLoader(data, batch_size=a.batch_size, num_workers=a.workers)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    waits: list[float] = []
    steps: list[float] = []
    it = iter(loader)
    for i in range(a.steps):
        t0 = time.perf_counter()
        next(it)
        t1 = time.perf_counter()
        opt.zero_grad()
        model(torch.zeros(1, 1)).sum().backward()
        opt.step()
        time.sleep(a.first if i == 0 else a.step)
        waits.append(t1 - t0)
        steps.append(time.perf_counter() - t1)
    with open(a.record, "w", encoding="utf-8") as f:
        json.dump({"waits": waits, "steps": steps}, f)
    print(f"{len(waits)} steps, {sum(waits):.2f} s waiting")


if __name__ == "__main__":
    main()
