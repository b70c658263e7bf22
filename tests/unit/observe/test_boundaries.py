"""Epoch boundaries under ``ioprof.watch``: a dataset that takes a second to start in each worker
(an index loaded, a connection opened, on its first sample), read by workers started again at
every pass, gets what each start costs with its share of the pass and the advice to keep the
workers; the same dataset with persistent workers pays that second once, and is not told so."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

import ioprof

START_S = 1.0  # what the dataset takes to start in a worker
SAMPLE_S = 0.004


class SlowToStart(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Opens something costly on its first sample in each process (a lazy index, a connection)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.ready = False

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if not self.ready:
            time.sleep(START_S)
            self.ready = True
        time.sleep(SAMPLE_S)
        return torch.zeros(3, 16, 16), i % 2


def _side_by_side(epochs: int) -> tuple[Any, list[list[float]]]:
    """The same dataset read by workers started again at every pass and by persistent ones, their
    passes taken in turn under one watch, so that both live through the same moments of the host;
    each pass's seconds, timed here from iter() to its end (restarted first, then kept)."""
    loaders = [
        DataLoader(SlowToStart(64), batch_size=8, shuffle=True, num_workers=2, persistent_workers=kept)
        for kept in (False, True)
    ]
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    took: list[list[float]] = [[], []]
    with ioprof.watch(steps=6, seconds=None, probe=False) as w:
        for _ in range(epochs):
            for loader, times in zip(loaders, took, strict=True):
                t0 = time.perf_counter()
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                times.append(time.perf_counter() - t0)
    return w.result(), took


def test_workers_started_at_every_pass_cost_each_epoch_what_persistent_workers_save() -> None:
    """The truth is the whatif itself, run side by side: the same loader with persistent workers,
    its passes taken in turn with the restarted one's (two runs one after the other each meet the
    host in another mood, and under load their passes' lengths differ by more than the start
    costs' margin); what it saves a pass is what ioprof said the start (and the end, where the
    workers are stopped) cost."""
    from ioprof.render.findings import finding

    result, (took, took_kept) = _side_by_side(4)
    lo, lo_kept = result.loaders
    assert not lo.persistent_workers and lo_kept.persistent_workers
    assert len(lo.pass_starts) == 4 and all(p.pass_s for p in lo.pass_starts), lo.pass_starts
    assert all(p.first_batch_s >= START_S for p in lo.pass_starts[1:]), lo.pass_starts  # each paid again
    # each later pass as the loop lived it, from iter() until the call that ran it out returned —
    # in which the workers were stopped and joined: their lengths, timed here in the same run, are
    # ioprof's to well within that stop (the first holds ioprof's own start before iter())
    later_marks = lo.pass_starts[1:]
    stops = [p.stop_s for p in later_marks]
    assert all(s > 0 for s in stops), later_marks
    assert abs(sum(p.pass_s or 0.0 for p in later_marks) - sum(took[1:])) < sum(stops) / 2, (
        later_marks,
        took,
    )
    found = [x for x in result.analysis.findings if x.kind == "epoch-start-cost"]
    (f,) = found  # the kept loader's passes are not told to keep their workers
    assert f.dataset == lo.key
    later, later_kept = sum(took[1:]) / 3, sum(took_kept[1:]) / 3
    saved = later - later_kept
    assert f.cost_s == pytest.approx(saved, rel=0.25), (f, took, took_kept)
    assert f.share_low <= saved / later <= f.share_high or f.share == pytest.approx(
        saved / later, rel=0.25
    ), f
    words = finding(f)
    assert "persistent_workers=True" in words and "each pass after the first waited" in words
    # the same dataset with persistent workers pays its start once: a later pass waits for a batch
    assert all(p.first_batch_s < START_S / 2 for p in lo_kept.pass_starts[1:]), lo_kept.pass_starts


