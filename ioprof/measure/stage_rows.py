"""A loader's stage rows read back: each batch its workers made (``stages``), as the producers'
timings of a window (``produced``), its stages' shares with their intervals (``summarize``), and
each sample's time (``sample_times``)."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ioprof.core.handover import PassBatch, SlowWait, far_fence, slow_wait
from ioprof.core.inside import GARBAGE_COLLECTOR, WAITING_FOR_A_CORE, LoaderStages, SampleTimes, StageTime
from ioprof.core.rates import Produced
from ioprof.core.stats import nearest_rank, ratio_interval
from ioprof.measure.stageclock import END
from ioprof.measure.stages import COLLATE, GETITEM, REST_NAMES, ROWS_GLOB


def read_rows(folder: str | Path, tag: int | None = None, ends: bool = False) -> list[dict[str, Any]]:
    """Every complete batch's row in ``folder`` (of one loader's ``tag``), ordered by time; or,
    ``ends``, the rows of no batch, each a process's memory at its life's end (``StageClock.life_end``)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(Path(folder).glob(ROWS_GLOB)):
        with contextlib.suppress(OSError):
            for line in path.read_text(encoding="utf-8").splitlines():
                if ends and f'"{END}"' not in line:  # a batch's row: not parsed for nothing
                    continue
                with contextlib.suppress(ValueError):
                    row = json.loads(line)
                    if (tag is None or row.get("tag") == tag) and bool(row.get(END)) == ends:
                        rows.append(row)
    rows.sort(key=lambda r: r["t"])
    return rows


def produced(folder: str | Path, start_s: float, end_s: float, tag: int = 0) -> tuple[Produced, ...]:
    """Each batch a process of the loader whose rows are in ``folder`` completed between ``start_s``
    and ``end_s``: its cycle — since the same process completed its previous batch, 0 for its
    first —, the seconds its fetch took, and its images (``rates.Produced``)."""
    return produced_in(read_rows(folder, tag), start_s, end_s)


def made_and_work(
    folder: str | Path, start_s: float, end_s: float, workers: int
) -> tuple[tuple[Produced, ...], tuple[float | None, str] | None]:
    """From the window's rows, read once: the batches the workers completed (``produced``; none
    without workers) and the loader's own work a sample took, with how it was timed (``work_in``)."""
    rows = read_rows(folder, 0)
    return (produced_in(rows, start_s, end_s) if workers else ()), work_of(rows, start_s, end_s, workers)


def work_in(
    folder: str | Path, start_s: float, end_s: float, workers: int
) -> tuple[float | None, str] | None:
    """The loader's own work a sample took in the batches its processes completed between
    ``start_s`` and ``end_s`` (``LoaderStages.work_as_timed_s_per_sample``) and how it was timed
    (``LoaderStages.seen``); None where too few were."""
    return work_of(read_rows(folder, 0), start_s, end_s, workers)


def work_of(
    rows: Sequence[dict[str, Any]], start_s: float, end_s: float, workers: int
) -> tuple[float | None, str] | None:
    """``work_in`` from rows already read (``read_rows``, in time order)."""
    timed = summarize(rows, start_s=start_s, end_s=end_s, workers=workers)
    return (timed.work_as_timed_s_per_sample, timed.seen) if timed is not None else None


def produced_in(rows: Sequence[dict[str, Any]], start_s: float, end_s: float) -> tuple[Produced, ...]:
    """``produced`` from rows already read (``read_rows``, in time order)."""
    last: dict[int, float] = {}
    out: list[Produced] = []
    for r in rows:
        pid, t = r["pid"], float(r["t"])
        if start_s <= t <= end_s and r["n"] > 0:
            out.append((t - last[pid] if pid in last else 0.0, float(r["fetch_s"]), int(r["n"])))
        last[pid] = t
    return tuple(out)


def makers(rows: Sequence[dict[str, Any]]) -> int:
    """The processes that made the rows' batches side by side: the workers by their id within the
    loader (torch's ``worker_info.id``), where every row says it — a worker started again for each
    pass is a new process in the same place, not one more beside it —, else by process."""
    if rows and all("worker" in r for r in rows):
        return len({r["worker"] for r in rows})
    return len({r["pid"] for r in rows})


SLOWEST_LISTED = 3


