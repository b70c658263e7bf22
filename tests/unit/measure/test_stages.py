"""Stages timed inside real DataLoader workers (fork, spawn, forkserver), the rows summarized,
and the training process's objects left as they were."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms

from ioprof.core.inside import GARBAGE_COLLECTOR, REST_OF_GETITEM, WAITING_FOR_A_CORE
from ioprof.measure import stage_rows, stages
from ioprof.measure.pins import PinTimes


def _blurred(root: Path) -> datasets.ImageFolder:
    """An ImageNet-style Compose with a planted slow transform (a large-kernel GaussianBlur)."""
    return datasets.ImageFolder(
        str(root),
        transforms.Compose(
            [
                transforms.RandomResizedCrop(64),
                transforms.GaussianBlur(31, sigma=8.0),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                transforms.Normalize([0.5] * 3, [0.5] * 3),
            ]
        ),
    )


def _timed(loader: DataLoader, folder: str, passes: int = 1) -> stages.LoaderStages | None:
    t0 = time.perf_counter()
    for _ in range(passes):
        for _batch in loader:
            pass
    del _batch
    return stage_rows.summarize(
        stage_rows.read_rows(folder, 1),
        start_s=t0,
        end_s=time.perf_counter() + 60,
        workers=loader.num_workers,
    )


def test_workers_started_again_each_pass_count_as_the_workers_side_by_side(
    small_set: Path, tmp_path: Path
) -> None:
    """Three passes of a loader whose two workers are not persistent: six processes made batches,
    two at a time — the count that says how many made them side by side is two."""
    folder = str(tmp_path)
    loader = DataLoader(
        _blurred(small_set), batch_size=4, num_workers=2, worker_init_fn=stages.WorkerStages(folder, 1, None)
    )
    s = _timed(loader, folder, passes=3)
    rows = stage_rows.read_rows(folder, 1)
    assert len({r["pid"] for r in rows}) == 6
    assert s is not None and s.processes == 2 and s.samples == 3 * len(loader.dataset)


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_a_planted_slow_transform_is_named_first_in_every_kind_of_worker(
    small_set: Path, tmp_path: Path, method: str
) -> None:
    ds = _blurred(small_set)
    folder = str(tmp_path)
    loader = DataLoader(
        ds,
        batch_size=4,
        num_workers=2,
        worker_init_fn=stages.WorkerStages(folder, 1, None),
        multiprocessing_context=method,
    )
    s = _timed(loader, folder)
    assert s is not None and s.seen == "stages" and s.processes == 2 and s.samples == len(ds)
    names = [st.name for st in s.worker]
    # the stage to act on; a preemption by the other tests' processes is counted apart, never in it
    lead = s.leading()
    assert lead is not None and lead.name == "GaussianBlur", names
    assert {
        "read",
        "decode",
        "RandomResizedCrop",
        "ToTensor",
        "Normalize",
        "collate",
        REST_OF_GETITEM,
    } <= set(names)
    # the named stages account for the workers' own time per sample, measured around each fetch
    assert s.named_share > 0.9 and sum(st.s_per_sample for st in s.worker) == pytest.approx(
        s.worker_s_per_sample
    )
    assert all(st.share is not None and 0 <= st.share <= 1 for st in s.worker)
    assert lead.low_s <= lead.s_per_sample <= lead.high_s and lead.share_low < lead.share < lead.share_high  # type: ignore[operator]
    assert 0 < s.timing_cost_s_per_sample < 0.05 * s.worker_s_per_sample
    # the training process's dataset is untouched: its transforms are the user's own objects
    assert (
        type(ds.transform.transforms[1]).__name__ == "GaussianBlur"
        and ds.loader is datasets.folder.default_loader
    )


class _OnOneCpu:
    """A worker_init_fn that pins the worker to one CPU."""

    def __init__(self, cpu: int) -> None:
        self.cpu = cpu

    def __call__(self, worker_id: int) -> None:
        os.sched_setaffinity(0, {self.cpu})


def _two_passes_beside_a_busy_loop(make: Callable[[int], DataLoader]) -> tuple[float, float]:
    """Two passes of the loader ``make(cpu)`` builds (its one persistent worker pinned to ``cpu``),
    a busy loop pinned to the same CPU meanwhile: (when they began, the worker's CPU seconds, read
    from outside). Skips where the kernel does not count a thread's wait for a core."""
    if not hasattr(os, "sched_setaffinity") or not os.path.exists(f"/proc/{os.getpid()}/schedstat"):
        pytest.skip("no per-thread run-queue counts here")
    cpu0 = min(os.sched_getaffinity(0))  # the first CPU this host lets the tests use
    busy = subprocess.Popen(
        [sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu0}}})\nwhile True: pass"]
    )
    try:
        loader = make(cpu0)
        t0 = time.perf_counter()
        for _ in range(2):
            it = iter(loader)
            for _batch in it:
                pass
        times = psutil.Process(it._workers[0].pid).cpu_times()  # type: ignore[attr-defined]
    finally:
        busy.kill()
        busy.wait()
    return t0, times.user + times.system


