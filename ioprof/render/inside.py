"""*Inside the loader*, in a sweep's and a run's report: each stage of a sample in the workers
(costliest first, with intervals), the training process's own stages per batch, the memory of
the loader's processes against RAM and /dev/shm, and the threads that ran against the cores. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ioprof.conclude.inside import MAX_WORKERS_CHECKED, max_workers_ram, max_workers_shm, worker_peak_bytes
from ioprof.core.config import worker_count
from ioprof.core.inside import (
    GARBAGE_COLLECTOR,
    WAIT_FOR_THE_BATCH,
    WAITING_FOR_A_CORE,
    CoreUse,
    LoaderStages,
    SampleTimes,
    StageTime,
    WorkerMemory,
)
from ioprof.core.rates import wait_per_batch
from ioprof.core.results import CellResult, SweepResult
from ioprof.core.stats import Interval
from ioprof.core.thresholds import GROWTH_RULE
from ioprof.render.fmt import pct, rate, share_range, size
from ioprof.render.mdtable import table

HOW = (
    "Timed inside the workers as they ran (fork, spawn and forkserver alike): each batch's fetch, its "
    "collate, the file's read and the decode apart (PIL decodes when the pixels are first used, so the "
    "file object's reads are timed and the rest is decode), each transform of the dataset's "
    "`transforms.Compose` by its class name; `rest of __getitem__` is what the fetch took beyond them. "
    "Shares are of the workers' time per sample; intervals are 95 %, from batch means. Memory is read "
    "from `/proc/PID/smaps_rollup` every few seconds (in `run`, by each worker once more as it exits: a "
    "life is read at its end): a process's own (USS) is its dirty private pages "
    "less its share of tmpfs files' (the pages of a file it maps, such as a memory-mapped table, are the "
    "file's, left out); its growth per sample: " + GROWTH_RULE + "."
)


def section(result: SweepResult) -> list[str]:
    """The section, for the cells whose inside was looked at (a sweep: each dataset's best
    setting in full and one line for each other cell; a run: every loader)."""
    cells = [c for c in result.cells if c.status == "ok" and c.inside is not None]
    if not cells:
        return []
    out = ["## Inside the loader", "", HOW, "", "![Where a sample's time goes](stages.png)", ""]
    best = _shown(result, cells)
    for c in best:
        out += _cell(c)
    rest = [c for c in cells if c not in best and c.inside is not None and c.inside.stages is not None]
    if rest:
        out += ["Other settings, their costliest stage:", ""]
        out += [f"- {c.dataset} {c.setting.label}: {_lead(c)}" for c in rest] + [""]
    return out


def _shown(result: SweepResult, cells: Sequence[CellResult]) -> list[CellResult]:
    if result.kind == "run":
        return list(cells)
    out = []
    for label in dict.fromkeys(c.dataset for c in cells):
        mine = [c for c in cells if c.dataset == label]
        out.append(max(mine, key=lambda c: c.delivered()))
    return out


def _lead(c: CellResult) -> str:
    s = c.inside.stages if c.inside is not None else None
    lead = s.leading() if s is not None else None
    if lead is None or lead.share is None:
        return "not timed"
    whose = "the workers'" if c.workers else "its"
    return (
        f"{lead.name}, {share_range(lead.share, lead.share_low, lead.share_high)} of {whose} time per sample"
    )


def _cell(c: CellResult) -> list[str]:
    assert c.inside is not None
    out = [f"### {c.dataset} — {c.setting.label}", ""]
    if c.inside.stages is not None:
        wait = wait_per_batch(c.wait_share(), c.step_s) if c.steps else None
        out += stages_table(c.inside.stages, in_workers=c.workers > 0, wait=wait)
    else:
        out += [
            "Stages: not timed (too few batches in the window, or the workers could not be instrumented).",
            "",
        ]
    if c.inside.memory is not None:
        out += [memory_line(c.inside.memory), ""]
    if c.inside.cores is not None:
        out += [cores_line(c.inside.cores), ""]
    return out


def _mb(x_bytes: float) -> str:
    return f"{x_bytes / 1e6:,.1f}".replace("-", "−")


def _ms(s: float) -> str:
    return f"{s * 1e3:,.2f}"


def _ms_range(low: float, high: float) -> str:
    known = low == low and high == high and abs(low) != float("inf") and abs(high) != float("inf")
    return f"[{_ms(max(0.0, low))}–{_ms(high)}]" if known else "[± ?]"


def per_sample_line(t: SampleTimes, queued: float = 0.0) -> str:
    """Each sample's time in the workers: its spread, and the samples that took longest."""
    named = "; ".join(
        f"#{index} {_ms(seconds)} ms" + (f" (`{name}`)" if name else "") for index, seconds, name in t.slowest
    )
    # the slowest 1 % is at least one sample: under 100 timed, that one is more than 1 %
    slowest = "its slowest 1 %" if t.samples >= 100 else f"its slowest sample (1 of {t.samples})"
    return (
        f"Each sample's `__getitem__` ({t.samples:,} timed): median {_ms(t.p50_s)} ms, p95 {_ms(t.p95_s)}, "
        f"p99 {_ms(t.p99_s)}, max {_ms(t.max_s)} ms; {slowest} took {pct(t.slowest_share, 0)} of the "
        f"workers' time on samples." + (f" Slowest: {named}." if named else "") + _slow_line(t, queued)
    )


