"""The probe of a user's pipeline runs, or says exactly why not: a pass ends at the next
``iter()`` and after ``len(loader)`` batches, not only at ``StopIteration`` (trainers such as
Lightning count batches themselves); a probe that hangs is abandoned at its deadline, its workers
ended; persistent workers forked early get probe workers from a fork server."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import builders
import pytest
import torch
from torch.utils.data import DataLoader

import ioprof
from ioprof.conclude.threads import threads_against_processes
from ioprof.core.results import DatasetCeilings, DecodeCeiling
from ioprof.core.stats import LOOKS
from ioprof.observe import probe
from ioprof.observe.watch import Watch
from ioprof.observe.watching import WatchConfig


def _folder(root: Path):  # type: ignore[no-untyped-def]
    from torchvision import datasets, transforms

    return datasets.ImageFolder(
        str(root), transforms.Compose([transforms.Resize((16, 16)), transforms.ToTensor()])
    )


def _watch(**kw: object) -> Watch:
    """``ioprof.watch()`` with a short probe: what is tested here is when it runs, not its figures."""
    return Watch(None, WatchConfig(steps=1000, seconds=None, probe=True, probe_seconds=0.3, **kw))  # type: ignore[arg-type]


def _steps(loader: DataLoader, model: torch.nn.Module, opt: torch.optim.Optimizer, n: int) -> None:  # type: ignore[type-arg]
    """``n`` steps of a pass, then stop without running the iterator out (as Lightning does)."""
    it = iter(loader)
    for _ in range(n):
        x, y = next(it)
        loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_a_trainer_that_counts_its_batches_is_probed_after_its_first_pass(small_set: Path) -> None:
    loader = DataLoader(_folder(small_set), batch_size=2, shuffle=True, num_workers=0)
    model = torch.nn.Linear(3 * 16 * 16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with _watch() as w:
        _steps(loader, model, opt, 20)  # a pass of 24 batches, cut at 20: never exhausted
        assert not w.watcher.probes
        _steps(loader, model, opt, 1)  # the next pass begins: the first one ended
        probed_before_second_pass = bool(w.watcher.probes)
    assert probed_before_second_pass, w.watcher.probe_refused
    assert w.watcher.probes["when"] == "at the end of its first training pass"
    r = w.result()
    assert r.script is not None and r.script.probe_when == "at the end of its first training pass"
    assert r.ceilings[0].decode and r.ceilings[0].storage


def test_a_pass_of_len_loader_batches_ends_there(small_set: Path) -> None:
    loader = DataLoader(_folder(small_set), batch_size=4, num_workers=0)  # 12 batches a pass
    model = torch.nn.Linear(3 * 16 * 16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with _watch() as w:
        _steps(loader, model, opt, 12)  # every batch, but StopIteration never asked for
        assert w.watcher.probes and w.watcher.probes["when"] == "at the end of its first training pass"


def test_too_short_a_window_is_said_why_it_was_not_probed(small_set: Path) -> None:
    loader = DataLoader(_folder(small_set), batch_size=8, num_workers=0)  # 6 batches a pass
    model = torch.nn.Linear(3 * 16 * 16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with _watch() as w:
        _steps(loader, model, opt, 6)
    assert not w.watcher.probes
    assert w.watcher.probe_refused == (
        "loader 1: only 0 batches were measured at the end of its first training pass "
        f"(the probe needs {ioprof.observe.observer.PROBE_MIN_UNITS} to know the batch and the step)"
    )
    r = w.result()
    assert r.script is not None and r.script.probe_refused == w.watcher.probe_refused
    assert not r.script.probed


class HangsInProbe:
    """A ``worker_init_fn`` that hangs once ``flag`` exists: the user's workers started before it
    did; the probe's start after, and hang."""

    def __init__(self, flag: str) -> None:
        self.flag = flag

    def __call__(self, worker_id: int) -> None:
        while os.path.exists(self.flag):
            time.sleep(0.1)


def test_a_probe_that_hangs_is_abandoned_at_its_deadline(
    small_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "PROBE_BATCH_TIMEOUT_S", 3.0)
    flag = tmp_path / "hang"
    loader = DataLoader(
        _folder(small_set),
        batch_size=4,
        num_workers=1,
        persistent_workers=False,
        worker_init_fn=HangsInProbe(str(flag)),
        multiprocessing_context="fork",
    )
    model = torch.nn.Linear(3 * 16 * 16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.perf_counter()
    with _watch() as w:
        it = iter(loader)
        for i in range(12):
            x, y = next(it)
            if i == 9:
                flag.touch()  # the user's worker is past its init; the probe's will hang
            loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    flag.unlink()
    assert time.perf_counter() - t0 < 40
    err = w.watcher.probes.get("error", "")
    assert err.startswith("the probe was abandoned: at 1 worker(s) no batch came within 3 s"), (
        w.watcher.probes
    )
    r = w.result()
    assert any("abandoned" in n for n in (r.script.probe_notes if r.script else ()))


def test_persistent_forked_workers_get_probe_workers_from_a_fork_server(small_set: Path) -> None:
    ds = _folder(small_set)
    loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
    settings = ioprof.observe.recorder.loader_settings(loader)
    context, note = probe.start_method(loader, settings, ds)
    assert context.get_start_method() == "forkserver" and "fork server" in note
    plain = DataLoader(ds, batch_size=4, num_workers=2)  # forks every pass, as the probe would
    context, note = probe.start_method(plain, ioprof.observe.recorder.loader_settings(plain), ds)
    assert context is None and note == ""
    lam = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True, collate_fn=lambda b: b)
    context, note = probe.start_method(lam, ioprof.observe.recorder.loader_settings(lam), ds)
    assert context is None and "cannot be sent to another process" in note


