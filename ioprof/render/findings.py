"""Every finding (a warning the report must show) in words, with its figures: one function per
kind, and ``finding`` to say any of them. Pure: the same finding gives the same text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ioprof.core import findings as f
from ioprof.core.config import worker_count
from ioprof.core.findings_run import WaitInFewStalls
from ioprof.core.thresholds import (
    KERNEL_SPLIT_MIN_UNITS,
    MODERATELY_INPUT_BOUND_SHARE,
    TRAINING_EPOCHS_AT_MOST,
)
from ioprof.render import fmt
from ioprof.render.fmt import counted, duration, mb, pct, rate, share_ends, share_range, signed_pct, size


def _oversubscribed(x: f.CoresOversubscribed) -> str:
    parts = [f"{x.intra_op_threads} intra-op thread(s) of the training process"]
    if x.ranks_on_host > 1:
        parts[0] += f" × {x.ranks_on_host} ranks"
    if x.pin_memory_thread:
        parts.append("its pin-memory thread")
    if x.workers:
        parts.append(f"{worker_count(x.workers)} × {x.threads_per_worker} thread(s)")
    if x.the_limit:
        limit = (
            " This is what limits it: the workers wait for a core, not for the files — use fewer threads "
            "(torch.set_num_threads in the training process, fewer workers) or give the job more cores."
        )
    elif x.the_limit is None:
        limit = " Whether this holds the training loop back is not decided here."
    else:
        limit = " Fewer threads would lose nothing here."

    queued = (
        f"; runnable threads waited for a core {pct(x.runq_share, 0)} of their runnable time (run-queue delay)"
        if x.runq_share is not None
        else ""
    )
    return (
        f"{x.dataset} {x.setting}: oversubscribed — {x.threads_busy} threads ran a tenth of the window or more, "
        f"of the {x.threads_wanted} it has ({', '.join(parts)}), on "
        f"{x.affinity_cores} core(s) of the affinity mask, which were {rate(x.cpu_busy_cores)} cores busy{queued}."
        + limit
    )


def _out_of_data(x: f.WorkersOutOfData) -> str:
    making = x.workers - x.out
    seen = ""
    if x.seen_making is not None:
        seen = f" (the look inside saw {x.seen_making} process{'' if x.seen_making == 1 else 'es'} make them)"
    shards = counted(x.shards, "shard") if x.shards is not None else ""
    if x.shards is not None and x.shards < x.workers:
        why = (
            f"Its dataset deals {shards} out among its workers, fewer than them: an IterableDataset gives each worker "
            "what its own iterator yields, and one that deals out its shards leaves a worker without one "
            "nothing to read (a Hugging Face streaming dataset stops the workers beyond its num_shards; "
            "WebDataset yields them none). More workers cannot make its loader faster; more shards can (at least "
            f"{x.workers}, one per worker; better, several per worker). Or use {worker_count(making)}: the "
            "same work in less memory."
        )
    else:
        said = f" ({shards})" if shards else ""
        why = (
            f"Its IterableDataset deals its data out among the workers{said}, and theirs ended first: a "
            "worker whose share has run out waits out the pass. Shares of even size (many small shards for "
            "each worker) keep every worker at work; more workers do not."
        )
    limit = (
        f" This is what limits it: it waits for data made by {worker_count(making)}." if x.the_limit else ""
    )
    return (
        f"{x.dataset}: {x.out} of its {worker_count(x.workers)} had run out of data before its window began, so "
        f"the window's batches all came from the other {making}{seen}. {why}{limit}"
    )


def _slow_samples(x: f.SlowSamples) -> str:
    replayed = (
        f"replayed so, the loop would wait {pct(max(0.0, x.unordered_saves), 0)} less; "
        if x.unordered_saves is not None
        else ""
    )
    named = "; ".join(
        f"#{index} {seconds * 1e3:,.0f} ms" + (f" (`{name}`)" if name else "")
        for index, seconds, name in x.slowest
    )
    return (
        f"{x.dataset} {x.setting}: slow samples hold the loop back — {x.slow:,} of the {x.samples:,} samples of "
        f"the replayed pass(es) took longer "
        f"than {x.fence_s * 1e3:,.1f} ms (the far fence of their times; median {x.median_s * 1e3:,.1f} ms). Each holds "
        f"back its batch, and batches are handed over in order, so the loop and then the other workers wait behind "
        f"it: replayed without what they cost by themselves (their work on a CPU; their waits off one as far as "
        f"the storage had bytes to spare), the loop would save {share_range(*x.loop)} "
        f"of its time, {share_range(*x.wait)} of its wait"
        + (
            f" (at most: the workers waited for a core {pct(x.queued, 0)} of their time, and the stalls freed "
            "cores for the rest)."
            if round(x.queued, 2) > 0  # a wait that rounds to 0 % is none to speak of
            else "."
        )
        + (f" Slowest: {named}." if named else "")
        + f" Try DataLoader(..., in_order=False), which hands over batches as they are made ({replayed}`ioprof "
        "whatif --data DIR --only in_order` measures it on your files), or pre-resize or skip the outliers."
    )


def _do_not_fit(x: f.WorkersDoNotFit) -> str:
    which = "the advised" if x.advised else "its"
    out = []
    if x.max_workers_ram is not None and x.workers > x.max_workers_ram:
        out.append(
            f"in RAM they need about {size(x.ram_need_bytes)} over an epoch and {size(x.ram_available_bytes)} is "
            f"available: at most {worker_count(x.max_workers_ram)} fit"
        )
    if x.max_workers_shm is not None and x.workers > x.max_workers_shm:
        free = size(x.shm_free_bytes) if x.shm_free_bytes is not None else "?"
        out.append(
            f"their batches in flight need {size(x.shm_need_bytes)} of /dev/shm and {free} is free: at most "
            f"{worker_count(x.max_workers_shm)} fit (docker run --shm-size=…, or a smaller prefetch_factor)"
        )
    return f"{x.dataset}: {which} {worker_count(x.workers)} would not fit — " + "; ".join(out) + "."


def _grows(x: f.WorkerMemoryGrows) -> str:
    span = (
        f"each epoch again for each of {worker_count(x.workers)} (persistent workers touch it all)"
        if x.persistent_workers
        else f"over an epoch of {x.samples_per_epoch:,} samples, whatever the worker count"
    )
    held = f" (it holds {x.dataset_objects:,} Python objects)" if x.dataset_objects else ""
    cause = {
        "copy-on-read": f"copy-on-read of the dataset's Python objects{held}: each sample touched writes their "
        "reference counts, so their pages are copied into the worker. Keep sample lists in numpy arrays or "
        "torch tensors (no per-object reference counts), not Python lists or dicts.",
        "leak": "it kept growing over samples it had already produced: a leak — something keeps what it returns "
        "(a cache without a bound, a list of samples, tensors kept for later).",
        "kept": "memory kept from one epoch to the next: a leak, or a cache without a bound — something keeps what "
        "it returns (a list of samples, tensors kept for later).",
    }.get(
        "kept" if x.cause == "leak" and x.per_epoch_bytes is not None else x.cause,
        f"the cause is not known: the dataset holds too few Python objects for copy-on-read{held}, and no "
        "sample was seen twice to tell a leak.",
    )
    if x.per_epoch_bytes is not None and x.per_epoch_low is not None and x.per_epoch_high is not None:
        lasts = x.epochs_until_full
        return (
            f"{x.dataset} {x.setting}: each worker holds {size(x.per_epoch_bytes)} [{size(x.per_epoch_low)}–"
            f"{size(x.per_epoch_high)}] more at the same point of each epoch than of the last ({x.epochs} epochs "
            f"read): {worker_count(x.workers)} keep {size(x.epoch_cost_bytes)} more each epoch"
            + (
                f", and the {size(x.ram_available_bytes)} of RAM available now last about {lasts:,.0f} epochs at that rate"
                f" (the longest ImageNet recipes train {TRAINING_EPOCHS_AT_MOST})"
                if lasts is not None
                else ""
            )
            + f" — {cause}"
        )
    return (
        f"{x.dataset} {x.setting}: each worker's own memory grows by {size(x.growth_bytes_per_1000_samples)} "
        f"[{size(x.growth_low)}–{size(x.growth_high)}] per 1,000 samples it loads, after its warm-up "
        f"({x.samples:,} samples each), about {size(x.epoch_cost_bytes)} {span} — {cause}"
    )


# -- findings ----------------------------------------------------------------------------------


def _cpu(x: f.CpuIsTheDevice) -> str:
    return (
        f"The compute device is the CPU ({x.device_reason}): {x.model} trains at {rate(x.img_per_s)} img/s here. "
        "A GPU consumes images far faster; --compute sim:h100 (or another preset) asks whether this loader and "
        "storage would keep one busy."
    )


def _fit(x: f.DatasetsFitInRam) -> str:
    sizes = ", ".join(
        f"{d} {size(b)} on {fs}" for d, b, fs in zip(x.datasets, x.sizes_bytes, x.fs_types, strict=True)
    )
    many = len(x.datasets) > 1
    how = (
        "the cold cells here evict each file after reading it, as a dataset larger than RAM would see"
        if x.cold_cells
        else "what was measured here is whatever the page cache held"
    )
    source = f", {x.ram_source}" if x.ram_source else ""
    return (
        f"The dataset{'s' if many else ''} ({sizes}) fit{'' if many else 's'} in RAM ({x.ram_bytes / 1e9:,.0f} GB "
        f"for the page cache{source}), on a filesystem that keeps read pages (checked: files read and closed "
        "stayed resident): in real training every epoch after "
        f"the first would come from the page cache, not storage — {how} (MLPerf Storage asks for a dataset ≥ "
        f"{x.ratio:g}× RAM)." + _reclaimed(x)
    )


def _reclaimed(x: f.DatasetsFitInRam) -> str:
    """What the host's own reclaim of idle pages does to that claim, where one runs."""
    return reclaimed(x.reclaim, x.reclaim_idle_s, x.epoch_s)