# a share the report prints as 0 % (whole percents): under this
NO_SHARE = 0.005


def _slow_line(t: SampleTimes, queued: float) -> str:
    """What the samples beyond the far fence cost the loop, replayed through the in-order hand-over;
    ``queued``: the share of their time the workers waited for a core (the replay's saving is then
    an upper bound)."""
    s = t.slow
    if s is None:
        return ""
    cost = (
        f"{share_range(s.loop.value, s.loop.low, s.loop.high)} of the loop's time, "
        f"{share_range(s.wait.value, s.wait.low, s.wait.high)} of its wait"
        if s.loop.known
        else "too few batches to tell"
    )
    if not s.slow:
        return (
            f" None lies beyond the far fence of these times ({_ms(s.fence_s)} ms): no sample is an outlier."
        )
    if s.loop.known and s.loop.high < NO_SHARE:  # what qualifies a saving would qualify none
        return (
            f" The {s.slow:,} beyond the far fence of these times ({_ms(s.fence_s)} ms) cost the loop under "
            f"{pct(NO_SHARE)} of its time, at the high end of its interval: its in-order hand-over replayed "
            f"without them waits {s.without_s:,.2f} s over {s.batches:,} batches, with them "
            f"{s.replayed_wait_s:,.2f} s (the loop measured {s.measured_wait_s:,.2f} s)."
        )
    out = (
        f" The {s.slow:,} beyond the far fence of these times ({_ms(s.fence_s)} ms) cost the loop, its "
        f"in-order hand-over replayed without them: {cost} (the replay put the wait over {s.batches:,} "
        f"batches at {s.replayed_wait_s:,.2f} s; the loop measured {s.measured_wait_s:,.2f} s)."
    )
    if s.on_cpu is not None and s.on_cpu.known and s.loop.known:
        out += (
            f" Of that, their own work on a CPU: {share_range(s.on_cpu.value, s.on_cpu.low, s.on_cpu.high)} "
            "of the loop's time; the rest they waited off a CPU, which is theirs only where the storage had bytes "
            "to spare: at its limit, a sample's wait for bytes passes to the next sample that reads."
        )
    if s.unordered_s is not None:
        out += (
            f" Replayed with in_order=False (batches handed over as they are made, the slow samples as "
            f"they were), the loop would wait {s.unordered_s:,.2f} s over as many batches."
        )
    if round(queued, 2) > 0:  # a wait that rounds to 0 % is none to speak of
        out += (
            f" The workers waited for a core {pct(queued, 0)} of their time: without the stalls, which freed "
            "cores for the rest, they would wait more, so the saving is at most this."
        )
    return out


