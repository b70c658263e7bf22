"""What a look inside the loader concludes (pure): the costliest stage, how many workers fit in
RAM and in /dev/shm, memory that grows per sample, and threads beyond the cores.

Worker memory at ``w`` workers: each worker's own memory (USS) plus its growth over the samples
it produces in an epoch (the dataset ÷ ``w``; with persistent workers each may touch it all),
plus ``w`` × ``prefetch_factor`` batches in /dev/shm (tmpfs: RAM too) — against the RAM
available now plus what the running workers already hold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ioprof.conclude.stalls import pace_limits
from ioprof.core.counts import MACHINE_WIDE_FETCH_METHODS
from ioprof.core.findings import (
    Advice,
    CoresOversubscribed,
    Finding,
    ShmTooSmall,
    SlowSamples,
    WorkerMemoryGrows,
    WorkersDoNotFit,
)
from ioprof.core.inside import WAITING_FOR_A_CORE, StageTime, WorkerMemory
from ioprof.core.results import CellResult, DatasetCeilings, SweepResult
from ioprof.core.thresholds import MODERATELY_INPUT_BOUND_SHARE, TRAINING_EPOCHS_AT_MOST

MAX_WORKERS_CHECKED = 256


def leading_stage(cell: CellResult) -> StageTime | None:
    """The costliest stage of a cell's workers (one the user can act on), if it was timed."""
    stages = cell.inside.stages if cell.inside is not None else None
    return stages.leading() if stages is not None else None


def waited_for_core(cell: CellResult) -> float | None:
    """The share of a cell's workers' time per sample they waited for a core (None: not measured)."""
    stages = cell.inside.stages if cell.inside is not None else None
    if stages is None or not any(s.name == WAITING_FOR_A_CORE for s in stages.worker):
        return None
    return stages.share_of(WAITING_FOR_A_CORE)


def _growth_per_sample(m: WorkerMemory) -> float:
    return (m.growth_bytes_per_1000_samples or 0.0) / 1000 if m.grows else 0.0


def worker_peak_bytes(m: WorkerMemory, workers: int) -> float:
    """What one of ``workers`` workers holds at the end of an epoch. Workers forked again each epoch:
    the most one reached at its life's end (``life_peak_bytes``), moved to ``workers``' share of an
    epoch at their lives' slope. Otherwise its own memory now, and its growth over the samples it
    loads in an epoch (all of them, where persistent workers each touch the whole dataset)."""
    samples = m.samples_per_epoch or 0
    if not m.persistent_workers and m.life_peak_bytes is not None:
        # measured at the end of each life, moved to another count's share at the lives' own slope
        # (as read, where no life was read past its warm-up: at least that)
        more = samples / max(1, workers) - samples / max(1, m.workers)
        return max(0.0, m.life_peak_bytes + (m.life_growth_per_sample or 0.0) * more)
    touched = (m.dataset_samples or samples) if m.persistent_workers else samples / max(1, workers)
    return (m.worker_uss_bytes or 0) + _growth_per_sample(m) * touched


def ram_need_bytes(m: WorkerMemory, workers: int) -> int:
    """RAM ``workers`` workers take over an epoch, with their batches in /dev/shm."""
    return round(workers * worker_peak_bytes(m, workers) + m.batch_bytes * m.prefetch_factor * workers)


def max_workers_ram(m: WorkerMemory) -> int | None:
    """The most workers whose memory fits in RAM (None: no worker was measured)."""
    if not m.workers or not m.worker_uss_bytes:
        return None
    budget = m.ram_available_bytes + m.workers * m.worker_uss_bytes + m.shm_in_flight_bytes
    fit = 0
    for w in range(1, MAX_WORKERS_CHECKED + 1):
        if ram_need_bytes(m, w) > budget:
            break
        fit = w
    return fit