def reclaimed(reclaim: str, idle_s: float | None, epoch_s: float | None = None) -> str:
    """ " But this host pages out…": the host's own reclaim of idle pages, where one runs, against
    a claim that later epochs come from the page cache ("" where none runs)."""
    if not reclaim:
        return ""
    idle = f"idle for {idle_s:,.0f} s" if idle_s is not None else "idle"
    epoch = ""
    if epoch_s is not None:
        epoch = f"; an epoch here takes about {epoch_s:,.0f} s at the best pace measured, " + (
            "so each file idles that long between its reads"
            if idle_s is None or epoch_s >= idle_s
            else "shorter than that age, but idleness is judged by regions of memory, and pages read "
            "moments before can go with an idle region around them"
        )
    return (
        f" But this host pages out memory it finds {idle} on its own ({reclaim}), read pages included: later "
        f"epochs may still be read from storage, in part or whole{epoch}."
    )


def _contradiction(x: f.FetchContradiction) -> str:
    return (
        f"{x.dataset} {x.setting}: verified cold, it read {mb(x.requested_bytes)} but the {x.method} counter shows "
        f"{mb(x.fetched_bytes)} fetched. That is a contradiction, not evidence of cache hits: the counter cannot "
        f"see reads on {x.fs_type or 'this filesystem'}, or the eviction did not hold. Its bytes from storage "
        "are not trusted."
    )