def stages_table(s: LoaderStages, *, in_workers: bool = True, wait: Interval | None = None) -> list[str]:
    """The stages' table and what it adds up to; ``in_workers``: timed in the loader's workers,
    else in the training process (a serial loader: ``num_workers=0``). ``wait``: the loop's wait
    per batch with its cell's data-wait interval (``rates.wait_per_batch``), said in its place."""
    where = "the workers" if in_workers else "the training process"
    rows = [
        [
            st.name,
            f"{_ms(st.s_per_sample)} {_ms_range(st.low_s, st.high_s)}",
            share_range(st.share, st.share_low, st.share_high) if st.share is not None else "—",
        ]
        for st in s.worker
    ]
    out = [*table([f"stage (in {where})", "ms per sample", "share"], rows), ""]
    cost = s.timing_cost_s_per_sample / s.worker_s_per_sample if s.worker_s_per_sample > 0 else 0.0
    out.append(
        f"{where.capitalize()} took {_ms(s.worker_s_per_sample)} ms per sample {_ms_range(s.worker_low_s, s.worker_high_s)} "
        f"({s.samples:,} samples, {s.batches:,} batches, {s.processes} process(es)); the named stages explain "
        f"{pct(s.named_share, 0)} of it. The timers cost {s.timing_cost_s_per_sample * 1e6:,.1f} µs per sample "
        f"({pct(cost, 2)}), measured {'in each worker' if in_workers else 'there'}."
        + (f" Note: {s.note}." if s.note else "")
    )
    if any(st.name == WAITING_FOR_A_CORE for st in s.worker):
        out.append(
            f"'{WAITING_FOR_A_CORE}': the time {where} {'were' if in_workers else 'was'} ready to run while other "
            "processes held every core; each stage's time is its own work, without it."
        )
    if any(st.name == GARBAGE_COLLECTOR for st in s.worker):
        out.append(
            f"'{GARBAGE_COLLECTOR}': the collections that began inside the timed stages, counted apart from "
            "the stage that happened to start one. A worker's full collection walks every object it inherited from "
            "the training process (and writes to their pages); calling `gc.freeze()` before the loader "
            "starts its workers leaves those out."
        )
    if s.per_sample is not None:
        out.append(per_sample_line(s.per_sample, s.share_of(WAITING_FOR_A_CORE)))
    if s.main:
        main = "; ".join(_main_stage(st, wait) for st in s.main)
        pinned = any(st.name == "pin-memory copy" for st in s.main)
        out.append(
            f"In the training process, per batch: {main}"
            + (
                " (the pin-memory copy runs on its own thread while the loop waits or trains)."
                if pinned
                else "."
            )
        )
    return [*out, ""]


def _main_stage(st: StageTime, wait: Interval | None) -> str:
    """A stage of the training process per batch; the wait for the batch with the interval of its
    cell's data wait where that is known: the waits one by one are not independent observations."""
    # the cell's waits are this stage's where their means agree: on a GPU they are its stalls by
    # CUDA events, another series than the loop's own time in next()
    if (
        st.name == WAIT_FOR_THE_BATCH
        and wait is not None
        and wait.known
        and math.isclose(wait.value, st.s_per_batch, rel_tol=1e-6)
    ):
        return (
            f"{st.name} {_ms(wait.value)} ms {_ms_range(wait.low, wait.high)} (its interval the data wait's)"
        )
    return f"{st.name} {_ms(st.s_per_batch)} ms {_ms_range(st.low_s, st.high_s)}"


def memory_line(m: WorkerMemory) -> str:
    g = m.growth_bytes_per_1000_samples
    if m.growth_note:
        growth = f"growth per sample: {m.growth_note}"
    elif g is None:
        growth = "growth per sample: not read"
    elif m.growth_low is not None and m.growth_high is not None:
        interval = f"[{_mb(m.growth_low)}–{_mb(m.growth_high)}] MB"
        growth = (
            f"growth {_mb(g)} MB per 1,000 samples {interval} after the warm-up"
            if m.grows
            else f"no growth beyond the noise ({_mb(g)} MB per 1,000 samples {interval})"
        )
    else:
        growth = f"growth {size(g)} per 1,000 samples (± ?)"
    line = f"Memory: the training process holds {size(m.main_uss_bytes)} of its own (USS; PSS {size(m.main_pss_bytes)})"
    if m.workers:
        each = (
            f"each worker {size(m.worker_uss_bytes)} (PSS {size(m.worker_pss_bytes or 0)})"
            if m.worker_uss_bytes
            else "each worker: not read (no reading of a worker fell in the window)"
        )
        if m.persistent_workers:  # judged across epochs only: a slope in one window mixes in each epoch's own
            growth = _across_epochs(m)
        elif (m.grows or m.life_peak_bytes is not None) and m.samples_per_epoch:
            share = m.samples_per_epoch // max(1, m.workers)
            if not m.grows:  # a life too short to fit a growth in: its end is what is said
                growth = "a worker's memory is what it reaches in one life"
            growth += f"; forked again each epoch, {_life_peaks(m, share)}"
        line += (
            f", {each}, {growth}. Batches in "
            f"flight: {size(m.batch_bytes)} a batch × prefetch_factor {m.prefetch_factor} × "
            f"{worker_count(m.workers)} = {size(m.shm_in_flight_bytes)} in /dev/shm"
        )
        if m.shm_free_bytes is not None and m.shm_total_bytes is not None:
            line += f" ({size(m.shm_free_bytes)} free of {size(m.shm_total_bytes)})"
        line += ". " + _fit(m)
    else:
        line += f", {growth}"
    return line + "."


