"""Cores busy and memory growth, against the kernel's own totals: the cores figure of a watched
loop agrees with the CPU time the kernel charged to its processes over the same spans, a
stock ImageFolder gets no memory-growth finding, and a dataset that keeps every sample it
returns is found, with its rate and its cause."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from groundtruth import CpuGroup, ProcStat
from torch.utils.data import DataLoader

import ioprof
from ioprof.render.fmt import size


def _train(loader: DataLoader, seconds: float, epochs: int = 1) -> None:  # type: ignore[type-arg]
    """Epochs over the loader until ``seconds`` have passed and ``epochs`` are done: a test that
    asks for so many epochs gets them however slowly a shared host makes them (an epoch of 2 s
    here took 3 beside another test's workers: two in 8 s)."""
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.LazyLinear(4)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0, done = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds or done < epochs:
        done += 1
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


@pytest.fixture()
def folder(small_set: Path):  # type: ignore[no-untyped-def]
    from torchvision import datasets, transforms

    return datasets.ImageFolder(
        str(small_set), transforms.Compose([transforms.RandomResizedCrop(64), transforms.ToTensor()])
    )


class _Streamed(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """The folder as a stream, each worker yielding its share of ``rounds`` passes over it: a pass
    ends when its workers run out, and the DataLoader shuts them down before the loop sees it."""

    def __init__(self, folder: Any, rounds: int) -> None:
        self.folder, self.rounds = folder, rounds

    def __iter__(self) -> Iterator[Any]:
        info = torch.utils.data.get_worker_info()
        share, of = (info.id, info.num_workers) if info is not None else (0, 1)
        for i in range(share, self.rounds * len(self.folder), of):
            yield self.folder[i % len(self.folder)]


def _passes(folder: Any, persistent: bool) -> Any:
    """Passes long enough for the truth to resolve: the cgroup's count lags by what each running
    thread ran since the scheduler last looked (up to a tick), which over spans of one pass of 6
    batches (10-20 ms) moved it 2-4 % either way; 10 rounds of the folder make spans of a
    second. The stream's passes (4 rounds) are long enough already."""
    if persistent:
        return torch.utils.data.ConcatDataset([folder] * 10)
    return _Streamed(folder, rounds=4)


@pytest.mark.rig  # /proc/stat counts the whole machine, and the cores ioprof sees busy are shared
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "stream-reforked"])
def test_cores_busy_agrees_with_the_kernels_count_and_a_stock_folder_does_not_grow(
    folder, figure, persistent
) -> None:  # type: ignore[no-untyped-def]
    """Workers kept from pass to pass; and a stream's workers, started again at every pass and
    gone when the loop sees it end, whose CPU is then read through the training process that
    reaped them. The truth: the CPU time the kernel
    charged to a cgroup holding this process and its workers alone, to the nanosecond, over the
    very spans ioprof read — within 3 %. Broken once each: a pass's end left out where its workers
    were gone (cores read over a tenth of the window); a fresh worker's CPU at a span's start read
    in clock ticks (5 % over). Spans timed from the readings' starts ``test_window`` checks. Where
    no cgroup can be made, the machine's ``/proc/stat``, which samples busy ticks (3-4 % under the
    cgroup here)."""
    data = _passes(folder, persistent)
    loader = DataLoader(
        data, batch_size=8, shuffle=True if persistent else None, num_workers=2, persistent_workers=persistent
    )
    group = CpuGroup.make()
    with contextlib.ExitStack() as held:
        if group is not None:
            held.enter_context(group.holding_this_process())
        with ProcStat(group=group) as stat, ioprof.watch(steps=100_000, seconds=8.0, probe=False) as w:
            _train(loader, seconds=10.0)  # epochs of 48 images; the window ends after 8 s of them
        del loader  # its workers gone before this process leaves the cgroup
        gc.collect()
    seen = w.watcher.observation()["loaders"][0]
    r = w.result()
    (cell,) = r.cells
    cores = cell.inside.cores if cell.inside else None
    assert cores is not None and cores.cpu_busy_cores is not None and cores.window_s > 2, cores
    truth = stat.busy_cores_over(seen["cpu"]["spans_wall"])  # over the very spans ioprof read
    figure(
        f"watch(), 2 {'persistent' if persistent else 're-forked'} workers: cores busy "
        f"{cores.cpu_busy_cores:.3f}, {stat.source} over the same spans {truth:.3f}"
    )
    within = 0.03 if group is not None else 0.10
    assert truth > 0.5 and abs(cores.cpu_busy_cores - truth) <= within * truth, (cores.cpu_busy_cores, truth)
    # a span that ends with its workers gone (a stream's pass ends) leaves their threads' last
    # stretch untold: threads are read over the spans whose every process was read at both ends
    # (none, where every pass is shorter than the time between readings; some on a loaded host)
    told = seen["cpu"]["threads_window_s"] > 0
    assert told or not persistent, seen["cpu"]
    if not persistent:  # the spans its passes' ends fell in are left out of the threads' time
        assert seen["cpu"]["threads_window_s"] < 0.9 * seen["cpu"]["window_s"], seen["cpu"]
    if told:
        assert cores.threads_read and cores.runq_share is not None and 0.0 <= cores.runq_share < 1.0, cores
    else:
        assert cores.runq_share is None and not cores.threads_read, cores
    m = cell.inside.memory if cell.inside else None
    assert m is not None and m.worker_uss_bytes and m.worker_uss_bytes > 1e6, m
    assert not m.growth_cause and not [f for f in r.analysis.findings if f.kind == "worker-memory-grows"], m