class Listed(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """A dataset holding its file list as Python strings (SPDL #1594: 1.2 M paths, 20 s to start)."""

    def __init__(self, n: int) -> None:
        self.paths = [f"/data/train/class_{i % 1000:04d}/image_{i:08d}.jpg" for i in range(n)]

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> int:
        return i


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_what_a_spawned_worker_is_handed_at_every_start_is_the_dataset_pickled(method: str) -> None:
    import pickle

    from ioprof.core.findings import EpochStartCost
    from ioprof.observe.probe import sent_to_each_worker
    from ioprof.observe.recorder import loader_settings
    from ioprof.render.findings import finding

    ds = Listed(200_000)
    loader = DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context=method)
    sent = sent_to_each_worker(loader, loader_settings(loader))
    if method == "fork":
        assert sent is None  # forked workers share the training process's memory: nothing is sent
        return
    assert sent is not None and sent["bytes"] == len(pickle.dumps(ds)) and sent["seconds"] > 0, sent
    cost = EpochStartCost(
        "loader 1", 2, method, 3, 2.0, 2.5, 0.1, 2.4, 10.0, 0.24, 0.2, 0.28, sent["bytes"], sent["seconds"]
    )
    assert f"each is handed the dataset pickled, {sent['bytes'] / 1e6:.1f} MB" in finding(cost)
    # a pickle that goes on too long inside the probe's pause is stopped: what it had written by
    # then is a lower bound, and said to be one
    cut = sent_to_each_worker(loader, loader_settings(loader), at_most_s=0.0)
    assert cut is not None and not cut["whole"] and 0 < cut["bytes"] < sent["bytes"], cut
    cost = dataclasses.replace(cost, sent_bytes=cut["bytes"], sent_s=cut["seconds"], sent_whole=False)
    assert "the dataset pickled, more than" in finding(cost) and "was stopped after" in finding(cost)


