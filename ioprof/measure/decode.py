"""The decode ceiling: the real loader over an in-memory sample, with no training step.

Decode + augment + collate only, at one loader setting. The files are a sample read into this
process beforehand (``datasets.sample``), because the page cache cannot be trusted to hold them
(FUSE drops pages at every open; a dataset larger than RAM is evicted). After the start-up burst
(one batch per worker arriving together), each batch's arrival time is recorded; the rate and
its 95 % interval rest on those samples, and the probe stops once the interval is within ±5 % at
one of its fixed looks (``stats.is_look``), once it lies wholly above ``DECODE_ABOVE_COMPUTE`` ×
the lower of the compute ceiling and the storage ceiling the cells read through (``above``: decode
cannot be what limits training there), or at its cap.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from ioprof.core.config import DECIDED_REL_HALF_WIDTH, TARGET_REL_HALF_WIDTH, LoaderSetting
from ioprof.core.counts import CacheInfo
from ioprof.core.rates import Produced, loader_rate
from ioprof.core.results import ComputeCeiling, DecodeCeiling, StorageCeiling
from ioprof.core.stats import MIN_BATCHES, Interval, Looks
from ioprof.core.thresholds import DECODE_ABOVE_COMPUTE
from ioprof.host.processes import end_loader_workers
from ioprof.measure import stage_rows, stages
from ioprof.measure.loader import Batch, make_loader, start_loader
from ioprof.measure.sample import MemorySample

# At least this long and this many batches per worker before the interval may stop the probe.
# Half a second holds 12-90 batches of 4 at the default sweep's settings on a 2-core machine, and
# its 12 ceilings lie far above a CPU's compute ceiling by then: a floor of 1 s cost that sweep
# 6 s more (2 s: 12 s more) and told the same (256x192 at 8 workers: 715 and 689 img/s with
# 0.5 s, 734 and 697 with 1 s; 1024x768 serial: 109 and 100 against 113 and 102), only with
# wider intervals around rates 20-130x the compute's.
DECODE_PROBE_MIN_S = 0.5
DECODE_PROBE_MIN_BATCHES_PER_WORKER = 4
DECODE_PROBE_MAX_S = 8.0  # looks at about 1, 2, 4 and 8 s: a ceiling, not a cell, needs no longer
# ... except where its first look's batches take longer: it runs on until they are in, at most this
# many times its cap
DECODE_PROBE_PAST_CAP = 4.0
# A decode ceiling's batch (``probe_batch``): the training's, or fewer images where a turn of the
# workers (one batch each) would take longer than DECODE_PROBE_TURN_S per 8 workers, at the rate per
# reader of the setting measured before it. Its interval rests on whole turns: on an H200 the
# 1024x768 ceilings at a GPU's batch of 256 read ± 28 % to [0-16,355] after their 8 s (two turns of
# 8 workers, 62 img/s each). But never below DECODE_PROBE_MIN_BATCH, and no smaller than the turn
# needs: a batch has costs of its own, whatever its size (likely its hand-over to the main process,
# the storage's descriptor received from the worker: not proven), which the training pays per batch
# of its own size. On an H200 host (16 Xeon cores), 256x192 at 8 workers read 2,346 img/s in
# batches of 32 against 2,773, 2,812 and 2,573 in batches of 64, 128 and 256 (side by side,
# alternating; on another lease 1,910-1,971 against 2,145-2,237 at 256): at 61-73 batches a second,
# 32 read 11-16 % low. At 1 worker (11 a second) and at 1024x768 (15 a second) 32 and 256 agreed
# (0.976 and 1.024). Wherever a rate came before, the rule keeps a ceiling to about 32 batches a
# second (a batch is at least half a turn's worth of one reader's images, a turn half a second per
# 8 workers), and picks 128 at 256x192 and 32 at 1024x768 there (reports/benchmarks/decode_batch.json).
DECODE_PROBE_MIN_BATCH = 32
DECODE_PROBE_TURN_S = 0.5


def _stop_reason(interval: Interval, above: Above | None) -> str:
    """Why a look stops the probe ("" to go on): a narrow interval, one wholly above the rate it
    competes with, or one within ± DECIDED_REL_HALF_WIDTH wholly below every ceiling it competes
    with (``decided``: decode is then the lowest stage whichever end of the interval is true)."""
    if interval.batches < MIN_BATCHES:
        return ""
    if interval.rel_half_width <= TARGET_REL_HALF_WIDTH:
        return "interval"
    if above is not None and interval.known and interval.low >= above.img_per_s:
        return f"above-{above.stage}"
    if (
        above is not None
        and interval.known
        and interval.rel_half_width <= DECIDED_REL_HALF_WIDTH
        and interval.high < above.under_img_per_s
    ):
        return "decided"
    return ""


@dataclass(frozen=True)
class Above:
    """A rate a decode ceiling need not be told apart from once wholly above it, and the stage whose
    ceiling set it (compute or storage); ``under_img_per_s``: the lowest lower end of those ceilings
    (0: none known), below which decode is the bottleneck however its interval narrows."""

    img_per_s: float
    stage: str
    under_img_per_s: float = 0.0


def above_compute(compute: ComputeCeiling | None) -> float | None:
    """The rate a decode ceiling stops at once wholly above: DECODE_ABOVE_COMPUTE × the compute
    ceiling's upper bound (None without a compute ceiling)."""
    if compute is None:
        return None
    high = compute.throughput().high  # a simulated rate is exact; an unknown interval: inf
    return DECODE_ABOVE_COMPUTE * high if math.isfinite(high) else None


