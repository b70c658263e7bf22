"""The time before the window: a loader whose first batches wait for a download (a streaming
dataset fetching its shards before it yields) is judged over its whole first pass, its window's
steady state beside it; a loader that starts at once is judged by its window alone."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import ioprof
from ioprof.render import words

# two workers, on a core of their own or on a machine of one core, where torch warns of them
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

STEP_S = 0.05  # the training step's own time: the steady state is compute-bound
BATCHES = 100  # a pass: at STEP_S, 5 s of steps


class DownloadsFirst(Dataset):  # type: ignore[type-arg]
    """Each worker waits ``download_s`` before its first sample (its shard arriving, off the CPU),
    then hands out samples at once."""

    def __init__(self, download_s: float) -> None:
        self.download_s = download_s
        self.have = False

    def __len__(self) -> int:
        return BATCHES * 4

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if not self.have:
            time.sleep(self.download_s)
            self.have = True
        return torch.zeros(3, 8, 8), i % 2


def _watched(download_s: float, whole_pass: bool = False):  # type: ignore[no-untyped-def]
    """The loop watched; with ``whole_pass``, it runs the whole pass and says, beside ioprof's
    result, what the pass took and how long it waited for its batches, timed around each one."""
    loader = DataLoader(DownloadsFirst(download_s), batch_size=4, num_workers=2)
    model = torch.nn.Linear(3 * 8 * 8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    waited = 0.0
    with ioprof.watch(steps=20, seconds=None, probe=False) as w:
        start = asked = time.perf_counter()
        for n, (x, y) in enumerate(loader):
            waited += time.perf_counter() - asked
            loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(STEP_S)
            if n == 30 and not whole_pass:  # the window (20 steps after 7 of warm-up) is over
                break
            asked = time.perf_counter()
        took = time.perf_counter() - start
    return w.result(), waited, took


# ioprof reckons the pass after its window at the window's pace, the test times the whole pass:
# beside another test on its cores the two stretches run at different paces, so it runs on a core of
# its own (in CI, beside a link rig on the other)
@pytest.mark.rig
@pytest.mark.link
def test_a_first_pass_that_waits_for_its_download_is_judged_whole() -> None:
    r, waited, took = _watched(download_s=4.0, whole_pass=True)
    (lo,) = r.loaders
    b = lo.before
    assert b is not None and b.batches == 7 and b.first_batch_s is not None
    assert 4.0 <= b.wait_s <= b.seconds and b.first_batch_s >= 4.0  # the download, waited for
    assert b.busy_share is not None and b.busy_share < 0.5, b  # its processes slept through it
    fp = r.analysis.first_pass
    assert fp is not None and fp.by == "storage" and fp.pass_batches == BATCHES
    # the pass: the download, then 93 batches at the window's pace — ioprof's pass, from its first
    # batches and its window, against the whole pass timed around each batch (on a loaded machine
    # the window's own hand-overs are a tenth of the pass's waits)
    assert fp.pass_class == "highly" and fp.pass_share == pytest.approx(waited / took, rel=0.2), (
        waited,
        took,
    )
    assert fp.pass_s == pytest.approx(took, rel=0.2)
    assert fp.window_class != "highly" and fp.window_share < 0.2  # a batch's hand-over, a few ms
    line = words.verdict_line(r.analysis)
    assert line.startswith("**Verdict: highly input-bound over its first pass — the bottleneck is storage**")
    assert "In its window after them, the steady state: " in line


def test_a_loader_that_starts_at_once_is_judged_by_its_window() -> None:
    r, _, _ = _watched(download_s=0.0)
    (lo,) = r.loaders
    assert lo.before is not None and lo.before.batches == 7
    assert r.analysis.first_pass is None
    assert "first pass" not in words.verdict_line(r.analysis)
