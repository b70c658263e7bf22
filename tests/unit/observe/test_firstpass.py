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


class SlowToStart(Dataset):  # type: ignore[type-arg]
    """Each worker waits ``download_s`` before its first sample (its shard arriving, off the CPU),
    then hands out samples at once; with ``computes``, it spends those seconds on a CPU instead
    (an index built, a cache computed: its own CPU time, a wait for a core not counted)."""

    def __init__(self, download_s: float, computes: bool = False) -> None:
        self.download_s = download_s
        self.computes = computes
        self.have = False

    def __len__(self) -> int:
        return BATCHES * 4

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if not self.have:
            if self.computes:
                end = time.thread_time() + self.download_s
                while time.thread_time() < end:
                    pass
            else:
                time.sleep(self.download_s)
            self.have = True
        return torch.zeros(3, 8, 8), i % 2


def _watched(  # type: ignore[no-untyped-def]
    download_s: float, whole_pass: bool = False, dataset: Dataset | None = None, workers: int = 2
):
    """The loop watched; with ``whole_pass``, it runs the whole pass and says, beside ioprof's
    result, what the pass took and how long it waited for its batches, timed around each one."""
    ds = dataset if dataset is not None else SlowToStart(download_s)
    loader = DataLoader(ds, batch_size=4, num_workers=workers)
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


@pytest.mark.parametrize(("workers", "making"), [(1, "workers"), (0, "training process")])
def test_a_first_pass_whose_producer_computes_is_its_loaders_not_its_storages(
    workers: int, making: str
) -> None:
    """One worker busy on a CPU for 3 s before its first sample, the training process blocked
    waiting for it: the process making the batches was on a CPU (or waiting for one), not on I/O
    — the loader's start, not its storage. Counting the training process's wait as time off the
    CPU once made it storage: one worker busy all along is half of two processes' time. Without
    workers, the training process makes them itself, and is read so."""
    r, _, _ = _watched(0.0, dataset=SlowToStart(3.0, computes=True), workers=workers)
    (lo,) = r.loaders
    b = lo.before
    assert b is not None and b.first_batch_s is not None and b.first_batch_s >= 3.0, b
    fp = r.analysis.first_pass
    assert fp is not None and fp.by == "loader" and fp.busy_of == making, fp
    assert fp.busy_share is not None and fp.busy_share >= 0.5 and b.producers == 1
    assert "the bottleneck is its loader's start" in words.verdict_line(r.analysis)
    from ioprof.render.findings import first_pass

    whose = "its workers were" if workers else "the training process making them was"
    assert f"{whose} on a CPU or waiting for one" in first_pass(fp)


def test_a_loader_that_starts_at_once_is_judged_by_its_window() -> None:
    r, _, _ = _watched(download_s=0.0)
    (lo,) = r.loaders
    assert lo.before is not None and lo.before.batches == 7
    assert r.analysis.first_pass is None
    assert "first pass" not in words.verdict_line(r.analysis)
