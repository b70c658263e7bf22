"""Threads against processes, measured alone by ``ioprof.watch``'s probe: a pipeline whose work is
in PIL (decode, resize: they release the GIL) runs at once in threads of one process, near the
processes' rate; one with a transform written in Python holds the GIL and takes turns, near one
process's rate — both told so, with the three figures."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from ioprof.conclude.threads import threads_against_processes
from ioprof.observe.watch import Watch
from ioprof.observe.watching import WatchConfig
from ioprof.render.run import render_run_markdown

PYTHON_S = 0.008  # a transform's pure-Python work per sample: it holds the GIL throughout


class InPython:
    """A transform written in Python (a loop over values): the GIL is held while it runs."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        end = time.perf_counter() + PYTHON_S
        n = 0
        while time.perf_counter() < end:
            n += 1
        return x


def _folder(root: Path, python: bool):  # type: ignore[no-untyped-def]
    from torchvision import datasets, transforms

    steps = [transforms.Resize((32, 32)), transforms.ToTensor(), *([InPython()] if python else [])]
    ds = datasets.ImageFolder(str(root), transforms.Compose(steps))
    ds.samples = ds.samples * 10  # 10 times the photographs: passes long enough for a window
    ds.imgs, ds.targets = ds.samples, [t for _, t in ds.samples]
    return ds


@pytest.mark.rig  # two loaders' rates side by side, one after the other: nothing else may run
@pytest.mark.parametrize("python", [False, True], ids=["pil", "python-transform"])
def test_threads_keep_pace_only_where_the_pipeline_releases_the_gil(  # type: ignore[no-untyped-def]
    large_set: Path, small_set: Path, python: bool, figure
) -> None:
    # PIL's work: decoding and resizing 1024x768 photographs; Python's: small photographs (a
    # fraction of a millisecond to decode) behind a transform that holds the GIL for 8 ms
    root = small_set if python else large_set
    loader = DataLoader(_folder(root, python), batch_size=4, shuffle=True, num_workers=2)
    model = torch.nn.Linear(3 * 32 * 32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    # 15 s shared by four readings and one share kept back: where the call is undecided, the reading
    # that widens it most is read again (CI once saw PIL's threads at 159 [135-183] against one
    # process 98 and two 175, all in one share each: undecided)
    with Watch(None, WatchConfig(steps=12, seconds=None, probe=True, probe_seconds=15.0)) as w:  # type: ignore[arg-type]
        for x, y in loader:  # one whole pass: the probe runs at its end
            loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    r = w.result()
    (dc,) = r.ceilings
    x = threads_against_processes(dc)
    assert x is not None and x.workers == 2, ([(d.loader, d.workers) for d in dc.decode], r.script)
    text = render_run_markdown(r)
    figure(
        f"threads, {'a Python transform' if python else 'PIL decode'}: one process {x.one.value:.0f} "
        f"[{x.one.low:.0f}-{x.one.high:.0f}], 2 processes {x.processes.value:.0f} [{x.processes.low:.0f}-"
        f"{x.processes.high:.0f}], 2 threads {x.threads.value:.0f} [{x.threads.low:.0f}-{x.threads.high:.0f}] img/s"
    )
    # Never the wrong call. A right one where the readings allow it: they are measured one after
    # another, and this host's pace moves between them (CI read PIL's processes at 159 and 180,
    # its threads at 182 and 150, in two runs), which their intervals do not hold — then the
    # call is "undecided", and the threads' rate still lies on its side of the other reading.
    if python:
        assert x.call in ("holds-the-gil", "undecided") and x.threads.high < x.processes.low, x
        if x.call == "holds-the-gil":
            assert "threads will not help; keep worker processes" in text
    else:
        assert x.call in ("releases-the-gil", "undecided") and x.threads.low > x.one.high, x
        if x.call == "releases-the-gil":
            assert "its work releases the GIL" in text and 'method="thread"' in text