def above_for(
    setting: LoaderSetting, compute: ComputeCeiling | None, storage: Sequence[StorageCeiling] = ()
) -> Above | None:
    """What a decode ceiling at ``setting`` may stop above: DECODE_ABOVE_COMPUTE × the lower of the
    compute ceiling and ``storage``'s at the setting's readers (upper bounds of their intervals).
    ``storage``: the ceilings the cells read through (cold or emulated storage), else none — a
    decode ceiling far above the storage the cells wait on cannot be what limits them either."""
    bounds, lows = [], []
    c = above_compute(compute)
    if c is not None and compute is not None:
        bounds.append(Above(c, "compute"))
        lows.append(compute.throughput().low)
    for s in storage:
        if s.files and s.concurrency == setting.concurrency:
            rate = s.file_rate()
            high = rate.high if rate.known else s.img_per_s
            if math.isfinite(high) and high > 0:
                bounds.append(Above(DECODE_ABOVE_COMPUTE * high, "storage"))
                lows.append(rate.low if rate.known else 0.0)
    if not bounds:
        return None
    lowest = min(bounds, key=lambda a: a.img_per_s)
    return replace(lowest, under_img_per_s=max(0.0, min(lows)))


def probe_batch(batch_size: int, setting: LoaderSetting, per_reader_img_per_s: float | None) -> int:
    """The batch a decode ceiling at ``setting`` reads in, for a training batch of ``batch_size``:
    the largest of DECODE_PROBE_MIN_BATCH doubled that is at most the training's and lets a turn of
    the workers last at most DECODE_PROBE_TURN_S (per 8 workers: more workers, more hand-overs a
    turn) at ``per_reader_img_per_s`` — one reader's rate in the setting measured before (None:
    twice the smallest with workers, where a batch is handed over: 64 kept 256x192 at 8 workers
    unbiased on the H200 and a turn at 1024x768 within a second). The serial loader reads at the
    training's batch: side by side with the serial cell, a ceiling in batches of 32 ran up to a
    quarter faster than the cell's own pipeline at 256 did from the page cache, where one in the
    training's batch agreed with it (``reports/benchmarks/decode_batch.json``)."""
    if not setting.workers:
        # the serial loader's images and batch live in the training process, whose per-image cost
        # grows with the batch (the batch's memory, not a hand-over): read at the training's own
        return batch_size
    batch = min(batch_size, DECODE_PROBE_MIN_BATCH)
    if per_reader_img_per_s is None or not math.isfinite(per_reader_img_per_s):
        return min(batch_size, batch * 2)
    fits = per_reader_img_per_s * DECODE_PROBE_TURN_S * max(1.0, setting.workers / 8)
    while batch * 2 <= min(batch_size, fits):
        batch *= 2
    return batch


def probe_looks(setting: LoaderSetting, min_seconds: float, max_seconds: float) -> Looks:
    """When a decode ceiling at ``setting`` looks at its interval: from DECODE_PROBE_MIN_BATCHES_PER_WORKER
    whole turns of the workers, and never before MIN_BATCHES batches — a look the rule cannot stop at
    is none, and the schedule plans its looks from the first one's time: the serial loader's first
    look at 4 batches of 256 (4.2 s at 500x375) left it no other before its 8 s cap, which it then
    always ran to, its interval within ± 5 % by 5 batches."""
    unit = setting.concurrency
    first = max(DECODE_PROBE_MIN_BATCHES_PER_WORKER * unit, math.ceil(MIN_BATCHES / unit) * unit)
    return Looks(first, min_seconds, unit=unit, cap_s=max_seconds)


