"""Epoch boundaries (``ioprof run``): what a loader's workers cost at the start of every pass, and
what a loop pays that takes its batches from fresh iterators.

A DataLoader without ``persistent_workers`` starts its workers again at every ``iter()``: forked
or spawned, the dataset sent to each (pickled, under spawn and forkserver), each worker's imports
and ``worker_init_fn`` run again, before the first batch can be made. Persistent workers skip all of
it: a new pass waits only for one batch made. So each pass after the first is read from ``iter()``
to its first batch, less one worker's time to make a batch (its batch of samples at the median
sample's time the look inside measured in the workers), and at its end the call that ran it out
(where the workers are stopped and joined, which kept workers never pay); that cost is weighed
against the pass's own time, with its 95 % interval over the passes; the first pass is left out
(workers start there either way).
"""

from __future__ import annotations

from ioprof.core.findings import EpochStartCost, Finding, FreshIterators
from ioprof.core.results import CellResult, SweepResult
from ioprof.core.results_run import ObservedLoader, PassStart
from ioprof.core.stats import ratio_interval
from ioprof.core.thresholds import MODERATELY_INPUT_BOUND_SHARE


def epoch_starts(result: SweepResult) -> tuple[Finding, ...]:
    """Loaders whose restarted workers cost, at the interval's low end, at least as much of each
    pass as makes a loop moderately input-bound (TensorFlow's 5 %)."""
    if result.kind != "run":
        return ()
    cells = {c.dataset: c for c in result.cells if c.status == "ok"}
    found = [cost_of(lo, cells[lo.key]) for lo in result.loaders if lo.key in cells]
    return tuple(f for f in found if f is not None and f.share_low >= MODERATELY_INPUT_BOUND_SHARE)


def cost_of(lo: ObservedLoader, cell: CellResult) -> EpochStartCost | None:
    """What each later pass's start cost a loader with workers started again at every pass, or
    None: persistent workers, no workers, fewer than two later passes timed whole, or no batch
    time measured in its workers."""
    stages = cell.inside.stages if cell.inside is not None else None
    later = [p for p in lo.pass_starts[1:] if p.pass_s is not None and p.pass_s > 0]
    if lo.persistent_workers or not lo.num_workers or len(later) < 2 or stages is None:
        return None
    # a batch as a persistent worker makes it at a pass's start: typical samples (the median; the
    # mean would hold each life's own slow start, the very cost being measured)
    per_sample = stages.per_sample.p50_s if stages.per_sample is not None else stages.worker_s_per_sample
    batch_s = (lo.batch_size or cell.batch_size) * per_sample
    # and its end: the call that ran the pass out stopped and joined the workers
    costs = [max(0.0, p.first_batch_s - batch_s) + p.stop_s for p in later]
    return EpochStartCost(
        dataset=lo.key,
        workers=lo.num_workers,
        start_method=lo.start_method,
        passes=len(later),
        batch_s=batch_s,
        cost_s=sum(costs) / len(later),
        sent_bytes=lo.sent_bytes,
        sent_s=lo.sent_s,
        sent_whole=lo.sent_whole,
        **_means(later),
        **_share(costs, later),
    )


def _loop_s(p: PassStart) -> float:
    """A pass as the loop lived it: from iter() to its end, ioprof's own time taken off."""
    return (p.pass_s or 0.0) - p.own_s


def _means(passes: list[PassStart]) -> dict[str, float]:
    """The passes' mean start inside iter(), first batch, stop and length."""
    n = len(passes)
    return {
        "startup_s": sum(p.startup_s for p in passes) / n,
        "first_batch_s": sum(p.first_batch_s for p in passes) / n,
        "stop_s": sum(p.stop_s for p in passes) / n,
        "pass_s": sum(_loop_s(p) for p in passes) / n,
    }


def _share(costs: list[float], passes: list[PassStart]) -> dict[str, float]:
    """The costs over the passes' own time, with its 95 % interval over the passes."""
    share = ratio_interval(costs, [_loop_s(p) for p in passes])
    return {
        "share": share.value,
        "share_low": share.low if share.known else 0.0,
        "share_high": share.high if share.known else 1.0,
    }


def fresh_iterators(result: SweepResult) -> tuple[Finding, ...]:
    """Loaders that never held a pass long enough for a window, whose passes' first batches cost,
    at the interval's low end, at least as much of the loop's time as makes it moderately
    input-bound: the loop took every batch from a fresh iterator (or nearly)."""
    if result.kind != "run":
        return ()
    measured = {c.dataset for c in result.cells if c.status == "ok"}
    found = [fresh_cost(lo) for lo in result.loaders if lo.key not in measured]
    return tuple(f for f in found if f is not None and f.share_low >= MODERATELY_INPUT_BOUND_SHARE)


def fresh_cost(lo: ObservedLoader) -> FreshIterators | None:
    """What each pass's wait for its first batch cost a loader whose passes all held fewer batches
    than a window needs, or None: fewer than three passes timed to their end that the loop let go
    before they ran out, or a pass as long as a window. Every batch such a loop takes is among its
    pass's first; the wait before the first, and the workers' stop where the loop let the iterator
    go, are what a kept iterator would not pay (its workers already running, their batches made
    ahead), counted whole: the loop's own time, no figure of the workers' needed. A pass the loop
    took whole is no fresh iterator, however short (an evaluation set of two batches): another
    iterator is the only way to a next epoch."""
    ended = [p for p in lo.pass_starts if p.pass_s is not None and p.pass_s > 0 and not p.ran_out]
    most = max((p.batches for p in lo.pass_starts), default=0)
    if len(ended) < 3 or most >= lo.measured_batches_needed:
        return None
    # the loader's part of a pass: its first batch, and its workers stopped where the loop let the
    # iterator go
    return FreshIterators(
        dataset=lo.key,
        workers=lo.num_workers,
        persistent=lo.persistent_workers,
        passes=len(ended),
        batches=sum(p.batches for p in ended),
        most_in_a_pass=most,
        pass_holds=lo.batches_per_pass,
        **_means(ended),
        **_share([p.first_batch_s + p.stop_s for p in ended], ended),
    )
