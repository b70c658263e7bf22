"""ioprof's own work at each batch never lets the GIL go: a training process with a busy Python
thread (a metrics or logging thread, a prefetcher of its own) would otherwise take the GIL back
only at that thread's next switch, once for every read ioprof made there."""

from __future__ import annotations

import sys
import time

import pytest
import torch
from busy import busy_thread
from torch.utils.data import DataLoader, Dataset

import ioprof


class _Quick(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 4000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.001)
        return torch.zeros(3, 8, 8), 0


def _own_per_batch(*, busy: bool) -> float:
    """ioprof's own time a batch around ``next()``, its mean over a window of 20 batches, with a
    Python thread that never waits beside the loop or none."""
    loader = DataLoader(_Quick(), batch_size=8, num_workers=2)
    with busy_thread(busy), ioprof.watch(steps=20, seconds=None, probe=False) as w:
        for n, _ in enumerate(loader):
            time.sleep(0.01)  # the step (it lets the GIL go, as a GPU's queue does)
            if n == 40:
                break
    (seen,) = w.result().loaders
    return seen.own_s_per_batch


# a busy thread takes a core: with the machine to itself, what is timed is the GIL, not a
# neighbour's test
@pytest.mark.rig
def test_a_busy_python_thread_does_not_make_each_batch_wait_for_the_gil() -> None:
    """Each time ioprof's code around ``next()`` let the GIL go (``os.pread``, ``open``,
    ``os.listdir`` of /proc: six or more a batch) it would wait a switch interval for the busy
    thread to hand it back (40 ms a batch, broken so). Holding it, ioprof's code only shares the
    GIL as any Python code of the loop does: the busy thread takes every other switch, and a switch
    forced inside that code waits one interval — about its own time over again, so at most three
    times what it costs with no other thread, and less than half a switch beyond."""
    switch = 0.005  # CPython's own default
    before = sys.getswitchinterval()
    sys.setswitchinterval(switch)
    try:
        quiet, busy = _own_per_batch(busy=False), _own_per_batch(busy=True)
    finally:
        sys.setswitchinterval(before)
    assert 0 < busy < 3 * quiet + switch / 2, (busy, quiet)
