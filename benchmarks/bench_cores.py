"""The cores figure of a watched loop against the kernel's own counts, trial after trial (needs
root: a cgroup).

Not a test: it prints and saves its figures (reports/benchmarks/cores_accuracy.json). The loop is
the cores test's own (``tests/unit/observe/test_cores.py``): an ImageFolder of 48 small JPEGs (ten
rounds of it a pass), two workers kept from pass to pass, or a stream whose two workers start again
at every pass; 8 s of
window under ``ioprof.watch()``. Its truths, over the very spans ioprof read: the CPU time the
kernel charged to a cgroup holding this process and its workers alone (nanoseconds), and the
machine's ``/proc/stat`` (busy ticks, sampled).

    sudo python benchmarks/bench_cores.py [--trials 5]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))
sys.path.insert(0, str(REPO / "tests" / "unit" / "observe"))

import figures  # noqa: E402
import paths  # noqa: E402
from groundtruth import CpuGroup, ProcStat  # noqa: E402
from test_cores import _passes, _train  # noqa: E402  (the test's own loop, not a copy)


def _trial(folder: Any, persistent: bool, group: CpuGroup) -> dict[str, float]:
    import torch

    import ioprof

    data = _passes(folder, persistent)
    loader = torch.utils.data.DataLoader(
        data, batch_size=8, shuffle=True if persistent else None, num_workers=2, persistent_workers=persistent
    )
    from ioprof.observe import observer

    at_readings: dict[float, float] = {}  # a reading's wall time → the cgroup's CPU then
    read = observer.Watcher.read_counters

    def read_counters(self: Any, *a: Any, **kw: Any) -> Any:
        before = group.cpu_s()
        r = read(self, *a, **kw)
        at_readings[r.wall_s] = (before + group.cpu_s()) / 2
        return r

    with contextlib.ExitStack() as held:
        held.enter_context(group.holding_this_process())
        held.callback(setattr, observer.Watcher, "read_counters", read)
        observer.Watcher.read_counters = read_counters  # type: ignore[method-assign]
        with (
            ProcStat(group=group) as kernel,
            ProcStat() as machine,
            ioprof.watch(steps=100_000, seconds=8.0, probe=False) as w,
        ):
            _train(loader, seconds=10.0)
        del loader
        gc.collect()
    spans = w.watcher.observation()["loaders"][0]["cpu"]["spans_wall"]
    (cell,) = w.result().cells
    cores = cell.inside.cores if cell.inside else None
    assert cores is not None and cores.cpu_busy_cores is not None
    return {
        "ioprof_cores": round(cores.cpu_busy_cores, 4),
        "cgroup_cores": round(kernel.busy_cores_over(spans), 4),
        "proc_stat_cores": round(machine.busy_cores_over(spans), 4),
        "cgroup_at_readings_cores": round(
            sum(at_readings[b] - at_readings[a] for a, b in spans) / sum(b - a for a, b in spans), 4
        ),
        "window_s": round(cores.window_s, 2),
        "spans": len(spans),
    }


def _summary(rows: list[dict[str, float]]) -> dict[str, Any]:
    off = [r["ioprof_cores"] / r["cgroup_cores"] - 1 for r in rows]
    stat = [r["proc_stat_cores"] / r["cgroup_cores"] - 1 for r in rows]
    exact = [r["ioprof_cores"] / r["cgroup_at_readings_cores"] - 1 for r in rows]
    return {
        "ioprof_vs_cgroup_at_readings": [round(x, 4) for x in exact],
        "ioprof_vs_cgroup": [round(x, 4) for x in off],
        "ioprof_vs_cgroup_mean": round(statistics.mean(off), 4),
        "ioprof_vs_cgroup_worst": round(max(off, key=abs), 4),
        "proc_stat_vs_cgroup_mean": round(statistics.mean(stat), 4),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    group = CpuGroup.make()
    if group is None:
        print("bench_cores: no cgroup can be made here (needs root)", file=sys.stderr)
        return 2
    group.remove()  # each trial makes its own: a group is removed as its process leaves it
    from torchvision import datasets, transforms

    from ioprof.datasets.synth import DatasetSpec, generate

    runs: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "small"
        generate(DatasetSpec(*paths.SMALL_SET), root)
        folder = datasets.ImageFolder(
            str(root), transforms.Compose([transforms.RandomResizedCrop(64), transforms.ToTensor()])
        )
        for name, persistent in (("persistent workers", True), ("workers started again each pass", False)):
            runs[name] = []
            for _ in range(args.trials):
                trial = CpuGroup.make()
                assert trial is not None
                runs[name].append(_trial(folder, persistent, trial))
                print(name, runs[name][-1], flush=True)
    figures.save(
        {
            "benchmark": "cores busy of a watched loop (2 workers, 8 s windows) against its cgroup's CPU time "
            "and /proc/stat over the same spans",
            "command": "python benchmarks/bench_cores.py --trials N",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} usable cores",
            "summary": {name: _summary(rows) for name, rows in runs.items()},
            "runs": runs,
        },
        REPO / "reports" / "benchmarks" / "cores_accuracy.json",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