def _off(x: f.OffPrediction) -> str:
    span = fmt.rate_span(x.predicted_low_img_per_s, x.predicted_img_per_s)
    return (
        f"{x.dataset} {x.setting}: measured {rate(x.measured_img_per_s)} img/s vs predicted {span} "
        f"({signed_pct(x.residual, 0)}), beyond its interval and the ceiling's: not explained by the stage ceilings."
    )


def _many_off(x: f.ManyOffPrediction) -> str:
    text = (
        f"{x.count} of {x.cells} cells differ from their prediction beyond their interval "
        f"({signed_pct(x.residual_min, 0)} to {signed_pct(x.residual_max, 0)}): not explained by the stage ceilings"
    )
    if x.compute_measured_low and x.compute_img_per_s is not None:
        text += (
            f". Training ran faster than the compute ceiling ({rate(x.compute_img_per_s)} img/s) allows, so that "
            "ceiling was measured low — was the machine busy while it was measured? Re-run on a quiet machine"
        )
    return text + "."


def _pace_varied(x: f.ComputePaceVaried) -> str:
    return _paced(
        x.count,
        x.cells,
        x.own_min,
        x.own_max,
        "the training step ran",
        f"than the compute ceiling's ({rate(x.compute_img_per_s)} img/s)",
        "its own steps allow",
        "ceiling",
    )