def max_workers_shm(m: WorkerMemory) -> int | None:
    """The most workers whose batches in flight fit in /dev/shm (None: nothing to check)."""
    if m.shm_free_bytes is None or not m.batch_bytes or not m.prefetch_factor:
        return None
    return int(m.shm_free_bytes // (m.batch_bytes * m.prefetch_factor))


def findings(result: SweepResult, advice: Sequence[Advice]) -> tuple[Finding, ...]:
    asked = {a.dataset: a.workers_needed for a in advice if a.workers_needed}
    out: list[Finding] = []
    s = result.script
    if s is not None and s.shm_failure:
        out.append(ShmTooSmall(s.shm_failure, failed=True))
    elif s is not None:
        out.extend(ShmTooSmall(line, failed=False) for line in s.shm_warnings)
    ceilings = {c.dataset: c for c in result.ceilings}
    for cell in result.cells:
        if cell.status != "ok" or cell.inside is None:
            continue
        out.extend(_cores(cell))
        out.extend(_slow_samples(cell, storage_headroom(cell, ceilings.get(cell.dataset))))
        if cell.inside.memory is not None and cell.workers:
            out.extend(_memory(cell, cell.inside.memory, asked.get(cell.dataset)))
    return tuple(_once(out))


def _once(found: list[Finding]) -> list[Finding]:
    """One finding of a kind per dataset: the sweep's cells of one dataset repeat it."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in found:
        key = (f.kind, getattr(f, "dataset", ""))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _cores(cell: CellResult) -> list[Finding]:
    c = cell.inside.cores if cell.inside is not None else None
    if c is None or c.cpu_busy_cores is None or not c.oversubscribed:
        return []
    v = cell.verdict
    waits = pace_limits(cell)
    if waits and v is not None and v.bottleneck in ("storage", "transfer"):
        waits = None  # it waits for its bytes, where fewer threads would lose reads in flight
    return [
        CoresOversubscribed(
            cell.dataset,
            cell.setting.label,
            c.threads_busy,
            c.affinity_cores,
            c.cpu_busy_cores,
            c.intra_op_threads,
            c.ranks_on_host,
            c.workers,
            c.threads_per_worker,
            c.pin_memory_thread,
            the_limit=waits,
            runq_share=c.runq_share,
        )
    ]


def storage_headroom(cell: CellResult, ceilings: DatasetCeilings | None) -> float | None:
    """The share of the loop's time its storage could have saved it, delivering at its ceiling
    rather than at the rate it was fetched at (1 − fetched ÷ the ceiling at the cell's readers);
    math.inf where the loader was seen reading from no storage (no file, no connection of its
    own) or drew none of its bytes from one; None where either rate is unknown."""
    if cell.fetched.no_source or cell.fetched.bytes == 0:
        return math.inf
    s = ceilings.storage_for(cell) if ceilings is not None else None
    fetched = cell.fetched_mb_per_s()
    if s is None or fetched is None or s.read_mb_per_s <= 0:
        return None
    # a count of the whole host's bytes against the storage's for all its readers; a process's
    # own against its share
    whole = cell.fetched.method in MACHINE_WIDE_FETCH_METHODS
    ceiling = s.read_mb_per_s if whole else s.read_mb_per_s / max(1, s.shared_by)
    return max(0.0, 1.0 - fetched / ceiling)


def _slow_samples(cell: CellResult, headroom: float | None) -> list[Finding]:
    """Slow samples, said where even the low end of what they cost the loop by themselves is as
    much of its time as makes a loop moderately input-bound: removing them alone would lift it by
    that much. By themselves: their work on a CPU, and their time off one only up to what the
    storage could have given (``SlowWait.own``): a wait for bytes from a storage at its limit
    moves to the next sample that reads, it does not leave with the sample."""
    stages = cell.inside.stages if cell.inside is not None else None
    t = stages.per_sample if stages is not None else None
    s = t.slow if t is not None else None
    if stages is None or t is None or s is None:
        return []
    loop, wait = s.own(headroom)
    if not loop.known or loop.low < MODERATELY_INPUT_BOUND_SHARE:
        return []
    return [
        SlowSamples(
            cell.dataset,
            cell.setting.label,
            s.slow,
            s.samples,
            s.fence_s,
            s.median_s,
            (loop.value, loop.low, loop.high),
            (wait.value, wait.low, wait.high),
            t.slowest,
            queued=stages.share_of(WAITING_FOR_A_CORE),
            unordered_saves=s.unordered_saves,
        )
    ]


def _memory(cell: CellResult, m: WorkerMemory, advised: int | None) -> list[Finding]:
    workers = max(cell.workers, advised or 0)
    out: list[Finding] = []
    per_sample = _growth_per_sample(m)
    if m.persistent_workers:
        out.extend(_kept_across_epochs(cell, m, workers))
    # a worker forked again each epoch exits at its end: what it grew by inside that life is in
    # its peak (``worker_peak_bytes``, said where the workers would not fit), never a leak; only
    # copy-on-read, named by the dataset's own objects, is a growth its reader can act on
    elif (
        m.growth_cause == "copy-on-read"
        and per_sample
        and m.samples_per_epoch
        and m.growth_low is not None
        and m.growth_high is not None
    ):
        epoch = per_sample * m.samples_per_epoch * (workers if m.persistent_workers else 1)
        out.append(
            WorkerMemoryGrows(
                cell.dataset,
                cell.setting.label,
                per_sample * 1000,
                m.growth_low,
                m.growth_high,
                workers,
                round(epoch),
                m.samples_per_epoch,
                m.persistent_workers,
                cause=m.growth_cause or "unknown",
                dataset_objects=m.dataset_objects,
                samples=m.growth_samples,
            )
        )
    ram, shm = max_workers_ram(m), max_workers_shm(m)
    if (ram is not None and workers > ram) or (shm is not None and workers > shm):
        out.append(
            WorkersDoNotFit(
                cell.dataset,
                workers,
                workers != cell.workers,
                ram,
                shm,
                ram_need_bytes(m, workers),
                m.ram_available_bytes,
                m.batch_bytes * m.prefetch_factor * workers,
                m.shm_free_bytes,
            )
        )
    return out


def _kept_across_epochs(cell: CellResult, m: WorkerMemory, workers: int) -> list[Finding]:
    """Persistent workers that hold more at the same point of each epoch than of the last: what
    they keep from one epoch to the next, and how many epochs the RAM there is lasts at that rate.
    Judged across epochs only: a slope inside one window mixes what a worker takes on and gives
    back within every epoch with what it keeps. Said only where the RAM there is would be full within
    ``TRAINING_EPOCHS_AT_MOST`` epochs even at the growth's low end: a loader that will not run out
    gets no warning."""
    if not m.grows_per_epoch or m.epoch_growth_bytes is None:
        return []
    assert m.epoch_growth_low is not None and m.epoch_growth_high is not None
    if m.ram_available_bytes / (m.epoch_growth_low * workers) > TRAINING_EPOCHS_AT_MOST:
        return []  # the RAM outlasts any training at that rate: said in the look inside, not warned of
    per_sample = m.epoch_growth_bytes / max(1.0, (m.samples_per_epoch or 0) / max(1, m.workers))
    return [
        WorkerMemoryGrows(
            cell.dataset,
            cell.setting.label,
            per_sample * 1000,
            m.growth_low if m.growth_low is not None else per_sample * 1000,
            m.growth_high if m.growth_high is not None else per_sample * 1000,
            workers,
            round(m.epoch_growth_bytes * workers),
            m.samples_per_epoch or 0,
            True,
            cause="copy-on-read" if m.growth_cause == "copy-on-read" else "leak",
            dataset_objects=m.dataset_objects,
            samples=m.growth_samples,
            per_epoch_bytes=m.epoch_growth_bytes,
            per_epoch_low=m.epoch_growth_low,
            per_epoch_high=m.epoch_growth_high,
            epochs=m.epochs_seen,
            ram_available_bytes=m.ram_available_bytes,
        )
    ]