def _kept_bytes(samples_per_epoch: int) -> int:
    """What the leaking dataset keeps of each sample: enough that the RAM available here fills
    within a third of the longest training (``TRAINING_EPOCHS_AT_MOST``), as a leak ioprof must warn
    of does — set from this host's own RAM, never below 64 kB."""
    import psutil

    from ioprof.core.thresholds import TRAINING_EPOCHS_AT_MOST

    available = psutil.virtual_memory().available
    per_sample = 3 * available / (TRAINING_EPOCHS_AT_MOST * samples_per_epoch)
    return max(64 * 1024, -(-int(per_sample) // 4096) * 4096)


class KeepsEverything(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """A dataset that keeps something of every sample it returns (a cache without a bound):
    ``kept`` bytes a sample."""

    def __init__(self, n: int, kept: int) -> None:
        self.n = n
        self.kept_bytes = kept
        self.kept: list[bytes] = []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.02)  # epochs of 2 s: 4 of them in the 8 s trained, each a worker's 100 samples
        self.kept.append(os.urandom(self.kept_bytes))  # every page written: it is the worker's own
        return torch.rand(3, 64, 64), i % 4


def test_a_dataset_that_keeps_what_it_returns_is_found_with_its_rate_as_a_leak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ioprof.core.thresholds import TRAINING_EPOCHS_AT_MOST
    from ioprof.measure import inside

    kept = _kept_bytes(200)
    loader = DataLoader(
        KeepsEverything(200, kept), batch_size=8, shuffle=True, num_workers=2, persistent_workers=True
    )
    # Shipped, memory is read every 2 s or more (the readings held to 1 % of a core): in the full
    # suite 10 s left a worker too few readings after its warm-up, and 14 s left the later half
    # (whose rate decides "goes on") 2 readings a worker — one CI run in five called the leak not
    # steady; 20 s held. What this test asks is the rate and its cause, not the cadence: read every
    # 0.5 s, a window of 8 s holds 28-38 readings (about 10 in those 20 s). Held to 5 % of the time,
    # a host whose hypervisor stole 2-7 % of a core (CI64, 24 min in all) left too few readings past
    # the warm-up: 20 % keeps the cadence, and this test times nothing but memory per sample
    monkeypatch.setattr(inside, "EVERY_S", 0.5)
    monkeypatch.setattr(inside, "READING_BUDGET", 0.2)
    # a window of 10 batches, under half an epoch: persistent workers' memory is read on past it,
    # until the training ends, and judged from one epoch to the next over all of it
    with ioprof.watch(steps=10, seconds=None, probe=False) as w:
        _train(loader, seconds=8.0, epochs=4)
    r = w.result()
    (cell,) = r.cells
    assert cell.steps == 10
    m = cell.inside.memory if cell.inside else None
    assert m is not None and m.growth_bytes_per_1000_samples is not None, m
    # what it keeps a sample (and a small Python object), per 1,000 samples
    assert m.growth_low is not None and m.growth_high is not None
    assert 0.9 * kept * 1000 <= m.growth_bytes_per_1000_samples <= 1.3 * kept * 1000, m
    assert m.growth_cause == "leak" and m.revisited, m  # persistent workers went round again, still growing
    # at the same point of each epoch, each worker holds what it kept of its 100 samples more
    assert m.epochs_seen >= 3 and m.epoch_growth_bytes is not None, m
    assert m.epoch_growth_bytes == pytest.approx(100 * kept, rel=0.25), m
    (grows,) = [f for f in r.analysis.findings if f.kind == "worker-memory-grows"]
    assert grows.epochs_until_full is not None and 0 < grows.epochs_until_full < TRAINING_EPOCHS_AT_MOST
    report = Path(w.write_report(str(tmp_path / "r"))).read_text()
    assert "more at the same point of each epoch than of the last" in report and "a leak" in report


@pytest.fixture(autouse=True)
def _quiet_lazy() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Lazy modules are a new feature", category=UserWarning)
        yield


def test_a_leaking_dataset_whose_workers_live_one_epoch_gets_its_peak_and_no_leak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, figure
) -> None:  # type: ignore[no-untyped-def]
    """The same dataset with workers forked again each epoch: what a worker keeps goes when it exits,
    so no leak is claimed; the peak a worker reaches at its epoch's end is said, from 10 % under to
    25 % over the most each worker's USS reached, read from outside (``groundtruth``'s own
    reader of ``smaps``)."""
    from groundtruth import Smaps

    from ioprof.conclude.inside import worker_peak_bytes
    from ioprof.measure import inside, stageclock

    monkeypatch.setattr(inside, "EVERY_S", 0.5)
    monkeypatch.setattr(inside, "READING_BUDGET", 0.2)
    monkeypatch.setattr(stageclock, "MEMORY_BUDGET", 0.2)  # each worker reads itself as often (forked)
    kept = _kept_bytes(200)
    loader = DataLoader(KeepsEverything(200, kept), batch_size=8, shuffle=True, num_workers=2)
    with Smaps(None, parent=os.getpid()) as smaps, ioprof.watch(steps=10, seconds=None, probe=False) as w:
        _train(loader, seconds=8.0)
    r = w.result()
    (cell,) = r.cells
    m = cell.inside.memory if cell.inside else None
    assert m is not None and not m.persistent_workers
    assert "worker-memory-grows" not in {f.kind for f in r.analysis.findings}
    peak = worker_peak_bytes(m, m.workers)
    truth = [max(u for _, u, _ in rs) for rs in smaps.readings.values()]
    figure(
        f"workers forked each epoch, keeping {kept / 1e3:,.0f} kB a sample: ioprof's peak {peak / 1e6:.1f} MB a "
        f"worker; the most each worker's USS reached, from outside: {', '.join(f'{t / 1e6:.1f}' for t in truth)} MB"
    )
    # read in the worker itself and carried to its life's end, the peak cannot fall much short of
    # what the worker reached (a slope over the window said 57 MB against 74); it may exceed it
    # by what the outside reader missed between its readings
    assert 0.9 * max(truth) <= peak <= 1.25 * max(truth), (peak, truth)
    report = Path(w.write_report(str(tmp_path / "r"))).read_text()
    assert "reaches about" in report and "a leak" not in report


SCRATCH: list[torch.Tensor] = []  # what the training process holds at a fork, each worker inherits


class _WritesWhatItInherits(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Each worker writes, at its first sample, the scratch memory it inherited at its fork (as a
    worker's own allocations reuse heap pages the training process had freed): those pages become
    its own. The training process holds 100 MB of it only until its first step."""

    def __len__(self) -> int:
        return 80

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if SCRATCH:
            self.kept = SCRATCH.pop().add_(1.0)  # kept for the worker's life
        time.sleep(0.02)  # a pass of 80 samples on 2 workers: 0.8 s, a few readings a worker
        return torch.rand(3, 32, 32), i % 4


@pytest.mark.parametrize("held_by", ["first", "later"])
def test_workers_of_the_first_pass_are_told_from_later_ones(
    held_by: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, figure
) -> None:  # type: ignore[no-untyped-def]
    """Workers forked again each pass, those of the first holding far more than later ones
    (PyTorch's ImageNet example, read from outside: 109-115 MB a worker in its first pass,
    38-41 MB later) or far less (a dataset of members of one zip: 15 MB against 18): the most a
    worker reaches is what must fit; each group is said with its own, against each worker's USS read
    from outside (broken once — every worker taken for the first pass's — no later pass was told
    apart; once more — the most of all said for the first pass's — "later" read 111 MB for 10.5)."""
    from groundtruth import Smaps

    from ioprof.measure import inside, stageclock

    monkeypatch.setattr(inside, "EVERY_S", 0.5)
    monkeypatch.setattr(inside, "READING_BUDGET", 0.2)
    monkeypatch.setattr(stageclock, "MEMORY_BUDGET", 0.2)
    loader = DataLoader(_WritesWhatItInherits(), batch_size=8, num_workers=2)
    with (
        Smaps(None, every_s=0.1, parent=os.getpid()) as smaps,
        ioprof.watch(steps=100_000, seconds=None, probe=False) as w,
    ):
        for k in range(3):
            if (k == 0) == (held_by == "first"):
                SCRATCH[:] = [torch.ones(25_000_000)]  # 100 MB, held at this pass's fork
            for _x, _y in loader:
                SCRATCH.clear()  # its first step lets it go
    (cell,) = w.result().cells
    m = cell.inside.memory if cell.inside else None
    assert m is not None and not m.persistent_workers and m.life_first_pass, m
    assert m.life_peak_bytes and m.first_life_peak_bytes and m.later_life_peak_bytes, m
    lives = sorted((rs[0][0], max(u for _, u, _ in rs)) for rs in smaps.readings.values() if rs)
    first, later = [u for _, u in lives[:2]], [u for _, u in lives[2:]]
    figure(
        f"workers forked again each pass, 100 MB inherited and written in the {held_by}: ioprof's first pass "
        f"{m.first_life_peak_bytes / 1e6:.1f} MB a worker, later passes {m.later_life_peak_bytes / 1e6:.1f}; "
        f"from outside, the most each reached: {', '.join(f'{u / 1e6:.1f}' for u in first)} | "
        f"{', '.join(f'{u / 1e6:.1f}' for u in later)} MB"
    )
    more, less = (first, later) if held_by == "first" else (later, first)
    assert len(later) >= 2 and max(more) > 100e6 > 2 * max(less), (first, later)  # the premise
    for said, truth in (
        (m.first_life_peak_bytes, first),
        (m.later_life_peak_bytes, later),
        (m.life_peak_bytes, first + later),
    ):
        assert 0.9 * max(truth) <= said <= 1.25 * max(truth), (said, truth)
    report = Path(w.write_report(str(tmp_path / "r"))).read_text()
    first_mb = size(round(m.first_life_peak_bytes))
    assert (
        f"each worker of the first pass reaches about {first_mb}" in report and ", of later passes" in report
    )


class _KeepsSlowly(KeepsEverything):
    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.03)  # an epoch of 80 samples on 2 workers: 1.2 s, a few readings a worker
        return super().__getitem__(i)


def test_two_short_epochs_of_persistent_workers_are_compared_however_few_samples_they_span() -> None:
    """Each worker makes 40 samples an epoch: two epochs span fewer after its warm-up than a slope
    over the run needs (``GROWTH_MIN_SAMPLES``), but what each holds at the same point of both
    epochs is still compared, with the interval so few readings give (timm's train.py on the rig:
    60 samples a worker an epoch, two epochs)."""
    from groundtruth import private_pages

    from ioprof.core.thresholds import GROWTH_MIN_SAMPLES

    kept = 256 * 1024
    loader = DataLoader(
        _KeepsSlowly(80, kept), batch_size=8, shuffle=True, num_workers=2, persistent_workers=True
    )
    samples_a_worker = 2 * 80 // 2  # two epochs of 80 on 2 workers
    assert samples_a_worker < GROWTH_MIN_SAMPLES  # fewer than a slope over the run needs, as on the rig
    ends = []
    with ioprof.watch(steps=100_000, seconds=None, probe=False) as w:
        for _ in range(2):
            for _x, _y in loader:
                pass
            time.sleep(0.2)  # between epochs (evaluation): each worker idles, its epoch made
            ends.append({p.pid: private_pages(p.pid)[0] for p in loader._iterator._workers})  # type: ignore[union-attr]
    (cell,) = w.result().cells
    m = cell.inside.memory if cell.inside else None
    assert m is not None and m.growth_bytes_per_1000_samples is None, m  # no slope over the run
    assert m.epochs_seen == 2 and m.epoch_growth_bytes is not None, m
    # the truth from outside: what each worker holds more at the end of its second epoch than at the
    # end of its first (its own pages, read from /proc/PID/smaps while it idles between them): at
    # least the 40 samples' payload it keeps, and what else their making leaves (a few % here)
    grew = [ends[1][pid] - ends[0][pid] for pid in ends[0]]
    assert min(grew) >= 40 * sys.getsizeof(bytes(kept)), grew
    # ioprof's interval (one degree of freedom between two workers; placed by its readings'
    # samples, a reading between two batches counting what the one in progress had made) reaches it
    assert m.epoch_growth_low is not None and m.epoch_growth_high is not None, m
    assert m.epoch_growth_low <= max(grew) and min(grew) <= m.epoch_growth_high, (grew, m)


class KeepsAndCollectsOnce(KeepsEverything):
    """As ``KeepsEverything``, and a full garbage collection in each worker at its 150th sample,
    in its second epoch (a script's own ``gc.collect()``, or the collector's own turn)."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if len(self.kept) == 150:
            gc.collect()
        return super().__getitem__(i)


def test_a_persistent_worker_is_read_at_every_epoch_and_its_first_full_collection_is_no_growth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Readings held to a budget of the worker's time come as often as the host allows (a loaded
    host: fewer); the readings that judge an epoch's growth come at each epoch's first batch
    whatever the budget, so that a worker is compared with itself at the same point of each.
    A worker's first full collection writes to every object it inherited from the training
    process: their pages become its own, once — 3× what it keeps in an epoch here, inside its
    second epoch. Its growth from one epoch to the next is still what it keeps (CI read 89 MB an
    epoch for 26 when the step was taken for growth)."""
    from ioprof.measure import inside, stageclock

    monkeypatch.setattr(stageclock, "MEMORY_BUDGET", 1e-9)  # after its first, no reading fits the budget
    monkeypatch.setattr(inside, "READING_BUDGET", 1e-9)  # nor one taken from outside
    inherited = [[i] for i in range(1_500_000)]  # a training process's objects, each worker's at the fork
    kept = 256 * 1024
    loader = DataLoader(
        KeepsAndCollectsOnce(200, kept), batch_size=8, shuffle=True, num_workers=2, persistent_workers=True
    )
    with ioprof.watch(steps=10, seconds=None, probe=False) as w:
        # five epochs: the readings at the first batch of each are three after the step and one
        # before it (the first epoch's falls in the warm-up)
        _train(loader, seconds=10.0, epochs=5)
    del inherited
    (cell,) = w.result().cells
    m = cell.inside.memory if cell.inside else None
    assert m is not None and m.epochs_seen >= 3 and m.epoch_growth_bytes is not None, m
    assert m.epoch_growth_bytes == pytest.approx(100 * kept, rel=0.25), m