def _decode_pace_varied(x: f.DecodePaceVaried) -> str:
    return _paced(
        x.count,
        x.cells,
        x.own_min,
        x.own_max,
        "the loader did its own work per sample (decode, transforms, collate; timed inside it)",
        "than in its decode ceiling",
        "its loader's own work allows",
        "decode ceilings",
    )


def _paced(
    count: int, cells: int, lo_: float, hi_: float, who: str, than: str, allows: str, rests: str
) -> str:
    """Cells that ran a stage at another pace than its ceiling, read at another moment: said once."""
    lo, hi = signed_pct(lo_, 0), signed_pct(hi_, 0)
    way = "faster" if lo_ > 0 else "slower" if hi_ < 0 else "at another pace"
    return (
        f"In {count} of {cells} cells {who} {way} ({lo if lo == hi else f'{lo} to {hi}'}) {than}; each of "
        f"those cells ran at the pace {allows}. A shared host's speed varies from minute to minute: the figures "
        f"that rest on the {rests} carry that much more uncertainty."
    )


def _below(x: f.ComputeBelowPublished) -> str:
    return compute_reference(x.reference) + (
        f" Below {pct(x.threshold, 0)}: this training step is slower than a tuned one, so a tuned trainer would draw "
        "more from the input pipeline than these verdicts assume."
    )


def _borderline(x: f.BorderlineCells) -> str:
    cells = "; ".join(f"{d} {s}: {lo * 100:.1f}–{hi * 100:.1f} % ({a}/{b})" for d, s, a, b, lo, hi in x.cells)
    return (
        f"Borderline (the data-wait interval straddles a class threshold, so the class is not decided): {cells}. "
        + _narrows(x)
    )


NARROWS = {  # what ended a window under run, and what a longer one takes
    "steps": "more --steps narrow its interval",
    "seconds": "a longer --seconds narrows its interval",
    "script": "its window ended with your script: a longer run of it (more batches in a pass) narrows its interval",
}


def _narrows(x: f.BorderlineCells) -> str:
    """What narrows a borderline interval: a longer sweep, or under run what ended each window."""
    if not x.ended_by:
        return "A longer run (--seconds) narrows the interval."
    said = [NARROWS.get(e, NARROWS["script"]) for e in x.ended_by]
    if len(set(said)) == 1:
        return said[0][0].upper() + said[0][1:] + "."
    return "; ".join(f"{d} {s}: {w}" for (d, s, *_), w in zip(x.cells, said, strict=True)) + "."


def _training_not_measured(x: f.TrainingNotMeasured) -> str:
    rows = "; ".join(
        f"{key} ({role}) delivered {batches} batch(es) in its longest pass"
        + (f", a window needs {need}" if batches < need else "")
        for key, role, batches, need in x.loaders
    )
    # what a window needs without the warm-up: whether --warmup-steps 0 alone would give one
    trained = [r for r in x.loaders if r[1] == "training"] or list(x.loaders)
    bare = min(need - x.warmup_steps for _, _, _, need in trained)
    fits = x.warmup_steps > 0 and any(batches >= need - x.warmup_steps for _, _, batches, need in trained)
    fix = (
        f"run with --warmup-steps 0 (a window then needs {bare}), or let the script train longer"
        if fits
        else f"let the script train longer: a pass of {bare} batches or more (with --warmup-steps 0)"
    )
    return (
        f"Your script stepped an optimizer, but no training loader's window was measured: {rows}. A window "
        f"is taken within one pass, after {counted(x.warmup_steps, 'batch', 'batches')} of warm-up plus one per worker: {fix}."
    )


DECIDED_BY = {
    "ceilings": "stage ceilings (each stage alone)",
    "kernel": "the kernel's split of the waits",
}


KERNEL_PARTS = {
    "source": "off-CPU (its source)",
    "cpu": "on a CPU",
    "cores": "waiting for a core",
    "receive": "the training process receiving it",
}


# off-CPU through the waits of a window that fetched nothing from its storage
IDLE = "mostly off-CPU, while nothing was fetched from its storage: asleep, on a lock or another process"