def handover(
    rows: Sequence[dict[str, Any]],
    iters_s: Sequence[float],
    handed: Sequence[tuple[int, int, float, float]],
    window: Sequence[tuple[int, int]],
    workers: int,
    prefetch: int,
) -> SlowWait | None:
    """What the slow samples cost the loop over its window (``core.handover``): the workers' rows
    (each batch with its worker's id and its samples' times) set in order within each pass —
    a pass holds the batches begun after its ``iter()`` (``iters_s``) and before the next's —,
    with the loop's calls for them (``handed``: pass, k, call, return). None where a row does
    not say its worker, or a pass of the window is missing batches."""
    if workers < 1 or prefetch < 1 or not window:
        return None
    rows = [r for r in rows if "worker" in r and r["n"] > 0]
    times = [float(t) for r in rows for t in r.get("sample_s", ())]
    if len(times) < 4:
        return None
    median, fence = far_fence(times)
    cpus = [float(t) for r in rows for t in r.get("sample_cpu_s", ())]
    median_cpu = nearest_rank(sorted(cpus), 0.5) if len(cpus) == len(times) else None
    calls = {(p, k): (c, r) for p, k, c, r in handed}
    wanted = sorted({p for p, _ in window})
    passes: list[list[PassBatch]] = [[] for _ in range(wanted[-1] + 1)]
    slow = samples = 0
    for p in wanted:
        if p >= len(iters_s):
            return None
        end = iters_s[p + 1] if p + 1 < len(iters_s) else math.inf
        own: dict[int, list[dict[str, Any]]] = {}
        for r in rows:
            if iters_s[p] <= r["t"] - r["fetch_s"] < end:
                own.setdefault(int(r["worker"]), []).append(r)
        for made in own.values():
            made.sort(key=lambda r: r["t"])
        for k in range(sum(len(m) for m in own.values())):
            made = own.get(k % workers, [])
            if k // workers >= len(made) or (p, k) not in calls:
                break
            r = made[k // workers]
            spent = [float(t) for t in r.get("sample_s", ())]
            beyond = [t for t in spent if t > fence]
            slow, samples = slow + len(beyond), samples + len(spent)
            call, back = calls[(p, k)]
            start = float(r["t"]) - float(r["fetch_s"])
            excess = sum(t - median for t in beyond)
            own_cpu = _on_cpu_excess(spent, r.get("sample_cpu_s"), fence, median, median_cpu)
            passes[p].append(PassBatch(k % workers, start, float(r["fetch_s"]), excess, call, back, own_cpu))
    return slow_wait(
        passes, window, workers, prefetch, fence_s=fence, median_s=median, slow=slow, samples=samples
    )


def _on_cpu_excess(
    spent: Sequence[float],
    on_cpu: Sequence[float] | None,
    fence: float,
    median: float,
    median_cpu: float | None,
) -> float | None:
    """Of a batch's slow samples' time beyond the median, their own work on a CPU beyond the median
    sample's (None: not told apart)."""
    if median_cpu is None or on_cpu is None or len(on_cpu) != len(spent):
        return None
    return sum(
        max(0.0, min(t - median, float(c) - median_cpu))
        for t, c in zip(spent, on_cpu, strict=True)
        if t > fence
    )


def sample_times(rows: Sequence[dict[str, Any]]) -> SampleTimes | None:
    """Each sample's ``__getitem__`` over the rows (those that timed them): nearest-rank
    percentiles, the slowest 1 %'s share of the time, the slowest batches' slowest samples."""
    times = sorted(float(t) for r in rows for t in r.get("sample_s", ()))
    if len(times) < 2 or sum(times) <= 0:
        return None

    top = max(1, len(times) // 100)
    named = sorted((r["slowest"] for r in rows if r.get("slowest")), key=lambda x: -float(x[1]))
    return SampleTimes(
        samples=len(times),
        p50_s=nearest_rank(times, 0.50),
        p95_s=nearest_rank(times, 0.95),
        p99_s=nearest_rank(times, 0.99),
        max_s=times[-1],
        slowest_share=sum(times[-top:]) / sum(times),
        slowest=tuple((i, float(s), str(n)) for i, s, n in named[:SLOWEST_LISTED]),
    )


def summarize(
    rows: Sequence[dict[str, Any]],
    *,
    start_s: float,
    end_s: float,
    workers: int,
    main: Sequence[tuple[str, Sequence[float]]] = (),
) -> LoaderStages | None:
    """The window's rows (batches that ended within it) as stages with their intervals, costliest
    first; ``main``: (name, seconds per batch) of the training process's stages."""
    rows = [r for r in rows if start_s <= r["t"] <= end_s and r["n"] > 0 and r["fetch_s"] > 0]
    if len(rows) < 2:
        return None
    kinds = {r["seen"] for r in rows}
    seen = kinds.pop() if len(kinds) == 1 else "getitem"
    per_stage = _per_stage(rows, seen)
    n = [float(r["n"]) for r in rows]
    fetch = [float(r["fetch_s"]) for r in rows]
    group = max(1, workers)
    worker = []
    for name, secs in per_stage.items():
        each, share = ratio_interval(secs, n, group), ratio_interval(secs, fetch, group)
        low, high = max(0.0, share.low), min(1.0, share.high)  # a share lies in [0, 1]
        worker.append(
            StageTime(name, "worker", each.value, max(0.0, each.low), each.high, share.value, low, high)
        )
    worker.sort(key=lambda s: -s.s_per_sample)
    total = ratio_interval(fetch, n, group)
    cost = sum(r["calls"] * r["cost_s_per_call"] for r in rows) / sum(n)
    return LoaderStages(
        worker=tuple(worker),
        main=tuple(_main_stage(name, secs) for name, secs in main if secs),
        worker_s_per_sample=total.value,
        worker_low_s=total.low,
        worker_high_s=total.high,
        samples=int(sum(n)),
        batches=len(rows),
        processes=makers(rows),
        seen=seen,
        timing_cost_s_per_sample=cost,
        note=STAGE_NOTES.get(seen, ""),
        per_sample=sample_times(rows),
    )


def _per_stage(rows: Sequence[dict[str, Any]], seen: str) -> dict[str, list[float]]:
    """Each stage's seconds per row (0 where a batch had none), the rest of the fetch apart; the
    fetch's wait for a core and its garbage collections apart too, where they were counted (the
    stages' own times exclude them)."""
    names: list[str] = []
    for r in rows:
        names.extend(k for k in r["stages"] if k not in names)
    out: dict[str, list[float]] = {name: [] for name in names}
    out[COLLATE] = []
    rest_name = REST_NAMES.get(seen, GETITEM)
    out[rest_name] = []
    # a row's fetch (wall clock) is its stages' own times, its wait for a core and the rest; the
    # wait is read on the kernel's clock, and where it claims more than the stages left (their
    # clocks disagree by microseconds) it is held to what they left, so the rest is never negative
    queued, collected = [], []
    for r in rows:
        named = sum(r["stages"].values()) + r["collate_s"]
        q = min(float(r.get("queued_s") or 0.0), max(0.0, r["fetch_s"] - named))
        g = min(float(r.get("gc_s") or 0.0), max(0.0, r["fetch_s"] - named - q))
        queued.append(q)
        collected.append(g)
        for name in names:
            out[name].append(float(r["stages"].get(name, 0.0)))
        out[COLLATE].append(float(r["collate_s"]))
        out[rest_name].append(max(0.0, r["fetch_s"] - named - q - g))
    if sum(queued) > 0:
        out[WAITING_FOR_A_CORE] = queued
    if sum(collected) > 0:
        out[GARBAGE_COLLECTOR] = collected
    return out


STAGE_NOTES = {
    "getitem": "the dataset is not ImageFolder-like (no file loader or transform to time one by one): "
    "only its __getitem__ as a whole and the collate are timed",
    "reads": "the file reads of its reader (timm's) are timed; PIL decodes inside __getitem__, so the decode is "
    "in 'decode + rest of __getitem__'",
    "transforms": "its transforms are timed one by one; the file's read and decode happen inside its own "
    "__getitem__ and are timed together as 'read + decode + rest of __getitem__'",
    "iterator": "the dataset is iterable (a streaming pipeline): its iterator's next sample — reading, "
    "decoding and transforming inside its pipeline — is timed as a whole, with the collate",
}


def _main_stage(name: str, seconds: Sequence[float]) -> StageTime:
    each = ratio_interval(list(seconds), [1.0] * len(seconds))
    return StageTime(name, "main", each.value, each.low, each.high)