def warmup_batches(setting: LoaderSetting) -> int:
    """Batches to discard before the loader is in steady state: the first one, or the burst of
    one per worker that arrives together after start-up."""
    return setting.concurrency


def probe_decode(
    sample: MemorySample,
    setting: LoaderSetting,
    *,
    crop_px: int,
    batch_size: int,
    seed: int = 0,
    start_method: str | None = None,
    min_seconds: float = DECODE_PROBE_MIN_S,
    max_seconds: float = DECODE_PROBE_MAX_S,
    above: Above | None = None,
    per_reader_img_per_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> DecodeCeiling:
    """Images per second the loader produces from memory at ``setting``, with raw batch samples.
    ``above``: a rate this ceiling need not be told apart from once its interval lies wholly above
    it (stopped by ``above-compute`` or ``above-storage``). ``per_reader_img_per_s``: one reader's
    rate in the setting measured before, which sets the batch (``probe_batch``)."""
    warm = warmup_batches(setting)
    batch_size = probe_batch(batch_size, setting, per_reader_img_per_s)
    with stages.folder_for() as folder:
        # The sampler draws indices lazily, one permutation per pass: a generous count costs nothing.
        dl = make_loader(
            sample.paths,
            sample.labels,
            setting=setting,
            crop_px=crop_px,
            batch_size=batch_size,
            num_samples=(warm + 1_000_000) * batch_size,
            seed=seed,
            blobs=sample.blobs,
            start_method=start_method,
            worker_init_fn=stages.WorkerStages(folder, 0, None) if setting.workers else None,
        )
        images: list[int] = []
        spans: list[float] = []
        looks, stopped_by = probe_looks(setting, min_seconds, max_seconds), ""
        it: Iterator[Batch] = start_loader(dl)
        # the serial loader's stages timed in this process, as a cell's are (its work per sample)
        undo = stages.time_in_process(it, folder, 0, dl.dataset) if not setting.workers else lambda: None
        started = clock()
        try:
            for _ in range(warm):
                next(it)
            started = last = clock()
            for batch in it:
                now = clock()
                images.append(0 if batch.images is None else int(batch.images.shape[0]))
                spans.append(now - last)
                last = now
                if looks.due(len(spans), now - started):
                    made = _made(folder, setting, started, now)
                    stopped_by = _look(images, spans, made, setting, above, looks.count)
                    if stopped_by:
                        break
                if _at_cap(looks, now - started, max_seconds):
                    break
        finally:
            undo()
            end_loader_workers(it)
            del it
        made, work = stage_rows.made_and_work(folder, started, last, setting.workers)
    elapsed = max(sum(spans), 1e-9)
    return DecodeCeiling(
        loader=setting.kind,
        workers=setting.workers,
        img_per_s=sum(images) / elapsed,
        images=sum(images),
        elapsed_s=elapsed,
        cache=CacheInfo("memory", 1.0, True, "in-process", f"{sample.files} files held in this process"),
        batch_images=tuple(images),
        batch_s=tuple(spans),
        sample_files=sample.files,
        sample_bytes=sample.bytes,
        stopped_by=stopped_by or "seconds",
        looks=looks.count,
        produced=made,
        work_s_per_sample=work[0] if work else None,
        work_seen=work[1] if work else "stages",
    )


def _at_cap(looks: Looks, elapsed_s: float, max_seconds: float) -> bool:
    """Whether a ceiling stops at its cap: past it only until its first look's batches are in —
    fewer batch means give an interval too wide to use (the serial loader at a GPU's batch of 256
    held 3 batches of 1024x768 in its 8 s on an H200: ± 51 %) —, and never past
    DECODE_PROBE_PAST_CAP times it."""
    return elapsed_s >= max_seconds and (bool(looks.base) or elapsed_s >= max_seconds * DECODE_PROBE_PAST_CAP)


def _look(
    images: Sequence[int],
    spans: Sequence[float],
    made: Sequence[Produced],
    setting: LoaderSetting,
    above: Above | None,
    looks: int,
) -> str:
    """Why the probe stops at this look ("" to go on): its rate so far, from the batches' arrivals
    or the workers' own (``rates.loader_rate``)."""
    interval, _ = loader_rate(
        images=[float(n) for n in images],
        durations=spans,
        img_per_s=sum(images) / max(sum(spans), 1e-9),
        workers=setting.workers,
        produced=made,
        looks=looks,
    )
    return _stop_reason(interval, above)


def _made(folder: str, setting: LoaderSetting, start_s: float, end_s: float) -> tuple[Produced, ...]:
    """The batches the workers completed in the window, with their cycles (none without workers)."""
    return stage_rows.produced(folder, start_s, end_s) if setting.workers else ()