KERNEL_SPLIT_NOTE = (
    "While the loop waited, the kernel was read (`/proc/PID/task/TID/schedstat`) for the thread that "
    "waited — its own work on the batch (receiving it from a worker), and its wait for a core once the batch "
    "woke it — and for the process making the batch (the worker holding the next batch index, or the training process itself without workers): "
    "on a CPU (its thread and its process's other threads), runnable but waiting for a core (run-queue "
    "delay), or off-CPU — blocked reading its source (disk, network, a pipe) or on a lock. This needs no "
    "knowledge of the dataset; for an input-bound loader it decides the stage where no stage was measured "
    "alone, or where only one was and it runs wholly faster than the loader delivered (off-CPU: storage; "
    "on a CPU or waiting for one: decode), and checks the stage ceilings where they decide. A part "
    "decides only when its interval lies above the others'."
)


def wait_split(split: Any, call: str) -> str:
    """The kernel's parts of the waits, with intervals, and its call."""
    if split is None:
        return "not read"
    parts = split.shares()
    names = {**KERNEL_PARTS, "source": "off-CPU"} if call == "idle" else KERNEL_PARTS
    text = " · ".join(f"{names[k]} {pct(i.value, 0)}{_ci(i)}" for k, i in parts.items())
    # no call: too few waits read, or a loop that hardly waits (whose waits are not judged)
    few = len(split.wait_s) < KERNEL_SPLIT_MIN_UNITS or not sum(split.wait_s)
    nothing = "too few waits to judge" if few else "not judged: the loop is not clearly input-bound"
    verdict = {"": nothing, "mixed": "no part stands out", "idle": IDLE}.get(
        call, f"mostly {KERNEL_PARTS.get(call, call)}"
    )
    return f"{text} ({verdict}; {len(split.wait_s)} of {split.units} waits)"


def _ci(i: Any) -> str:
    return share_ends(i.low, i.high, 0) if i.known else ""


URL_SCHEMES = ("http", "https", "pipe", "s3")


def _stalls(x: WaitInFewStalls) -> str:
    unit, other = ("waits", "other waits took") if x.per_turn == 1 else ("turns", "other turns waited")
    of = f"{x.waits} {unit}" + (f" (a batch from each of its {x.per_turn} workers)" if x.per_turn > 1 else "")
    return (
        f"{x.dataset} {x.setting}: {x.stalls} of its {of} — {', '.join(duration(s) for s in x.stall_s)} — "
        f"hold {pct(x.share_of_wait, 0)} of its data wait; its {other} {duration(x.median_wait_s)} (median), "
        f"and without the stalls it would wait {pct(x.wait_share_without, 0)} of its time, not "
        f"{pct(x.wait_share, 0)}. A wait that long is no batch's making: a library sleeping as its data runs "
        "out, a pass's end, a lock or a download"
        + (
            "; between them the loader kept up."
            if x.wait_share_without < MODERATELY_INPUT_BOUND_SHARE
            else "."
        )
    )


def _stage_undetermined(x: f.StageUndetermined) -> str:
    """Input-bound, and no stage named: what was measured alone, and what the kernel saw."""
    alone = " and ".join(
        f"its {stage} ({rate(r)} img/s{' at the share of its reads it fetched' if stage == 'storage' else ''})"
        for stage, r in x.alone
    )
    measured = (
        f"only {alone} was measured alone, wholly faster than the {rate(x.img_per_s)} img/s the loader "
        "delivered (not what held it back)"
        if x.alone
        else "no input stage's ceiling was measured for it"
    )
    if x.idle:
        kernel = (
            "not for its storage: while it waited, the process making its batch was off-CPU, and nothing was "
            "fetched from its storage in the window — asleep, on a lock or waiting on another process (a "
            "library that sleeps as its data runs out, a queue of its own); "
            + ("no other input stage's ceiling was measured for it" if not x.alone else measured)
        )
    else:
        kernel = measured + (", and the kernel's split of its waits names no stage" if x.alone else "")
    return (
        f"{x.dataset} {x.setting}: waits {pct(x.data_wait_share, 0)} for data, but {kernel}, so which stage is "
        "to blame is not decided" + (f" ({'; '.join(x.why)})." if x.why else ".")
    )