@pytest.mark.rig  # a worker and a busy loop pinned to the first core: no other test's beside them
def test_a_worker_sharing_its_core_is_charged_its_own_time_and_the_wait_apart(
    small_set: Path, tmp_path: Path
) -> None:
    """A worker pinned to one core with a busy loop: each stage holds its own work only (the
    worker's CPU time, read from outside), and the time the loop held the core is counted apart."""
    folder = str(tmp_path)
    ds = datasets.ImageFolder(
        str(small_set),
        transforms.Compose(
            [transforms.RandomResizedCrop(160), transforms.GaussianBlur(31, sigma=8.0), transforms.ToTensor()]
        ),
    )
    t0, cpu = _two_passes_beside_a_busy_loop(
        lambda cpu0: DataLoader(
            ds,
            batch_size=4,
            num_workers=1,
            worker_init_fn=stages.WorkerStages(folder, 1, _OnOneCpu(cpu0)),
            persistent_workers=True,
        )
    )
    rows = stage_rows.read_rows(folder, 1)
    wall = sum(r["fetch_s"] for r in rows)
    queued = sum(r["queued_s"] for r in rows)
    # the worker's own time in its fetches is its CPU time (its files are in the page cache; its
    # life's CPU also holds the start and the batches' hand-over, hence the 15 % below)
    assert 0.85 * cpu <= wall - queued <= 1.05 * cpu, (wall, queued, cpu)
    assert queued > 0.25 * wall  # the loop held the core a good part of the time
    s = stage_rows.summarize(rows, start_s=t0, end_s=time.perf_counter() + 60, workers=1)
    assert s is not None
    by_name = {st.name: st for st in s.worker}
    # (held to what the stages left in a batch, where the kernel's clock claims a little more)
    assert by_name[WAITING_FOR_A_CORE].s_per_sample == pytest.approx(queued / s.samples, rel=0.02)
    # each stage its own work: the named stages hold the worker's CPU time, not the wall's
    named = s.samples * sum(
        st.s_per_sample for st in s.worker if st.name not in (WAITING_FOR_A_CORE, REST_OF_GETITEM)
    )
    assert 0.8 * cpu <= named <= 1.05 * cpu, (named, cpu)
    lead = s.leading()
    assert lead is not None and lead.name == "GaussianBlur"
    assert sum(st.s_per_sample for st in s.worker) == pytest.approx(s.worker_s_per_sample)


