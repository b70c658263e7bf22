"""The time before a window (``ioprof run``): a training loader's first pass, its start and
warm-up included, against the steady state its window measured.

A streaming dataset that downloads its shards before it yields, or a first pass that fills a
local cache, spends its wait before the window opens; the window, after it, sees the steady
state. The pass is judged whole — the time before the window as measured, the rest of the pass at
the window's own pace, its wait within the window's interval — and where the time before the
window holds most of the pass's wait and makes it more input-bound than its window — the pass's
class decided by its interval, the window's not deciding as much by its own — the pass's class is
the verdict, the window's beside it.
"""

from __future__ import annotations

from ioprof.core.findings import FirstPassWaits
from ioprof.core.results import CellResult, SweepResult
from ioprof.core.results_run import ObservedLoader
from ioprof.core.stats import Interval
from ioprof.core.thresholds import classify_input_bound

_RANK = {"not": 0, "moderately": 1, "highly": 2}


def first_pass(result: SweepResult) -> FirstPassWaits | None:
    """The training loader whose first pass is most input-bound beyond its window, or None."""
    if result.kind != "run":
        return None
    cells = {c.dataset: c for c in result.cells if c.status == "ok" and c.steps}
    found = [
        f
        for lo in result.loaders
        if lo.role == "training" and lo.key in cells and (f := _judged(lo, cells[lo.key])) is not None
    ]
    return max(found, key=lambda f: f.pass_share, default=None)


def _judged(lo: ObservedLoader, cell: CellResult) -> FirstPassWaits | None:
    b = lo.before
    if b is None:
        return None
    # a batch of the window, and its wait: at the rate the window delivered (the loop's own, or
    # what the workers made where it drained a queue filled before the window; ``rates``)
    window = cell.wait_share()
    took = cell.delivered()
    unit_s = (sum(cell.wait_s) + sum(cell.step_s)) / cell.steps * (cell.img_per_s / took if took > 0 else 1.0)
    wait_s = unit_s * window.value
    # the pass's length: its loader's len(), or where it has none (an IterableDataset), what the
    # first pass held once it ended — its window can run on into the next pass
    first = lo.pass_starts[0] if lo.pass_starts else None
    ended = first.batches if first is not None and first.pass_s is not None else None
    batches = lo.batches_per_pass or ended or max(b.batches + cell.steps, lo.batches // max(1, lo.passes))
    rest = max(0, batches - b.batches)
    pass_s = b.seconds + rest * unit_s
    pass_wait = b.wait_s + rest * wait_s
    if pass_s <= 0 or b.wait_s < rest * wait_s:  # most of the pass's wait is the window's own
        return None
    share = pass_wait / pass_s
    low, high = _pass_interval(window, b.wait_s, rest * unit_s, pass_s)
    # a verdict to put before the window's only where the pass's class is decided (its interval
    # within one class) and the window's does not decide as much (its low end in a lower class)
    klass, steady = classify_input_bound(low), classify_input_bound(window.low if window.known else 0.0)
    if classify_input_bound(high) != klass or _RANK[klass] <= _RANK[steady]:
        return None
    # whether the processes making its batches were off the CPU (neither on one nor waiting for
    # one: blocked on I/O, asleep, on a lock) most of the time: the training process itself waits
    # for them, blocked, whatever they do. A run read before they were read apart: all processes
    # on a CPU, which counts that wait, and a wait for a core, as off it
    busy, of = b.producers_share, ("workers" if lo.num_workers else "training process")
    if busy is None:
        busy, of = b.busy_share, "processes"
    by = "" if busy is None else ("storage" if busy < 0.5 else "loader")
    if by == "storage" and b.fetched.known and b.fetched.method != "unknown" and not b.fetched.bytes:
        # off the CPU, yet a counter that sees the dataset's storage counted nothing from it:
        # not its storage — workers starting, a download to a local copy, a lock
        by = "start"
    return FirstPassWaits(
        lo.key,
        b.seconds,
        b.first_batch_s,
        b.batches,
        b.wait_s,
        batches,
        pass_s,
        share,
        klass,
        window.value,
        classify_input_bound(window.value),
        busy,
        by,
        b.fetched.bytes,
        b.fetched.method,
        pass_low=low,
        pass_high=high,
        busy_of=of,
    )


def _pass_interval(window: Interval, before_s: float, rest_s: float, pass_s: float) -> tuple[float, float]:
    """The pass's wait share, its 95 % interval: the wait before the window is as it was (once,
    in this run), the rest of the pass waits at the window's share (``window``), known within its
    interval — where it has none, anywhere from no wait to all of it."""
    lo, hi = (window.low, window.high) if window.known else (0.0, 1.0)
    return (before_s + rest_s * max(0.0, lo)) / pass_s, min(1.0, (before_s + rest_s * min(1.0, hi)) / pass_s)