def _pages_not_kept(x: f.PagesNotKept) -> str:
    """Datasets small enough for RAM whose every epoch reads the storage anyway."""
    urls = [d for d, fs in zip(x.datasets, x.fs_types, strict=True) if fs in URL_SCHEMES]
    mounts = [(d, fs) for d, fs in zip(x.datasets, x.fs_types, strict=True) if fs not in URL_SCHEMES]
    out = []
    if mounts:
        out.append(
            f"{', '.join(d for d, _ in mounts)} would fit in RAM, but {'/'.join(sorted({fs for _, fs in mounts}))} "
            "drops read pages at every open (checked: files read and closed were no longer resident): every "
            "epoch reads the storage, as measured here."
        )
    if urls:
        out.append(
            f"{', '.join(urls)} would fit in RAM, but it is fetched over the network at every read (nothing on "
            "this host keeps a URL's bytes): every epoch reads the storage, as measured here."
        )
    return " ".join(out)


def _disagree(x: f.SplitsDisagree) -> str:
    parts = ", ".join(f"{KERNEL_PARTS[k]} {pct(v, 0)}" for k, v in x.shares)
    return (
        f"{x.dataset} {x.setting}: the stage ceilings blame {x.by_ceilings}, but while the loop waited the "
        f"producer of its batch was mostly {KERNEL_PARTS[x.by_kernel]} ({parts}). The two methods disagree, "
        "so which stage limits it is uncertain: a ceiling measured on a sample that differs from what training "
        "reads (other files, another cache state), or a producer blocked on something other than its source "
        "(a lock, a queue), can cause this."
    )


def _storage_left_idle(x: f.StorageLeftIdle) -> str:
    parts = []
    for setting, mb_s, high, alone, low, readers, in_flight in x.cells:
        part = (
            f"{setting} drew {rate(mb_s)} MB/s (at most {rate(high)}), {pct(mb_s / alone, 0)} of the "
            f"{rate(alone)} MB/s (at least {rate(low)}) {readers} reader{'s' if readers > 1 else ''} draw reading alone"
        )
        if in_flight is not None:
            part += f"; its workers' time in read adds up to {in_flight:.1f} reads in flight of {readers}"
        parts.append(part)
    timed = any(row[6] is not None for row in x.cells)
    return (
        f"{x.dataset}: storage-bound, yet the storage waited between the loader's reads — "
        + "; ".join(parts)
        + ". "
        + (
            "A worker reads one sample, then decodes it: more workers, each one more read in flight, "
            "or reads started ahead of the decode would draw the rest."
            if timed
            else "Its reads were not timed apart from the rest of the loader's work, so how many were "
            "in flight is not known; more workers, each one more reader, would draw more."
        )
    )


def pickled(sent_bytes: int, sent_s: float | None, whole: bool) -> str:
    """The dataset as each spawned worker is handed it: its pickle's size, and what pickling took."""
    if not whole:
        return f"the dataset pickled, more than {size(sent_bytes)} (pickling it here was stopped after {duration(sent_s)})"
    took = f", which took {duration(sent_s)} to pickle here" if sent_s is not None else ""
    return f"the dataset pickled, {size(sent_bytes)}{took}"


def _epoch_start(x: f.EpochStartCost) -> str:
    """Workers started again at every pass, and what that costs each epoch, in words."""
    return (
        f"{x.dataset}: each pass after the first waited {duration(x.first_batch_s)} for its first batch "
        f"(mean of {x.passes}), {duration(x.startup_s)} of it in iter() starting its {worker_count(x.workers)} "
        f"again ({x.start_method}; persistent_workers=False"
        + (
            f"; each is handed {pickled(x.sent_bytes, x.sent_s, x.sent_whole)}"
            if x.sent_bytes is not None and x.sent_s is not None
            else ""
        )
        + f"); one worker makes a batch in {duration(x.batch_s)}, so "
        f"the start of each pass cost {duration(x.cost_s - x.stop_s)} beyond it"
        + (
            f" and its end {duration(x.stop_s)} stopping the workers, {duration(x.cost_s)} in all"
            if x.stop_s > 0
            else ""
        )
        + f" — {share_range(x.share, x.share_low, x.share_high)} of a pass of {duration(x.pass_s)}. "
        "persistent_workers=True keeps the workers from one epoch to the next: a new pass then waits only for "
        "a batch made."
    )