def test_a_long_run_keeps_the_first_pass_and_the_latest_with_their_batches(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from ioprof.observe import recorder

    monkeypatch.setattr(recorder, "PASS_MARKS_KEPT", 3)
    data = torch.utils.data.TensorDataset(torch.zeros(10, 3), torch.zeros(10, dtype=torch.long))
    loader = DataLoader(data, batch_size=4)  # 3 batches a pass, the last of 2 samples
    with ioprof.watch(steps=2, seconds=None, probe=False) as w:
        for epoch in range(8):
            for i, _ in enumerate(loader):
                if epoch == 0 and i == 1:
                    break  # the first pass left after 2 batches: told apart from the others
    (lo,) = w.result().loaders
    assert [p.batches for p in lo.pass_starts] == [2, 3, 3], lo.pass_starts


class Quick(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(SAMPLE_S)
        return torch.zeros(3, 16, 16), i % 2


@pytest.mark.parametrize("persistent", [False, True])
def test_a_loop_taking_each_batch_from_a_fresh_iterator_is_told_what_that_costs(persistent: bool) -> None:
    """``next(iter(loader))`` at every step: no pass is long enough for a window, and every batch
    waits as a pass's first does — its workers started again, or (persistent) the batches they made
    ahead thrown away. The share ioprof gives those waits is the loop's own, timed here around each
    ``next(iter(loader))`` and each step."""
    from ioprof.render.findings import finding

    loader = DataLoader(Quick(), batch_size=8, num_workers=2, persistent_workers=persistent)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    timed: list[tuple[float, float]] = []  # each step's wait in next(iter(loader)), and its whole time
    with ioprof.watch(probe=False) as w:
        for _ in range(12):
            t0 = time.perf_counter()
            x, y = next(iter(loader))  # the iterator is let go here: its workers stop in this line
            t1 = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            del x, y, loss  # the batch freed in the step: not in the next line's wait, timed as the wait
            timed.append((t1 - t0, time.perf_counter() - t0))
    result = w.result()
    assert not [c for c in result.cells if c.status == "ok"]  # no window: no pass long enough
    (f,) = [x for x in result.analysis.findings if x.kind == "fresh-iterators"]
    assert f.most_in_a_pass == 1 and f.pass_holds == 8 and f.persistent is persistent
    (lo,) = result.loaders
    assert f.passes == 11 and len(lo.pass_starts) == 12  # each ends at the next iter(); the last never
    # the same passes as the loop timed them, less ioprof's own time in them (its own timer's)
    own = sum(p.own_s for p in lo.pass_starts[:11])
    truth = (sum(wait for wait, _ in timed[:11]) - own) / (sum(whole for _, whole in timed[:11]) - own)
    assert f.share_low <= truth <= f.share_high, (f, truth)
    if not persistent:  # each dropped iterator's workers were stopped in the loop's time, and counted
        assert all(p.stop_s > 0 for p in lo.pass_starts[:11]), lo.pass_starts
    words = finding(f)
    assert "Keep one iterator" in words and ("starting its 2 workers again" in words) is not persistent
    (not_measured,) = [x for x in result.analysis.findings if x.kind == "training-not-measured"]
    assert not_measured.loaders[0][2] == 1  # its longest pass, not the 12 batches of all passes


def test_a_let_go_iterators_stop_holds_its_attributes_freed() -> None:
    """The workers' stop where the loop lets an iterator go is the whole ``del``: ``__del__``
    joins the workers, and then the iterator's attributes (the workers' queues, their pipes and
    handles) are freed, hundreds of µs more, in the same statement of the loop's. What ioprof
    leaves out of it is only its own wrapper's few µs (the median pass: a preemption is no
    figure of either)."""
    import statistics

    loader = DataLoader(Quick(), batch_size=8, num_workers=2)
    took = []
    with ioprof.watch(probe=False) as w:
        for _ in range(8):
            it = iter(loader)
            next(it)
            t0 = time.perf_counter()
            del it
            took.append(time.perf_counter() - t0)
    (lo,) = w.result().loaders
    missed = [t - p.stop_s for t, p in zip(took, lo.pass_starts, strict=True)]
    assert statistics.median(missed) < 100e-6, (missed, lo.pass_starts)


def test_a_short_loader_taken_whole_at_every_epoch_is_not_told_to_keep_one_iterator() -> None:
    """An evaluation set of two batches, its workers started again at every epoch and every pass
    taken whole (``for x in loader``): no pass is long enough for a window and each first batch
    costs as much as the fresh iterators' do, but the loop keeps each iterator to its end —
    another iterator is its only way to the next epoch, and "keep one iterator" is no advice."""
    loader = DataLoader(Quick(), batch_size=32, num_workers=2)  # 2 batches a pass
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with ioprof.watch(probe=False) as w:
        for _ in range(6):
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                opt.zero_grad()
    result = w.result()
    (lo,) = result.loaders
    assert [(p.batches, p.ran_out) for p in lo.pass_starts] == [(2, True)] * 6, lo.pass_starts
    assert not [x for x in result.analysis.findings if x.kind == "fresh-iterators"]


def test_a_loop_that_keeps_its_iterator_is_not_told_to() -> None:
    """The same loop keeping one iterator over short passes of 3 batches: passes too short for a
    window too, but its batches after each pass's first come from workers already at work — where
    that is most of the loop's time the finding stays silent; where each pass is mostly its first
    batch's wait it speaks, whatever the reason."""
    from ioprof.conclude.boundaries import fresh_cost
    from ioprof.core.results_run import PassStart

    lo = _observed([PassStart(0.05, 0.15, pass_s=0.20, batches=1) for _ in range(5)], needed=9, holds=8)
    cost = fresh_cost(lo)
    assert cost is not None and cost.share == pytest.approx(0.75)
    long = _observed([PassStart(0.05, 0.15, pass_s=3.0, batches=9) for _ in range(5)], needed=9, holds=8)
    assert fresh_cost(long) is None  # a pass as long as a window: a cell measures it
    few = _observed([PassStart(0.05, 0.15, pass_s=0.20, batches=1) for _ in range(2)], needed=9, holds=8)
    assert fresh_cost(few) is None  # two passes: no interval over passes


def _observed(passes: list[Any], needed: int, holds: int) -> Any:
    from ioprof.core.results_run import ObservedLoader

    fields = {f.name for f in dataclasses.fields(ObservedLoader)}
    base = {
        "key": "loader 1",
        "rank": 0,
        "role": "unknown",
        "dataset_class": "Quick",
        "dataset_len": 64,
        "dataset_root": "",
        "num_workers": 2,
        "batch_size": 8,
        "pin_memory": False,
        "prefetch_factor": 2,
        "persistent_workers": False,
        "drop_last": False,
        "sampler": "SequentialSampler",
        "start_method": "fork",
        "batches": sum(p.batches for p in passes),
        "passes": len(passes),
        "window": "none",
        "pass_starts": tuple(passes),
        "gaps_left_out": 0,
        "files_known": 0,
        "measured_batches_needed": needed,
        "batches_per_pass": holds,
    }
    return ObservedLoader(**{k: v for k, v in base.items() if k in fields})