@pytest.mark.rig  # a worker and a busy loop pinned to the first core: no other test's beside them
def test_ioprofs_own_loader_charges_read_and_decode_their_own_time_not_the_wait(
    large_set: Path, tmp_path: Path
) -> None:
    """The sweep's and the ceilings' loader (ioprof's own dataset: the file read whole, then PIL's
    decode) in a worker pinned to a core with a busy loop: its read and its decode hold its own
    work (the worker's CPU time, read from outside: the files are in the page cache), the time the
    loop held the core apart — timed by the wall clock, they held most of that wait, and a decode
    ceiling with 8 workers on 2 cores read four times its decode at 1 worker."""
    from ioprof.core.config import LoaderSetting
    from ioprof.measure.loader import make_loader

    paths = sorted(str(p) for p in large_set.rglob("*.jpg"))
    folder = str(tmp_path)
    t0, cpu = _two_passes_beside_a_busy_loop(
        lambda cpu0: make_loader(
            paths,
            [0] * len(paths),
            setting=LoaderSetting.multiprocess(1),
            crop_px=96,
            batch_size=4,
            num_samples=len(paths),
            seed=0,
            persistent_workers=True,
            worker_init_fn=stages.WorkerStages(folder, 1, _OnOneCpu(cpu0)),
        )
    )
    rows = stage_rows.read_rows(folder, 1)
    wall = sum(r["fetch_s"] for r in rows)
    queued = sum(r["queued_s"] for r in rows)
    assert queued > 0.25 * wall, (queued, wall)  # the loop held the core a good part of the time
    s = stage_rows.summarize(rows, start_s=t0, end_s=time.perf_counter() + 60, workers=1)
    assert s is not None
    by_name = {st.name: st for st in s.worker}
    own = s.samples * (by_name["read"].s_per_sample + by_name["decode"].s_per_sample)
    named = s.samples * sum(st.s_per_sample for st in s.own_stages if st.name != REST_OF_GETITEM)
    # the worker's life's CPU also holds its start and the batches' hand-over, hence the 20 % below
    assert 0.8 * cpu <= named <= 1.05 * cpu, (named, own, cpu, wall)
    assert s.work_s_per_sample is not None and s.work_s_per_sample * s.samples <= 1.05 * cpu