def _fresh_iterators(x: f.FreshIterators) -> str:
    """A loop that took its batches from fresh iterators, and what their first batches cost it."""
    holds = f" (a pass holds {x.pass_holds:,})" if x.pass_holds else ""
    started = (
        f", {duration(x.startup_s)} of it in iter() starting its {worker_count(x.workers)} again"
        if x.workers and not x.persistent
        else ""
    )
    kept = (
        "; with persistent_workers=True a new iterator still throws away the batches its workers made ahead"
        if x.workers
        else ""
    )
    return (
        f"{x.dataset}: the loop took {x.batches:,} batches from {x.passes:,} iterators, at most "
        f"{x.most_in_a_pass:,} from one{holds}: each iterator waited {duration(x.first_batch_s)} for its first "
        f"batch{started}"
        + (f", and {duration(x.stop_s)} stopping them when the loop let it go" if x.stop_s > 0 else "")
        + f" — {pct(x.share, 0)} [{pct(x.share_low, 0)}–{pct(x.share_high, 0)}] of the loop's "
        f"time with this loader (a pass of {duration(x.pass_s)}). Keep one iterator: it = iter(loader) once, "
        f"next(it) at each step, and a new one only when it runs out (StopIteration){kept}. No window was "
        "measured: it is taken within one pass."
    )


def _pass_range(x: f.FirstPassWaits) -> str:
    """`` [a–b]``: the pass's share within the window's interval, where it was reckoned so."""
    if x.pass_low is None or x.pass_high is None:
        return ""
    return share_ends(x.pass_low, x.pass_high, 0)


def first_pass(x: f.FirstPassWaits) -> str:
    """A first pass that waited mostly before its window, in words."""
    text = (
        f"{x.dataset} waited {pct(x.pass_share, 0)}{_pass_range(x)} of its first pass ({duration(x.pass_s)} for its {x.pass_batches:,} "
        f"batches, those after the window reckoned at its pace): {duration(x.wait_before_s)} of it before its "
        f"window, for its first {x.batches_before} batches"
        + (f" (the first after {duration(x.first_batch_s)})" if x.first_batch_s is not None else "")
    )
    if x.busy_share is not None:
        doing = {
            "storage": "waiting on I/O — the storage, or a download",
            "start": (
                f"the rest off it, yet nothing came from the dataset's storage ({x.fetched_method} counted none): "
                "not the storage — its workers starting, a download to a local copy, or a lock"
            ),
        }.get(x.by, "busy making them — a cache built, or costly first samples")
        waiting = "" if x.busy_of == "processes" else " or waiting for one"
        whose = {"workers": "its workers were", "training process": "the training process making them was"}
        text += f"; {whose.get(x.busy_of, 'its processes were')} on a CPU{waiting} {pct(x.busy_share, 0)} of that time: {doing}"
    if x.fetched_bytes:
        text += f", {mb(x.fetched_bytes)} fetched ({x.fetched_method})"
    return text + "."