_COUNTED = """
import os, sys
with open(os.environ["IMPORTS_LOG"], "a") as f:
    f.write(f"{os.getpid()}\\n")


class Pids:
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return os.getpid()
"""

_PROBE_START = """
import os, sys
from torch.utils.data import DataLoader
import counted
from ioprof.observe import probe, recorder

if __name__ == "__main__":
    ds = counted.Pids()
    loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
    context, note = probe.start_method(loader, recorder.loader_settings(loader), ds)
    it = iter(DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=context))
    workers = {int(p) for _ in range(6) for p in next(it)}
    print(context.get_start_method(), os.getpid(), *sorted(workers))
"""


def test_a_fork_server_imports_the_datasets_modules_once_for_all_its_workers(tmp_path: Path) -> None:
    """Each worker a fork server forks unpickles the dataset: without the server importing its
    modules first, every worker imports them again (timm's: seconds each, on the user's pause). A
    fresh interpreter, so that no fork server of this test run is already running."""
    import subprocess
    import sys

    (tmp_path / "counted.py").write_text(_COUNTED)
    (tmp_path / "start.py").write_text(_PROBE_START)
    log = tmp_path / "imports.log"
    p = subprocess.run(
        [sys.executable, str(tmp_path / "start.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "IMPORTS_LOG": str(log), "PYTHONPATH": f"{tmp_path}:{os.getcwd()}"},
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    method, main, *workers = (int(x) if x.isdigit() else x for x in p.stdout.split())
    imported = [int(x) for x in log.read_text().split()]
    assert method == "forkserver" and len(workers) == 2
    # the training process, then the fork server, once: no worker imported it
    assert imported[0] == main and len(imported) == 2 and not set(imported) & set(workers), (
        imported,
        workers,
    )


def test_the_modules_to_preload_are_those_the_pickle_names() -> None:
    import pickle

    from torchvision import transforms

    handed = (transforms.Compose([transforms.ToTensor()]), len, os.path.join)
    names = probe.modules_to_preload(pickle.dumps(handed, protocol=2, fix_imports=False))
    assert names == ["posixpath", "torch.utils.data", "torchvision.transforms.transforms"]


def _noisy(loader: str, workers: int, img_per_s: float, seconds: float, spread: float) -> DecodeCeiling:
    """A decode reading of ``seconds`` whose batches of 8 arrive around ``img_per_s``, each
    batch's time off by up to ± ``spread`` of it, swinging slowly (the same at every call)."""
    span = 8 / img_per_s
    n = max(20, round(seconds / span))
    spans = tuple(span * (1 + spread * math.sin(9.0 * i / n)) for i in range(n))  # a slow swing
    return replace(
        builders.decode(loader, workers, img_per_s, batches=n),
        img_per_s=8 * n / sum(spans),
        elapsed_s=sum(spans),
        batch_s=spans,
        looks=LOOKS,
    )


def _drifting(
    pace_at: Callable[[float], float],
) -> tuple[list[tuple[int, str, float, bool]], Callable[[int, str, float, bool], DecodeCeiling]]:
    """A reader of one process (100 img/s), two (200) and two threads (190: the work releases the
    GIL) on a host whose pace at second t is ``pace_at(t)``: each reading at the mean pace of the
    seconds it took, read one after another. Returns the calls it got and the reader."""
    calls: list[tuple[int, str, float, bool]] = []
    clock = [0.0]

    def read(w: int, kind: str, s: float, early: bool) -> DecodeCeiling:
        calls.append((w, kind, s, early))
        t0, clock[0] = clock[0], clock[0] + s
        pace = sum(pace_at(t0 + s * (i + 0.5) / 20) for i in range(20)) / 20
        if kind == "threads":
            return _noisy("threads", w, 190.0 * pace, s, 0.02)
        return _noisy("multiprocess" if w else "serial", w, (200.0 if w else 100.0) * pace, s, 0.02)

    return calls, read


def _slowing(t: float) -> float:
    """A host that slows steadily, from its full pace to half over 12 s."""
    return 1.0 - 0.5 * t / 12.0


def test_threads_are_read_in_a_palindrome_so_a_drifting_host_moves_every_reading_alike() -> None:
    """The host slows steadily, from its full pace to half over the probe's 12 s. Read one after
    another, the threads (last, at two thirds of the pace the first reading had) fall below midway
    between one process and two: "holds-the-gil", the wrong call. Read there and back, each
    reading's halves pooled, all three are centred on the same moment: "releases-the-gil"."""
    readings = [(0, "processes"), (2, "processes"), (2, "threads")]
    calls, read = _drifting(_slowing)
    decode: list[DecodeCeiling] = []
    probe._read_decode(decode, readings, 12.0, read)
    order = [(w, k) for w, k, _, _ in calls]
    assert order == [*readings, *reversed(readings)]
    assert [s for _, _, s, _ in calls] == pytest.approx([2.0] * 6)  # each reading two shares of 12 s
    assert not any(e for _, _, _, e in calls)  # every half its whole share: symmetric about the middle
    assert [(d.loader, d.workers) for d in decode] == [("serial", 0), ("multiprocess", 2), ("threads", 2)]
    one = decode[0]  # pooled: both halves' batches
    assert one.elapsed_s == pytest.approx(sum(one.batch_s)) and len(one.batch_s) >= 2 * 20
    x = threads_against_processes(DatasetCeilings("d", tuple(decode), ()))
    assert x is not None and x.call == "releases-the-gil", x
    # the same drift, the same seconds, read one after another: the wrong call
    _, read = _drifting(_slowing)
    in_turn = tuple(read(w, k, 4.0, False) for w, k in readings)
    wrong = threads_against_processes(DatasetCeilings("d", in_turn, ()))
    assert wrong is not None and wrong.call == "holds-the-gil", wrong


def test_without_threads_the_readings_share_the_seconds_in_turn() -> None:
    """No threads read (a loader of one worker, or an iterable dataset): each reading in turn, and
    what one did not need (its interval narrow early) left to those after it."""
    calls, read = _drifting(lambda t: 1.0)
    decode: list[DecodeCeiling] = []
    probe._read_decode(decode, [(0, "processes"), (1, "processes"), (2, "processes")], 12.0, read)
    assert [(w, e) for w, _, _, e in calls] == [(0, True), (1, True), (2, True)] and len(decode) == 3
    assert calls[0][2] == pytest.approx(4.0)


_TRAINS_WITH_PERSISTENT_FORKED_WORKERS = """
import sys
import psutil, torch
from torchvision import datasets, transforms
from ioprof.observe.watch import Watch
from ioprof.observe.watching import WatchConfig


def servers():
    return [c.pid for c in psutil.Process().children() if "forkserver" in " ".join(c.cmdline())]


if __name__ == "__main__":
    ds = datasets.ImageFolder(sys.argv[1], transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()]))
    loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2, persistent_workers=True)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Watch(None, WatchConfig(warmup_steps=2, steps=5, seconds=None, probe_seconds=2.0)) as w:
        for epoch in range(3):
            for x, y in loader:
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            print("epoch", epoch, "servers", *servers(), flush=True)
    print("probe", w.result().script.probe_fork_server_stopped, w.result().script.probe_start)
"""


def test_the_fork_server_started_for_the_probe_is_stopped_once_it_is_done(
    small_set: Path, tmp_path: Path
) -> None:
    """Persistent workers forked before training get probe workers from a fork server, which
    imports torch and the dataset's modules (about half a GB): ioprof started it, so it stops it
    once the probe's workers are done, and the training goes on without it. Read from the process
    table after each epoch, in a fresh interpreter (no fork server of this test run running)."""
    import subprocess
    import sys

    (tmp_path / "train.py").write_text(_TRAINS_WITH_PERSISTENT_FORKED_WORKERS)
    p = subprocess.run(
        [sys.executable, str(tmp_path / "train.py"), str(small_set)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    epochs = [x.split("servers")[1].split() for x in lines if x.startswith("epoch ")]
    assert len(epochs) == 3 and epochs[-1] == [], lines  # none left beside the training
    probe_start = next(x for x in lines if x.startswith("probe "))
    assert probe_start.startswith("probe True its workers were started by a fork server"), lines


def test_a_probes_ceilings_with_workers_keep_the_batches_their_workers_made(small_set: Path) -> None:
    """The pipeline measured alone keeps each batch its workers made, with its cycle, as a sweep's
    decode ceiling does: where its window holds few turns of them its interval rests on those
    batches (on an H200, `run`'s ceiling at 16 workers held 6 turns and read ± 44 %; its workers'
    batches were timed and dropped). Broken once — none kept — each ceiling had none."""
    loader = DataLoader(_folder(small_set), batch_size=2, shuffle=True, num_workers=2)
    model = torch.nn.Linear(3 * 16 * 16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with _watch() as w:
        _steps(loader, model, opt, 24)
        _steps(loader, model, opt, 1)
    r = w.result()
    with_workers = [d for d in r.ceilings[0].decode if d.loader == "multiprocess"]
    assert with_workers, r.ceilings[0].decode
    for d in with_workers:
        # the workers made what the loop took in its window, give or take the batches in flight at
        # either edge (prefetch_factor 2 a worker), in each of the two readings pooled (threads are
        # read too: a palindrome of readings)
        assert abs(len(d.produced) - len(d.batch_s)) <= 2 * 2 * d.workers, (len(d.produced), len(d.batch_s))
        assert all(n == 2 and making > 0 for _, making, n in d.produced), d.produced