def test_the_loaders_own_worker_init_fn_still_runs_first(small_set: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    loader = DataLoader(
        _blurred(small_set),
        batch_size=8,
        num_workers=2,
        worker_init_fn=stages.WorkerStages(str(tmp_path), 1, _MarkWorker(str(seen))),
    )
    assert _timed(loader, str(tmp_path)) is not None
    assert sorted(p.name for p in seen.iterdir()) == ["0", "1"]


class _MarkWorker:
    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __call__(self, worker_id: int) -> None:
        Path(self.folder, str(worker_id)).write_text("")


def test_a_loader_without_workers_is_timed_in_process_and_restored(small_set: Path, tmp_path: Path) -> None:
    ds = _blurred(small_set)
    inner = ds.transform.transforms
    loader = DataLoader(ds, batch_size=4, num_workers=0)
    it = iter(loader)
    undo = stages.time_in_process(it, str(tmp_path), 1, ds)
    t0 = time.perf_counter()
    for _ in it:
        pass
    undo()
    s = stage_rows.summarize(
        stage_rows.read_rows(tmp_path, 1), start_s=t0, end_s=time.perf_counter(), workers=0
    )
    lead = s.leading() if s is not None else None
    assert s is not None and lead is not None and lead.name == "GaussianBlur" and s.processes == 1
    assert ds.transform.transforms is inner and ds.loader is datasets.folder.default_loader
    assert stages.current() is None


class _Custom(Dataset):
    """Not ImageFolder-like: no file loader, no transform to time one by one."""

    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(0.002)
        return torch.zeros(3, 8, 8)


def test_a_custom_dataset_gets_what_can_be_seen_and_says_so(tmp_path: Path) -> None:
    loader = DataLoader(
        _Custom(), batch_size=4, num_workers=2, worker_init_fn=stages.WorkerStages(str(tmp_path), 1, None)
    )
    s = _timed(loader, str(tmp_path))
    assert s is not None and s.seen == "getitem" and "not ImageFolder-like" in s.note
    # (and the wait for a core, where the other tests' processes held the cores)
    assert [st.name for st in s.own_stages] == ["__getitem__", "collate"]
    getitem = next(st for st in s.worker if st.name == "__getitem__")
    assert getitem.s_per_sample >= 0.002  # its sleep, however long it then waited for a core


def test_read_and_decode_are_split_where_pil_decodes_lazily(
    small_set: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow file (its reads take 20 ms each) is charged to read, not to decode — PIL reads the
    pixels only in convert(), so timing open() alone would charge them to decode."""
    import builtins

    real_open = builtins.open

    class SlowFile:
        def __init__(self, f):  # type: ignore[no-untyped-def]
            self.f = f

        def read(self, *a):  # type: ignore[no-untyped-def]
            time.sleep(0.02)
            return self.f.read(*a)

        def readinto(self, *a):  # type: ignore[no-untyped-def]
            time.sleep(0.02)
            return self.f.readinto(*a)

        def __getattr__(self, name):  # type: ignore[no-untyped-def]
            return getattr(self.f, name)

        def __enter__(self):  # type: ignore[no-untyped-def]
            return self

        def __exit__(self, *a):  # type: ignore[no-untyped-def]
            self.f.close()

    def slow_open(path, mode="r", *a, **k):  # type: ignore[no-untyped-def]
        f = real_open(path, mode, *a, **k)
        return SlowFile(f) if "b" in mode and str(path).endswith(".jpg") else f

    clock = stages.StageClock(str(Path(small_set).parent), 99, "stages")
    monkeypatch.setattr(stages, "_CLOCK", clock)
    monkeypatch.setattr(builtins, "open", slow_open)
    path = next(Path(small_set).rglob("*.jpg"))
    image = stages.timed_pil_loader(str(path))
    assert image.mode == "RGB"
    assert clock.current["read"] >= 0.02 and clock.current["decode"] < clock.current["read"]


def test_rows_outside_the_window_or_empty_are_left_out() -> None:
    def row(t: float, n: int, blur: float, pid: int = 1) -> dict:  # type: ignore[type-arg]
        return {
            "pid": pid,
            "tag": 1,
            "t": t,
            "n": n,
            "fetch_s": blur + 0.01,
            "collate_s": 0.002,
            "stages": {"GaussianBlur": blur, "decode": 0.004},
            "calls": 4,
            "cost_s_per_call": 1e-6,
            "seen": "stages",
        }

    rows = (
        [row(0.5, 4, 9.0)]
        + [row(1 + i, 4, 0.02 + 0.001 * (i % 3), pid=1 + i % 2) for i in range(12)]
        + [row(99, 4, 9.0)]
    )
    s = stage_rows.summarize(rows, start_s=1.0, end_s=20.0, workers=2, main=[(stages.WAIT, [0.01, 0.03])])
    assert s is not None and s.batches == 12 and s.samples == 48 and s.processes == 2
    blur = s.worker[0]
    assert blur.name == "GaussianBlur" and blur.s_per_sample == pytest.approx(0.021 / 4, rel=0.01)
    rest = next(st for st in s.worker if st.name == REST_OF_GETITEM)
    assert rest.s_per_sample == pytest.approx((0.01 - 0.004 - 0.002) / 4, rel=0.01)
    assert s.timing_cost_s_per_sample == pytest.approx(1e-6)
    (wait,) = s.main
    assert wait.where == "main" and wait.s_per_batch == pytest.approx(0.02) and math.isfinite(wait.high_s)
    assert stage_rows.summarize(rows[:1], start_s=0, end_s=1, workers=2) is None


def test_pin_memory_is_timed_once_per_batch_not_per_nested_tensor() -> None:
    from torch.utils.data._utils import pin_memory as pin_mod

    pins = PinTimes()
    calls = []
    original = pin_mod.pin_memory
    pin_mod.pin_memory = lambda data, device=None: calls.append(1) or data  # the recursion's innermost
    try:
        pins.install()
        pin_mod.pin_memory([torch.zeros(2), torch.zeros(2)])
    finally:
        pins.uninstall()
        pin_mod.pin_memory = original
    assert len(pins.records) == 1 and calls == [1]


def test_a_transforms_v2_compose_is_timed_by_name_too(small_set: Path, tmp_path: Path) -> None:
    from torchvision.transforms import v2

    tf = v2.Compose(
        [
            v2.PILToTensor(),
            v2.RandomResizedCrop(64, antialias=True),
            v2.GaussianBlur(31, sigma=8.0),
            v2.ToDtype(torch.float32, scale=True),
        ]
    )
    loader = DataLoader(
        datasets.ImageFolder(str(small_set), tf),
        batch_size=4,
        num_workers=2,
        worker_init_fn=stages.WorkerStages(str(tmp_path), 1, None),
    )
    s = _timed(loader, str(tmp_path))
    lead = s.leading() if s is not None else None
    assert lead is not None and lead.name == "GaussianBlur"
    assert s is not None and {"PILToTensor", "RandomResizedCrop", "ToDtype", "read", "decode"} <= {
        st.name for st in s.worker
    }


class _LazyPacked(Dataset):
    """As users write them: its files' bytes read by a handle each worker opens at its first
    sample, decoded from memory, and its pipeline held as ``self.tf`` with a spare one beside it."""

    def __init__(self, root: Path) -> None:
        self.paths = sorted(str(p) for p in root.rglob("*.jpg"))
        self.handle: Any = None
        self.tf = transforms.Compose(
            [transforms.RandomResizedCrop(64), transforms.GaussianBlur(31, sigma=8.0), transforms.ToTensor()]
        )
        self.val_tf = transforms.Compose([transforms.Resize(64), transforms.ToTensor()])

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> torch.Tensor:
        from io import BytesIO

        from PIL import Image

        if self.handle is None:
            self.handle = open(self.paths[0], "rb")  # noqa: SIM115 (held for the worker's life, as an HDF5 file is)
        with open(self.paths[i], "rb") as f:
            data = f.read()
        return self.tf(Image.open(BytesIO(data)).convert("RGB"))


def test_a_compose_held_under_another_name_is_timed_by_its_transforms(
    small_set: Path, tmp_path: Path
) -> None:
    loader = DataLoader(
        _LazyPacked(small_set),
        batch_size=4,
        num_workers=2,
        worker_init_fn=stages.WorkerStages(str(tmp_path), 1, None),
    )
    s = _timed(loader, str(tmp_path))
    assert s is not None
    lead = s.leading()
    assert lead is not None and lead.name == "GaussianBlur", s.worker
    names = {st.name for st in s.worker}
    assert {"RandomResizedCrop", "ToTensor"} <= names and "Resize" not in names, names  # the spare never ran


class PlantedCollection:
    """A transform that starts a full garbage collection at its third call in each process, and
    notes what that collection took on its thread's CPU in ``folder`` (``collection-PID``): the
    ground truth, taken around the very collection ioprof times, outside ioprof."""

    def __init__(self, folder: str) -> None:
        self.calls = 0
        self.folder = folder

    def __call__(self, x: Any) -> Any:
        self.calls += 1
        if self.calls == 3:
            import gc

            t0 = time.thread_time()
            gc.collect()
            took = time.thread_time() - t0
            Path(self.folder, f"collection-{os.getpid()}").write_text(repr(took))
        return x


def test_a_collection_inside_a_stage_is_charged_to_the_collector_not_to_the_stage(
    small_set: Path, tmp_path: Path
) -> None:
    """A worker's full collection walks every object it inherited: its pause lands in whichever
    stage allocated when it began. Timed apart (gc's callbacks), it is its own row; the stage that
    began it keeps its own work, as does the sample, and the costliest stage to act on is still
    the planted blur."""
    inherited = [[i] for i in range(300_000)]  # the training process's objects, as a script's
    truth = tmp_path / "truth"
    truth.mkdir()
    ds = datasets.ImageFolder(
        str(small_set),
        transforms.Compose(
            [
                transforms.RandomResizedCrop(64),
                PlantedCollection(str(truth)),
                transforms.GaussianBlur(31, sigma=8.0),
                transforms.ToTensor(),
            ]
        ),
    )
    rows = tmp_path / "rows"
    rows.mkdir()
    loader = DataLoader(
        ds, batch_size=4, num_workers=2, worker_init_fn=stages.WorkerStages(str(rows), 1, None)
    )
    s = _timed(loader, str(rows))
    del inherited
    assert s is not None
    # each worker's planted collection, on its thread's CPU, as the transform itself timed it
    planted = {int(f.name.split("-")[1]): float(f.read_text()) for f in truth.iterdir()}
    assert len(planted) == 2 and min(planted.values()) > 0, planted
    by_name = {st.name: st for st in s.worker}
    collected = by_name[GARBAGE_COLLECTOR].s_per_sample * s.samples
    # the collector's row holds them (a pause less its wait for a core is at least its CPU time)
    assert collected >= 0.5 * sum(planted.values()), (collected, planted)
    assert by_name["PlantedCollection"].s_per_sample * s.samples < collected / 10
    # nor is the sample it began in (each worker's third) charged with it: a collection walks the
    # objects of all. Each worker's first batch holds its planted collection; its third sample took
    # its own work, not the collection's (a worker's first sample may be slow: its first calls)
    firsts: dict[int, dict[str, Any]] = {}
    for r in stage_rows.read_rows(str(rows), 1):
        firsts.setdefault(r["pid"], r)
    assert sorted(firsts) == sorted(planted), (firsts, planted)
    for pid, r in firsts.items():
        assert r.get("full_gcs", 0) >= 1 and r["gc_s"] >= 0.5 * planted[pid], (r, planted)
        assert r["sample_s"][2] < r["gc_s"] / 2, r
    lead = s.leading()
    assert lead is not None and lead.name == "GaussianBlur"


class _OneSlowSample(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """24 samples of 4 ms, and one of 120 ms: a huge image, a retry."""

    def __init__(self) -> None:
        self.samples = [(f"/data/train/img{i}.jpg", 0) for i in range(24)]

    def __len__(self) -> int:
        return 24

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(0.12 if index == 17 else 0.004)
        return torch.zeros(3)


def test_each_samples_time_is_kept_and_the_slowest_is_named(tmp_path: Path) -> None:
    """Inside the workers each sample's whole ``__getitem__`` is timed by its index: the planted
    slow one is named first, with its file, and its time is at least the sleep planted in it; the
    median is one of the fast ones'."""
    folder = str(tmp_path)
    loader = DataLoader(
        _OneSlowSample(), batch_size=4, num_workers=2, worker_init_fn=stages.WorkerStages(folder, 1, None)
    )
    s = _timed(loader, folder)
    assert s is not None and s.per_sample is not None
    t = s.per_sample
    assert t.samples == 24
    (index, seconds, name), *_ = t.slowest
    assert (index, name) == (17, "/data/train/img17.jpg") and seconds >= 0.12 and t.max_s == seconds
    assert 0.004 <= t.p50_s < 0.12 / 3
    # one sample of 24 is the slowest 1 %: its share is its time over all of theirs
    assert t.slowest_share == pytest.approx(seconds / (seconds + 23 * t.p50_s), rel=0.5)
    assert t.slowest_share > 0.3
    # one of 24 is more than 1 %: said as the one sample it is
    from ioprof.render.inside import per_sample_line

    line = per_sample_line(t)
    assert "its slowest sample (1 of 24) took" in line and "#17" in line and "img17.jpg" in line


class _SpinsOrSleeps(Dataset):  # type: ignore[type-arg]
    """Sample 5 works 80 ms on a CPU, sample 17 sleeps 120 ms (a wait), the rest take 4 ms asleep."""

    def __len__(self) -> int:
        return 24

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == 5:
            end = time.thread_time() + 0.08
            while time.thread_time() < end:
                pass
        else:
            time.sleep(0.12 if index == 17 else 0.004)
        return torch.zeros(1) + index


def test_each_samples_time_on_a_cpu_is_told_apart_from_its_wait(tmp_path: Path) -> None:
    """Each sample's row gives its thread's time on a CPU beside its whole time: the sample that
    works is all work, the one that sleeps hardly any (broken once — the whole time written as its
    time on a CPU —: it failed)."""
    folder = str(tmp_path)
    loader = DataLoader(
        _SpinsOrSleeps(), batch_size=4, num_workers=2, worker_init_fn=stages.WorkerStages(folder, 1, None)
    )
    for _ in loader:
        pass
    rows = stage_rows.read_rows(folder, 1)
    if not any("sample_cpu_s" in r for r in rows):
        pytest.skip("this kernel does not count a thread's time on a CPU (/proc/<pid>/task/<tid>/schedstat)")
    # the sequential sampler: batch k holds samples 4k … 4k + 3, and worker k mod 2 makes it
    by_batch = sorted(rows, key=lambda r: r["t"])
    times = {}
    for worker in (0, 1):
        made = [r for r in by_batch if r["worker"] == worker]
        for j, r in enumerate(made):
            k = 2 * j + worker
            for i, (whole, on) in enumerate(zip(r["sample_s"], r["sample_cpu_s"], strict=True)):
                times[4 * k + i] = (whole, on)
    assert len(times) == 24
    whole, on = times[5]
    assert on >= 0.075 and on <= whole + 1e-6
    whole, on = times[17]
    assert whole >= 0.12 and on < 0.02


class _PreemptedAtEachEnd:
    """This thread's run-queue count, with a preemption of ``ENDS_PREEMPTED_S``, really spent, just
    before each second read — a span's end, after its clock was read or before — counted as the
    kernel counts it, once the thread runs again; the real count beneath it."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.reads, self.waited = 0, 0.0

    def _read(self) -> float:
        self.reads += 1
        if self.reads % 2 == 0:
            time.sleep(ENDS_PREEMPTED_S)
            self.waited += ENDS_PREEMPTED_S
        return self.waited

    def seconds(self) -> float:
        return self._read() + self.real.seconds()

    def both(self) -> tuple[float, float]:
        waited = self._read()
        on, wait = self.real.both()
        return on, wait + waited

    def here(self) -> bool:
        return True


ENDS_PREEMPTED_S = 0.05


def test_a_wait_read_after_a_spans_clock_is_not_taken_off_it(tmp_path: Path) -> None:
    """CI once gave a sample that slept 120 ms a time of 1.3 ms: the wait for a core is taken off a
    stage's and a sample's time, and a preemption between the clock's reading and the wait's at a
    span's end was counted in the wait and not in the span. The wait is read inside the clock's
    readings: a stage that took 30 ms is never timed below that (broken once — the end's clock read
    before its wait, as it was —: 0 s)."""
    clock = stages.StageClock(str(tmp_path), 1, "stages")
    clock.queue = _PreemptedAtEachEnd(clock.queue)  # type: ignore[assignment]
    mark = clock.mark()
    time.sleep(0.03)
    assert clock.since(mark) >= 0.03
    sample = clock.sample_mark()
    time.sleep(0.03)
    clock.sample(0, sample)
    assert clock.sample_s[-1] >= 0.03, clock.sample_s


PREEMPTED_S = 0.2  # spread over the calibration's 2,000 calls: 100 µs a call


class _PreemptedOnce:
    """This thread's run-queue count, with one more preemption of ``PREEMPTED_S``, really spent,
    midway through the calibration's timed calls (the kernel counts a wait once the thread runs
    again); the real count beneath it, so that the other tests' load preempting this one is taken
    off too."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.reads, self.waited = 0, 0.0

    def seconds(self) -> float:
        self.reads += 1
        if self.reads == 1000:
            time.sleep(PREEMPTED_S)
            self.waited += PREEMPTED_S
        return self.real.seconds() + self.waited

    def here(self) -> bool:
        return True


def test_a_preemption_during_the_timers_calibration_is_not_charged_to_every_call(tmp_path: Path) -> None:
    """CI once printed timers costing 6 % of a sample: a preemption inside the few milliseconds of
    the calibration was spread over its 2,000 calls. Its loops take the wait off as stages do."""
    clock = stages.StageClock(str(tmp_path), 1, "stages")
    bare = stages.calibrate(clock)  # side by side: what a call costs on this host this minute
    clock.queue = _PreemptedOnce(clock.queue)  # type: ignore[assignment]
    cost = stages.calibrate(clock)
    assert clock.queue.reads > 1000  # type: ignore[attr-defined]  # the preemption fell inside
    # charged the preemption, every call would cost PREEMPTED_S / 2,000 more (100 µs, many times a
    # call's own cost): at most half of that may be the calls' own noise between the two calibrations
    assert cost - bare < 0.5 * PREEMPTED_S / 2000, (cost, bare)


def test_timms_reader_files_are_timed_where_their_reads_reach_the_file_system(
    small_set: Path, tmp_path: Path
) -> None:
    """timm's ImageDataset hands PIL a file its reader opened: its reads are timed as ``read``,
    but only those that reach the file system — PIL's header reads of a byte or two come from the
    buffer above them, untimed, so the timers cost a few per sample (broken once — every read of
    the buffered file timed, 41 timers a sample — it failed)."""
    timm_data = pytest.importorskip("timm.data", reason="timm is not installed (pip install -e '.[test]')")
    ds = timm_data.ImageDataset(
        str(small_set),
        transform=transforms.Compose([transforms.RandomResizedCrop(64), transforms.ToTensor()]),
    )
    folder = str(tmp_path)
    loader = DataLoader(ds, batch_size=4, num_workers=2, worker_init_fn=stages.WorkerStages(folder, 1, None))
    s = _timed(loader, folder)
    assert s is not None and s.seen == "reads" and s.samples == len(ds)
    assert "read" in [st.name for st in s.worker]
    rows = stage_rows.read_rows(folder, 1)
    # per sample: its own timer, its reads' (a buffer's refill or two), the transforms'
    assert sum(r["calls"] for r in rows) / s.samples < 8


def test_a_worker_timed_inside_imports_nothing_its_script_did_not(tmp_path: Path) -> None:
    """Each worker a loader starts runs the look inside's start; importing torchvision's v2 there
    (to know its Compose class) took seconds in every worker of a script that never imported it,
    at every epoch where workers are not persistent. Run as a worker runs it, in a process that has
    imported torch alone: afterwards it holds no module it did not hold before (ioprof's own aside)."""
    code = f"""
import sys, torch
from torch.utils.data import Dataset
class Plain(Dataset):
    def __len__(self): return 4
    def __getitem__(self, i): return torch.zeros(2)
before = set(sys.modules)
from ioprof.measure import stages
after_import = set(sys.modules)
stages.WorkerStages({str(tmp_path)!r}, 1, None, memory=True)(0)
added = sorted(m for m in set(sys.modules) - after_import if not m.startswith("ioprof"))
print(added)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    added = out.stdout.strip()
    assert added == "[]", f"{added.count(',') + 1} modules imported: {added[:300]}"