FINDING_WORDS: dict[type, Callable[[Any], str]] = {
    f.SplitsDisagree: _disagree,
    f.CpuIsTheDevice: _cpu,
    f.DatasetsFitInRam: _fit,
    f.PagesNotKept: _pages_not_kept,
    f.WorkersExceedCores: lambda x: (
        f"{', '.join(map(str, x.workers))} worker(s) exceed the {x.cores} usable cores: those workers share "
        "cores with each other and with the training process."
    ),
    f.OffPrediction: _off,
    f.ManyOffPrediction: _many_off,
    f.ComputePaceVaried: _pace_varied,
    f.DecodePaceVaried: _decode_pace_varied,
    f.ComputeBelowPublished: _below,
    f.FetchContradiction: _contradiction,
    f.NotAsAsked: lambda x: f"{x.dataset} {x.setting}: {x.note or x.regime + ' not verified'}.",
    f.FetchedUnknown: lambda x: (
        f"{x.dataset}: bytes fetched from storage could not be counted on "
        f"{x.fs_type or 'its storage (its filesystem was not identified)'} for "
        f"{', '.join(x.settings)} (no counter for it, and the cells were not verified cold); storage is "
        "assumed to serve every read."
    ),
    f.StageUndetermined: _stage_undetermined,
    WaitInFewStalls: _stalls,
    f.TrainingNotMeasured: _training_not_measured,
    f.NoOptimizerSteps: lambda x: (
        "No torch.optim step ran in your script (inference, or updates written by hand): ioprof cannot tell "
        f"training from evaluation, so each loader ({', '.join(x.loaders)}) is judged as it is."
    ),
    f.IteratedOffThread: lambda x: (
        f"{x.dataset} is iterated on {x.thread}, not on the thread that steps the optimizer (a prefetching "
        "thread): its waits are that thread's, and the training loop's own wait for the batches it queues is "
        "not seen. Watch the loader that thread feeds, or time the loop's wait on its queue."
    ),
    f.FetchedAboveStorage: lambda x: (
        f"{x.dataset} {x.setting}: its counter ({x.method}: {x.source}) saw {rate(x.fetched_mb_per_s)} MB/s over "
        f"the {duration(x.window_s)} it covered, more than the storage delivered read alone (at most "
        f"{rate(x.storage_high_mb_per_s)} MB/s, by more than its counters' edges allow): it counted other reads "
        "than this loader's (another loader, "
        "another process on the same mount), so it is not shown as this loader's figure."
    ),
    f.StorageLeftIdle: _storage_left_idle,
    f.FetchedUnchecked: lambda x: (
        f"MB/s fetched for {', '.join(x.cells)} could not be checked against what the storage delivers: the "
        f"storage was not read alone ({x.why or 'no reason was recorded'})."
    ),
    f.ProbeFailed: lambda x: (
        f"{x.dataset} {x.stage} ceiling{', ' + x.setting if x.setting else ''}: failed — {x.error}."
    ),
    f.UndecodableSamples: lambda x: (
        f"{x.count} sample(s) could not be read or decoded and were skipped (first: "
        + "; ".join(f"{p}: {r}" for p, r in x.first)
        + ")."
    ),
    f.ConvertedSamples: lambda x: (
        f"{x.count} sample(s) were not RGB (CMYK, grayscale, palette…) and were converted."
    ),
    f.EmulatedFasterThanReal: lambda x: (
        f"{x.dataset}: the emulated {x.profile} ({rate(x.profile_mb_per_s)} MB/s) is faster than the device the "
        f"data really sit on ({rate(x.real_mb_per_s)} MB/s cold, one reader). The emulated figures describe "
        "storage this machine does not have; they come from an in-memory sample, never from the slower real device."
    ),
    f.BorderlineCells: _borderline,
    f.CoresOversubscribed: _oversubscribed,
    f.WorkersOutOfData: _out_of_data,
    f.WorkersDoNotFit: _do_not_fit,
    f.SlowSamples: _slow_samples,
    f.WorkerMemoryGrows: _grows,
    f.FirstPassWaits: first_pass,
    f.EpochStartCost: _epoch_start,
    f.FreshIterators: _fresh_iterators,
    f.ShmTooSmall: lambda x: (
        f"Your script failed because {x.line}." if x.failed else f"/dev/shm is too small: {x.line}."
    ),
}


def finding(x: f.Finding) -> str:
    return FINDING_WORDS[type(x)](x)


# a measured compute ceiling this far above the published figure is said with why it can be
ABOVE_PUBLISHED = 1.2


def compute_reference(r: f.ComputeReference) -> str:
    if r.published_img_per_s is None:
        return f"No published ResNet-50 figure is on file for {r.gpu}: the compute ceiling is not compared."
    if not r.comparable:
        return (
            f"The published figure for {r.gpu} ({rate(r.published_img_per_s)} img/s) is for ResNet-50 at 224 px in "
            f"mixed precision; this step ({r.step_label}, {r.crop_px} px) is not compared with it."
        )
    text = (
        f"The compute ceiling, {rate(r.measured_img_per_s)} img/s, is {pct(r.share, 0)} of the published ResNet-50 "
        f"figure for {r.gpu} ({rate(r.published_img_per_s)} img/s, {r.source})."
    )
    if r.share is not None and r.share > ABOVE_PUBLISHED:
        text += (
            f" It lies more than {pct(ABOVE_PUBLISHED - 1, 0)} above it, as a ceiling can: it trains on synthetic batches "
            f"already on the device ({r.step_label}: no loader, no copy to the GPU, no augmentation on it), "
            "where a published figure is a training run with its input pipeline, often in another precision "
            "or software stack."
        )
    return text