def _life_peaks(m: WorkerMemory, share: int) -> str:
    """What a worker forked again each epoch reaches at its life's end: the first pass's workers
    apart from later ones', where both were read."""
    if m.later_life_peak_bytes is not None and m.first_life_peak_bytes is not None:
        return (
            f"each worker of the first pass reaches about {size(round(m.first_life_peak_bytes))} at its "
            f"epoch's end ({share:,} samples), of later passes about {size(round(m.later_life_peak_bytes))}, "
            "then exits"
        )
    peak = size(round(worker_peak_bytes(m, m.workers)))
    whose = "each worker of the first pass" if m.life_first_pass else "each worker"
    if m.life_peak_bytes is not None and m.life_growth_per_sample is None:  # read, not carried
        return (
            f"{whose} exits after its share of an epoch ({share:,} samples); it reached {peak} as read, "
            "its readings all in its warm-up: how it grows after that was not read"
        )
    said = f"{whose} reaches about {peak} at its epoch's end ({share:,} samples)"
    if m.later_life_peak_bytes is not None:  # results written before the first pass's own peak was kept
        said += f", of later passes about {size(round(m.later_life_peak_bytes))}"
    elif m.life_first_pass:
        said += " (no worker of a later pass read)"
    return said + ", then exits"


def _across_epochs(m: WorkerMemory) -> str:
    """What persistent workers keep from one epoch to the next, or why it was not judged."""
    if m.epochs_seen < 2:
        held = (
            f"their readings after their warm-up covered {m.epochs_seen} epoch"
            if m.epochs_seen
            else "too few readings of them after their warm-up"
        )
        return f"from epoch to epoch: needs two epochs of the same workers ({held})"
    if m.epoch_growth_bytes is None or m.epoch_growth_low is None or m.epoch_growth_high is None:
        return f"from epoch to epoch: not judged ({m.epochs_seen} epochs, too few readings in each)"
    figure = f"{size(m.epoch_growth_bytes)} [{size(m.epoch_growth_low)}–{size(m.epoch_growth_high)}]"
    if not m.grows_per_epoch:
        return f"from epoch to epoch at the same point: no growth beyond the noise ({figure} over {m.epochs_seen} epochs)"
    lasts = m.ram_available_bytes / (m.epoch_growth_bytes * max(1, m.workers))
    return (
        f"from epoch to epoch at the same point: {figure} more each ({m.epochs_seen} epochs); at that rate "
        f"the {size(m.ram_available_bytes)} of RAM available last about {lasts:,.0f} epochs"
    )


def _fit(m: WorkerMemory) -> str:
    """The most workers that fit in RAM and in /dev/shm, in words."""
    fits = []
    for where, n in (("RAM", max_workers_ram(m)), ("/dev/shm", max_workers_shm(m))):
        if n is None:
            continue
        many = f"more than {MAX_WORKERS_CHECKED}" if n >= MAX_WORKERS_CHECKED else f"at most {n}"
        extra = f" ({size(m.ram_available_bytes)} available: {m.ram_source})" if where == "RAM" else ""
        fits.append(f"{many} in {where}{extra}")
    return ("Workers that fit: " + "; ".join(fits)) if fits else ""


def cores_line(c: CoreUse) -> str:
    if c.cpu_busy_cores is None:
        return (
            "Cores: not read — the window held no span between two readings of the loader's processes "
            "(too short)."
        )
    parts = [
        f"{c.intra_op_threads} intra-op" + (f" × {c.ranks_on_host} ranks" if c.ranks_on_host > 1 else "")
    ]
    if c.pin_memory_thread:
        parts.append("1 pin-memory")
    if c.workers:
        parts.append(f"{worker_count(c.workers)} × {c.threads_per_worker}")
    state = "**oversubscribed**" if c.oversubscribed else "within the cores"
    if not c.oversubscribed and not c.threads_read and c.runq_share is None:
        state = "whether threads queued for a core is not known"
    queued = (
        f"; runnable threads waited for a core {pct(c.runq_share, 0)} of their runnable time"
        if c.runq_share is not None
        else ""
    )
    threads = (
        f"{c.threads_busy} thread(s) on a CPU at least a tenth of it"
        if c.threads_read
        else "its threads not read apart, as each span ended with a pass whose workers were gone"
    )
    return (
        f"Cores: {rate(c.cpu_busy_cores)} cores busy over {c.window_s:,.1f} s (CPU time of the training process, "
        f"its workers and their children ÷ the window), {threads} (could run: {' + '.join(parts)} = "
        f"{c.threads_wanted}) on {c.affinity_cores} core(s) of the affinity mask{queued}: {state}."
    )
