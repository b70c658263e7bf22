"""Every sentence ioprof says about a result — in report.md and on the terminal.

Analysis returns typed verdicts, advice and findings with their numbers; this module turns
them into words. Pure: the same objects give the same text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ioprof.core import findings as f
from ioprof.core.config import worker_count
from ioprof.core.results import (
    CellResult,
    ComputeCeiling,
    DatasetInfo,
    DecodeCeiling,
    DeviceCell,
    Fetched,
    ProbeFailure,
    RankCountResult,
    StorageCeiling,
)
from ioprof.core.stats import MIN_BATCHES, Interval
from ioprof.render.fmt import duration, mb, pct, rate, rate_ci, share_ci, size

PLACE_HINT = "`ioprof place --data PATH --candidates /local/nvme,/dev/shm`"

# -- the verdict and the answer ----------------------------------------------------------------


def verdict_line(a: f.Analysis | None) -> str:
    """The report's first sentence."""
    if a is not None and a.first_pass is not None:
        fp = a.first_pass
        steady = verdict_line(replace(a, first_pass=None)).replace("**Verdict: ", "", 1).replace("**", "", 1)
        by = {"storage": " — the bottleneck is storage", "loader": " — the bottleneck is its loader's start"}
        return (
            f"**Verdict: {fp.pass_class} input-bound over its first pass{by.get(fp.by, '')}**: {first_pass(fp)} "
            f"In its window after them, the steady state: {steady}"
        )
    if a is not None and a.overall_bottleneck == "unknown" and a.datasets:
        return "**Verdict: none** — no training loader's window was measured (see the warnings)."
    if a is None or a.overall_bottleneck == "unknown":
        return "**Verdict: none** — no cell finished."
    if a.overall_bottleneck == "compute":
        return (
            "**Verdict: compute-bound** — at the best loader setting of every dataset, input is not "
            "what limits training."
        )
    worst = next(v for v in a.datasets if v.dataset == a.overall_dataset)
    wait = pct(worst.data_wait_share, 0)
    where = f"{worst.dataset} waits for data {wait} of step time even at its best loader setting, {worst.best_setting}"
    if worst.tied_settings:
        where += (
            f" (as fast, within the intervals, as {', '.join(worst.tied_settings)}; of these it waits least)"
        )
    if a.overall_peers > 1 and a.overall_peers_median_share is not None:
        where += (
            f" (the worst of {a.overall_peers} ranks' training loaders; their median waits "
            f"{pct(a.overall_peers_median_share, 0)})"
        )
    if a.overall_input_bound == "borderline":
        low, high = worst.input_bound_range
        return (
            f"**Verdict: borderline between {low} and {high} input-bound** — {where}, and its interval straddles "
            f"the threshold; {'if input-bound' if low == 'not' else 'input-bound either way'}, by {worst.bottleneck}."
            + (leading(worst) if worst.bottleneck == "decode" else "")
        )
    if a.overall_bottleneck == "undetermined":
        return (
            f"**Verdict: {a.overall_input_bound} input-bound — which input stage could not be determined**: "
            f"{where}, and its stage ceilings are missing."
        )
    return (
        f"**Verdict: {a.overall_input_bound} input-bound — the bottleneck is {a.overall_bottleneck}**: {where}."
        + (leading(worst) if a.overall_bottleneck == "decode" else "")
    )


def first_pass(x: f.FirstPassWaits) -> str:
    """A first pass that waited mostly before its window, in words."""
    text = (
        f"{x.dataset} waited {pct(x.pass_share, 0)} of its first pass ({duration(x.pass_s)} for its {x.pass_batches:,} "
        f"batches, those after the window reckoned at its pace): {duration(x.wait_before_s)} of it before its "
        f"window, for its first {x.batches_before} batches"
        + (f" (the first after {duration(x.first_batch_s)})" if x.first_batch_s is not None else "")
    )
    if x.busy_share is not None:
        doing = (
            "waiting on I/O — the storage, or a download"
            if x.by == "storage"
            else "busy making them — a cache built, or costly first samples"
        )
        text += f"; its processes were on a CPU {pct(x.busy_share, 0)} of that time: {doing}"
    if x.fetched_bytes:
        text += f", {mb(x.fetched_bytes)} fetched ({x.fetched_method})"
    return text + "."


def leading(v: f.DatasetVerdict) -> str:
    """Where decode's time goes: the costliest stage in the workers, when they were timed."""
    if not v.leading_stage or v.leading_share is None:
        return ""
    return (
        f" Costliest stage in the loader: **{v.leading_stage}**, "
        f"{share_range(v.leading_share, v.leading_share_low, v.leading_share_high)} of its time per sample "
        "(see *Inside the loader*)."
    )


def share_range(value: float, low: float | None, high: float | None) -> str:
    """A share with its interval where there is one: ``62 % [58–66]``."""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return share_ci(Interval.unknown(value), 0)
    return share_ci(Interval(value, max(0.0, low), min(1.0, high), 2), 0)


def _oversubscribed(x: f.CoresOversubscribed) -> str:
    parts = [f"{x.intra_op_threads} intra-op thread(s) of the training process"]
    if x.ranks_on_host > 1:
        parts[0] += f" × {x.ranks_on_host} ranks"
    if x.pin_memory_thread:
        parts.append("its pin-memory thread")
    if x.workers:
        parts.append(f"{worker_count(x.workers)} × {x.threads_per_worker} thread(s)")
    limit = (
        " This is what limits it: the workers wait for a core, not for the files — use fewer threads "
        "(torch.set_num_threads in the training process, fewer workers) or give the job more cores."
        if x.the_limit
        else " Fewer threads would lose nothing here."
    )
    queued = (
        f"; runnable threads waited for a core {pct(x.runq_share, 0)} of their runnable time (run-queue delay)"
        if x.runq_share is not None
        else ""
    )
    return (
        f"{x.dataset} {x.setting}: oversubscribed — {x.threads_busy} threads ran ({', '.join(parts)}) on "
        f"{x.affinity_cores} core(s) of the affinity mask, which were {rate(x.cpu_busy_cores)} cores busy{queued}."
        + limit
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


def dataset_line(v: f.DatasetVerdict, role: str = "") -> str:
    """One dataset in the answer: its input-bound settings, and the multiprocess speed-up."""
    if v.input_bound_settings:
        # where every such setting may yet be "not" input-bound, the line does not say they are
        maybe = all(klass.startswith("borderline not") for _, klass, _, _ in v.input_bound_settings)
        parts = [
            ("possibly input-bound: " if maybe else "input-bound: ")
            + ", ".join(
                f"{label} ({klass}, {stage}, {pct(share, 0)} wait)"
                for label, klass, stage, share in v.input_bound_settings
            )
        ]
    else:
        parts = ["no setting is input-bound"]
    if v.speedup_over_serial is not None and v.serial_img_per_s is not None:
        parts.append(
            f"best multiprocess ({v.best_multiprocess_setting}, {rate(v.best_multiprocess_img_per_s)} img/s) is "
            f"{v.speedup_over_serial:.2f}× the serial loader ({rate(v.serial_img_per_s)} img/s)"
            + (
                f" — of which the loader accounts for at most {v.loader_gain_max:.2f}× (all of the serial "
                "loader's wait for data removed): the training step itself took less time in the faster "
                "cell, as when the machine's speed changes between two windows (their intervals do not "
                "cover that)"
                if v.speedup_beyond_loader and v.loader_gain_max is not None
                else ""
            )
        )
    name = v.dataset + (f" ({ROLES.get(role, role)})" if role and role != "training" else "")
    return f"{name}: " + "; ".join(parts) + "."


ROLES = {"evaluation": "evaluation: timed, not measured alone", "no-optimizer": "no optimizer step"}


def headline(
    a: f.Analysis | None, end_to_end: bool, datasets: list[str], roles: dict[str, str] | None = None
) -> list[str]:
    """The answer's lines: the CPU note first where it applies, then one line per dataset."""
    if a is None:
        return []
    out = [finding(x) for x in a.findings if isinstance(x, f.CpuIsTheDevice)]
    seen = {v.dataset for v in a.datasets}
    out += [dataset_line(v, (roles or {}).get(v.dataset, "")) for v in a.datasets]
    if end_to_end:
        out += [f"{d}: no cell finished." for d in datasets if d not in seen]
    return out


# -- advice ------------------------------------------------------------------------------------


def advice(a: f.Advice) -> list[str]:
    """What to change, computed from the measurements, most important first."""
    out: list[str] = []
    if a.fix_first == "storage":
        out += _storage_fix(a)
        if a.decode_shortfall is not None and a.best_decode_img_per_s is not None:
            out.append(
                f"Once storage keeps up, decode would limit next: the best measured setting "
                f"({worker_count(a.best_decode_workers or 0)}) decodes {rate(a.best_decode_img_per_s)} img/s."
            )
    elif a.fix_first == "decode":
        out += _decode_fix(a)
    elif a.demand_img_per_s and a.workers_needed is not None and _undecided(a):
        out.append(_undecided_words(a))
    elif a.demand_img_per_s and a.workers_needed is not None and a.per_worker_img_per_s:
        out.append(
            f"{worker_count(a.workers_needed)} {'suffices' if a.workers_needed == 1 else 'suffice'} for decoding: "
            "the training step consumes "
            f"{rate(a.demand_img_per_s)} img/s and each worker decodes about {_per_worker(a)} img/s."
        )
    if a.fix_first != "storage" and a.demand_img_per_s:
        out.append(_storage_need(a))
    if a.serial_suffices is not None:
        out.append(
            "The serial loader (num_workers=0) suffices."
            if a.serial_suffices
            else f"The serial loader does not suffice: it waits {pct(a.serial_wait_share, 0)} of step time for data."
        )
    return [s for s in out if s]


def _storage_mb(a: f.Advice) -> str:
    """The best cold storage figure, with its interval where it has one."""
    i = a.storage_mb_per_s_interval
    return rate_ci(i) if i is not None else rate(a.storage_mb_per_s_measured)


def _storage_need(a: f.Advice) -> str:
    where = ""
    if a.storage_mb_per_s_measured is not None:
        verdict = {
            True: "enough, with headroom",
            False: "too little headroom for it"
            if a.storage_mb_per_s_measured >= (a.storage_mb_per_s_needed or 0.0)
            else "short of it",
            None: "",
        }[a.storage_suffices]
        where = f"; storage delivers {_storage_mb(a)} MB/s cold" + (f", {verdict}" if verdict else "")
    if a.storage_mb_per_s_needed is None or a.mean_file_bytes is None:
        return (
            f"{a.consumer.capitalize()} at {rate(a.demand_img_per_s)} img/s (the pace its step allows): the bytes "
            f"it reads per image are not known (its dataset does not say what it reads), so neither is the "
            f"bandwidth it would need{where}."
        )
    return (
        f"{a.consumer.capitalize()} at {rate(a.demand_img_per_s)} img/s (the pace its step allows) would draw "
        f"{rate(a.storage_mb_per_s_needed)} MB/s from storage ({a.mean_file_bytes / 1e3:,.0f} kB an image){where}."
    )


def _storage_fix(a: f.Advice) -> list[str]:
    need = (
        f"needs {rate(a.storage_mb_per_s_needed)} MB/s ({a.mean_file_bytes / 1e3:,.0f} kB an image)"
        if a.storage_mb_per_s_needed is not None and a.mean_file_bytes is not None
        else "needs more (the bytes it reads per image are not known)"
    )
    delivers = (
        f"the storage delivers {_storage_mb(a)} MB/s ({rate(a.storage_img_per_s_best)} img/s "
        f"at {a.storage_best_readers} reader(s))"
        if a.storage_mb_per_s_measured is not None and a.storage_best_readers is not None
        else "what the storage delivers alone was not measured (see *Not measured*)"
    )
    out = [f"Storage limits it: {delivers}, and training at {rate(a.demand_img_per_s)} img/s {need}."]
    if a.storage_scales_with_readers:
        out.append(
            "More concurrent reads help here — per-file latency, not bandwidth, limits it: more loader "
            "workers, or fewer, larger files (packed shards such as WebDataset tar files) cut the per-file cost."
        )
    elif a.storage_scales_with_readers is False:
        out.append("More loader workers will not help: more concurrent readers did not read faster.")
    if a.object_store:
        out.append(
            "The fix is a local copy staged from the store before training — `ioprof place --data s3://… "
            "--candidates /local/nvme,/dev/shm` measures where it would keep up and whether the copy pays over "
            "your epochs — a faster link to the store, or fewer, larger GETs (packed shards such as WebDataset "
            "tar files)."
        )
        return out
    network = "network storage" if a.network_storage else "this storage"
    out.append(
        f"The fix is faster storage than {network}, or a local copy of the dataset — {PLACE_HINT} measures "
        "where it would keep up and whether copying pays — or fewer, larger reads (packed shards)."
    )
    return out


def _undecided(a: f.Advice) -> bool:
    """Whether the ceiling that meets the demand does so only in its middle: its interval reaches below."""
    i = a.workers_needed_interval
    return i is not None and i.known and a.demand_img_per_s is not None and i.low < a.demand_img_per_s


def _undecided_words(a: f.Advice) -> str:
    n, i = a.workers_needed or 0, a.workers_needed_interval
    assert i is not None
    return (
        f"Whether {worker_count(n)} {'keeps' if n == 1 else 'keep'} up with decoding is not decided: "
        f"{'it decodes' if n == 1 else 'they decode'} {rate_ci(i)} img/s against the {rate(a.demand_img_per_s)} img/s "
        f"the training step consumes; a longer run narrows it."
    )


def _per_worker(a: f.Advice) -> str:
    """What one worker decodes, with the interval of the ceiling it is read from where known."""
    i = a.per_worker_interval
    return rate_ci(i) if i is not None else rate(a.per_worker_img_per_s)


def _workers_range(demand: float, per_worker: Interval | None) -> str:
    """The workers a demand takes across the per-worker rate's interval, where that changes the count."""
    if per_worker is None or not per_worker.known:
        return ""
    fewest = math.ceil(demand / per_worker.high)
    if per_worker.low <= 0:
        return f" ({fewest} or more, within the interval of one worker's rate)"
    most = math.ceil(demand / per_worker.low)
    return "" if fewest == most else f" ({fewest}–{most} within the interval of one worker's rate)"


def _decode_fix(a: f.Advice) -> list[str]:
    out: list[str] = []
    if a.demand_img_per_s is None or a.per_worker_img_per_s is None:
        return ["Decoding in the loader limits it; its ceilings per worker count are below."]
    if a.workers_needed is not None and _undecided(a):
        return [_undecided_words(a)]
    contended = a.best_cell_workers is not None and a.best_cell_workers >= (a.workers_needed or 10**9)
    if a.workers_needed is not None and contended:
        return [
            f"Alone, {worker_count(a.workers_needed)} {'decodes' if a.workers_needed == 1 else 'decode'} enough for "
            f"the {rate(a.demand_img_per_s)} img/s the "
            f"training step consumes — yet in training {worker_count(a.best_cell_workers or 0)} still leave it "
            f"waiting {pct(a.best_cell_wait_share, 0)} of step time: the workers share the {a.cores_usable} usable "
            "cores with the training process and with each other. More workers will not help; more cores, "
            "cheaper transforms or torchvision.io.decode_jpeg would."
        ]
    if a.workers_needed is not None:
        out.append(
            f"{worker_count(a.workers_needed)} {'decodes' if a.workers_needed == 1 else 'decode'} enough for the "
            f"{rate(a.demand_img_per_s)} img/s the training "
            f"step consumes (about {_per_worker(a)} img/s per worker)."
        )
        return out
    best = a.best_decode_interval
    out.append(
        f"Feeding {rate(a.demand_img_per_s)} img/s takes about {math.ceil(a.workers_estimated or 0)} workers"
        f"{_workers_range(a.demand_img_per_s, a.per_worker_interval)} at {_per_worker(a)} img/s each; "
        f"the best measured ({worker_count(a.best_decode_workers or 0)}) decodes "
        f"{rate_ci(best) if best is not None else rate(a.best_decode_img_per_s)} img/s, "
        f"{pct(a.decode_shortfall, 0)} of the demand."
    )
    if not a.cores_suffice:
        out.append(
            f"This machine has {a.cores_usable} usable cores, so more workers cannot get there: use fewer or "
            "cheaper transforms, torchvision.io.decode_jpeg, GPU decode (decode_jpeg on CUDA, DALI), or store "
            "smaller images."
        )
    return out


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
    span = (
        rate(x.predicted_img_per_s)
        if x.predicted_low_img_per_s == x.predicted_img_per_s
        else (f"{rate(x.predicted_low_img_per_s)}–{rate(x.predicted_img_per_s)}")
    )
    return (
        f"{x.dataset} {x.setting}: measured {rate(x.measured_img_per_s)} img/s vs predicted {span} "
        f"({x.residual:+.0%}), beyond its interval and the ceiling's: not explained by the stage ceilings."
    )


def _many_off(x: f.ManyOffPrediction) -> str:
    text = (
        f"{x.count} of {x.cells} cells differ from their prediction beyond their interval "
        f"({x.residual_min:+.0%} to {x.residual_max:+.0%}): not explained by the stage ceilings"
    )
    if x.compute_measured_low and x.compute_img_per_s is not None:
        text += (
            f". Training ran faster than the compute ceiling ({rate(x.compute_img_per_s)} img/s) allows, so that "
            "ceiling was measured low — was the machine busy while it was measured? Re-run on a quiet machine"
        )
    return text + "."


def _below(x: f.ComputeBelowPublished) -> str:
    return compute_reference(x.reference) + (
        f" Below {x.threshold:.0%}: this training step is slower than a tuned one, so a tuned trainer would draw "
        "more from the input pipeline than these verdicts assume."
    )


def _borderline(x: f.BorderlineCells) -> str:
    cells = "; ".join(f"{d} {s}: {lo * 100:.1f}–{hi * 100:.1f} % ({a}/{b})" for d, s, a, b, lo, hi in x.cells)
    return (
        f"Borderline (the data-wait interval straddles a class threshold, so the class is not decided): {cells}. "
        "A longer run (--seconds) narrows the interval."
    )


def _training_not_measured(x: f.TrainingNotMeasured) -> str:
    rows = "; ".join(
        f"{key} ({role}) delivered {batches} batch(es)"
        + (f", a window needs {need}" if batches < need else "")
        for key, role, batches, need in x.loaders
    )
    return (
        f"Your script stepped an optimizer, but no training loader's window was measured: {rows}. A window "
        f"skips {x.warmup_steps} batches of warm-up plus one per worker: run with --warmup-steps 0, or let the "
        "script train longer (more epochs or batches)."
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
KERNEL_SPLIT_NOTE = (
    "While the loop waited, the kernel was read (`/proc/PID/task/TID/schedstat`) for the thread that "
    "waited — its own work on the batch (receiving it from a worker), and its wait for a core once the batch "
    "woke it — and for the process making the batch (the worker holding the next batch index, or the training process itself without workers): "
    "on a CPU (its thread and its process's other threads), runnable but waiting for a core (run-queue "
    "delay), or off-CPU — blocked reading its source (disk, network, a pipe) or on a lock. This needs no "
    "knowledge of the dataset; for an input-bound loader it decides the stage where no stage was measured "
    "alone (off-CPU: storage; on a CPU or waiting for one: decode) and checks the stage ceilings where "
    "they were. A part decides only when its interval lies above the others'."
)


def wait_split(split: Any, call: str) -> str:
    """The kernel's parts of the waits, with intervals, and its call."""
    if split is None:
        return "not read"
    parts = split.shares()
    text = " · ".join(f"{KERNEL_PARTS[k]} {pct(i.value, 0)}{_ci(i)}" for k, i in parts.items())
    verdict = {"": "too few waits to judge", "mixed": "no part stands out"}.get(
        call, f"mostly {KERNEL_PARTS.get(call, call)}"
    )
    return f"{text} ({verdict}; {len(split.wait_s)} of {split.units} waits)"


def _ci(i: Any) -> str:
    return f" [{i.low * 100:.0f}–{i.high * 100:.0f}]" if i.known else ""


URL_SCHEMES = ("http", "https", "pipe", "s3")


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
    f.ComputeBelowPublished: _below,
    f.FetchContradiction: _contradiction,
    f.NotAsAsked: lambda x: f"{x.dataset} {x.setting}: {x.note or x.regime + ' not verified'}.",
    f.FetchedUnknown: lambda x: (
        f"{x.dataset}: bytes fetched from storage could not be counted on "
        f"{x.fs_type or 'its storage (its filesystem was not identified)'} for "
        f"{', '.join(x.settings)} (no counter for it, and the cells were not verified cold); storage is "
        "assumed to serve every read."
    ),
    f.StageUndetermined: lambda x: (
        f"{x.dataset} {x.setting}: waits {pct(x.data_wait_share, 0)} for data, but no input stage's ceiling was "
        "measured for it, so which stage is to blame is not decided"
        + (f" ({'; '.join(x.why)})." if x.why else ".")
    ),
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
    f.WorkersDoNotFit: _do_not_fit,
    f.WorkerMemoryGrows: _grows,
    f.FirstPassWaits: first_pass,
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
        f"The compute ceiling, {rate(r.measured_img_per_s)} img/s, is {r.share:.0%} of the published ResNet-50 "
        f"figure for {r.gpu} ({rate(r.published_img_per_s)} img/s, {r.source})."
    )
    if r.share is not None and r.share > ABOVE_PUBLISHED:
        text += (
            f" It lies more than {(ABOVE_PUBLISHED - 1) * 100:.0f} % above it, as a ceiling can: it trains on synthetic batches "
            f"already on the device ({r.step_label}: no loader, no copy to the GPU, no augmentation on it), "
            "where a published figure is a training run with its input pipeline, often in another precision "
            "or software stack."
        )
    return text


# -- how bytes from storage were counted -------------------------------------------------------

FETCH_METHODS = {
    "block-io": "block I/O counters (`read_bytes`) of the loader's processes",
    "nfs-mountstats": "NFS client statistics (`/proc/self/mountstats`): bytes read from the server for the mount, by every process",
    "fuse-daemon": "what the FUSE daemon serving the mount read",
    "cold-reads": "cold reads: every file evicted before the window and again after each read, verified, so every byte read was fetched",
    "ram": "none: a RAM-backed filesystem has no storage below it",
    "emulated": "emulated: every read is charged to the emulated device",
    "unknown": "unknown: no counter on this filesystem, and not verified cold",
    "interface-rx": "bytes received on the network interface the source's host is reached by (`/proc/net/dev`): "
    "what crossed the network, for the whole host",
    "own-rchar": "what the loader's processes were handed through pipes and TLS sockets (`rchar` of their own "
    "threads: each byte once)",
    "read-alone": "every byte of the source read alone",
    "object-gets": "the bodies of the GETs the loader's processes made to the object store or HTTP server: no page cache holds "
    "an object, so every byte read crossed the network",
}


def phases(phases_s: dict[str, float]) -> str:
    """Where a run's time went, phase by phase, and in all."""
    parts = [f"{name} {duration(s)}" for name, s in phases_s.items()]
    return ", ".join(parts) + f" (in all {duration(sum(phases_s.values()))})"


def fetched(x: Fetched) -> str:
    """How a window's bytes from storage were counted, with cross-checks."""
    text = FETCH_METHODS.get(x.method, x.method)
    if x.method == "unknown" and x.source:  # why, in its own words
        text = f"unknown: {x.source}"
    if x.method in ("fuse-daemon", "interface-rx", "object-gets") and x.source:
        text += f" ({x.source})"
    for c in x.cross_checks:
        text += f"; cross-check: {FETCH_METHODS.get(c.method, c.source)}: {mb(c.bytes)}"
    return text


# -- progress on the terminal ------------------------------------------------------------------


def measured(result: object, dataset: str = "", position: str = "", took_s: float = 0.0) -> str:
    """One progress line for a finished measurement."""
    if isinstance(result, ComputeCeiling):
        return f"compute ceiling: {rate_ci(result.throughput())} img/s ({result.label})"
    if isinstance(result, StorageCeiling):
        emu = f" (emulated {result.emulated})" if result.emulated else ""
        regime = result.cache.regime + ("" if result.cache.verified else " NOT verified")
        return (
            f"{dataset} storage{emu}, {result.concurrency} reader(s): {rate_ci(result.bandwidth())} MB/s, "
            f"{rate(result.files_per_s)} files/s, {regime}; fetched {_fetched_short(result.fetched)}"
        )
    if isinstance(result, DecodeCeiling):
        return (
            f"{dataset} decode ceiling, {result.setting.label}: {rate_ci(result.throughput())} img/s "
            f"(from memory: {result.sample_files} files)"
        )
    if isinstance(result, ProbeFailure):
        return f"{result.dataset} {result.stage} ceiling, {result.setting}: failed — {result.error}"
    if isinstance(result, CellResult):
        return f"{position} {cell_line(result)}" + (f" ({took_s:.1f} s)" if took_s else "")
    if isinstance(result, RankCountResult):
        return rank_count_line(result)
    if isinstance(result, DeviceCell):
        what = f"{result.model}, batch {result.batch_size}, {result.setup}"
        return (
            f"{what}: {rate_ci(result.throughput())} samples/s"
            if result.measured
            else f"{what}: not measured — {result.why_not}"
        )
    return str(result)


def rank_count_line(c: RankCountResult) -> str:
    head = f"{c.ranks} rank(s), {c.regime}"
    if c.status != "ok":
        return f"{head}: FAILED — {c.reason} ({c.launch_s:.1f} s)"
    waits = ", ".join(pct(r.cell.wait_share().value, 0) for r in c.per_rank)
    return (
        f"{head}: {rate_ci(c.aggregate())} img/s all ranks; data wait per rank {waits}; "
        f"fetched {fetched_rate(c)} MB/s; {c.cores_used():.2f} cores ({c.launch_s:.1f} s)"
    )


def _fetched_short(x: Fetched) -> str:
    return "?" if x.bytes is None else f"{mb(x.bytes)} by {x.method}"


def fetched_rate(cell: CellResult | RankCountResult) -> str:
    """Fetched MB/s with its interval where the window was cut into segments, "?" unknown."""
    value, bandwidth = cell.fetched_mb_per_s(), cell.fetched_bandwidth()
    if value is None:
        return "?"
    return rate_ci(bandwidth) if bandwidth is not None and value > 0 else rate(value)


def cell_line(cell: CellResult) -> str:
    if cell.status != "ok":
        return f"{cell.dataset} {cell.setting.label}: FAILED — {cell.error}"
    img_per_s, wait = cell_figures(cell)
    return (
        f"{cell.dataset} {cell.setting.label}: {img_per_s} img/s, data wait {wait}, {cell.steps} steps "
        f"(stopped by {cell.stopped_by}), start-up {cell.startup_s:.2f} s"
    )


def cell_figures(c: CellResult) -> tuple[str, str]:
    """A cell's img/s and data wait with their intervals, marked where the workers' own batches
    gave them (W); where the observations cannot decide, the words say so and what would."""
    r = c.rates()
    mark = " (W)" if r.method == "workers" else ""
    if _decided(r.throughput):
        return rate_ci(r.throughput) + mark, share_ci(r.wait_share) + mark
    return rate(c.img_per_s), f"{pct(r.wait_share.value)}: {_too_few(c, r.turns)}"


def _decided(i: Interval) -> bool:
    """An interval that tells its figure apart from 0 (narrower than the figure itself)."""
    return i.known and i.low > 0 and i.high - i.value <= i.value


def _too_few(c: CellResult, turns: float) -> str:
    """Why a cell's figures are not decided, and about how long a window would decide them."""
    if not c.workers:
        return f"too few steps to decide ({c.steps})"
    per_turn_s = c.elapsed_s / turns if turns > 0 else 0.0
    more = (
        f"; a window of about {duration(MIN_BATCHES * per_turn_s)} would hold {MIN_BATCHES}"
        if per_turn_s
        else ""
    )
    return f"too few batches to decide: {turns:.1f} turns of {c.workers} workers{more}"


# -- ioprof place ------------------------------------------------------------------------------


def _epochs_read(r: f.Recommendation) -> str:
    """Which epochs read the current location's storage, and why."""
    if r.reading_epochs == 1:
        return (
            f"only the first of the {r.epochs} epochs reads the storage there: the dataset fits in the RAM the "
            "page cache can use and the filesystem keeps read pages"
        )
    if r.current_object_store:
        return (
            f"every one of the {r.epochs} epochs reads the object store: nothing on this host keeps an object "
            "between GETs"
        )
    if r.fits_in_ram and r.current_keeps_pages is False:
        return (
            f"every one of the {r.epochs} epochs reads the storage there: the dataset would fit in RAM, but the "
            "filesystem drops read pages at every open (checked)"
        )
    return f"every one of the {r.epochs} epochs reads the storage there: the dataset does not fit in the RAM the page cache can use"


def recommendation(r: f.Recommendation | None) -> str:
    """``ioprof place``'s one decision, in one sentence consistent with its figures."""
    if r is None or r.action == "nothing-measured":
        return "No location could be measured; see the table for why."
    kind = "simulated " if r.simulated_demand else ""
    need = f"{r.threshold:.0%} of the {kind}{rate(r.demand_img_per_s)} img/s the accelerator consumes"
    feeds = f"it feeds {rate(r.predicted_img_per_s)} img/s with {worker_count(r.best_workers)}"
    if r.action == "keep":
        return f"Keep the dataset where it is: {feeds}, at least {need} (storage headroom {r.storage_headroom:.1f}×)."
    if r.action == "move":
        copy = ""
        if r.copy_s is not None and r.saved_s is not None:
            copy = (
                f"; copying the dataset there takes about {duration(r.copy_s)} and saves {duration(r.saved_s)} "
                f"over the {r.epochs} epochs ({_epochs_read(r)})"
            )
        return f"Move the dataset to {r.location}: {feeds}, at least {need}{copy}."
    if r.action == "keep-copy-does-not-pay" and r.alternative is not None:
        where, img_s, copy_s, saved_s = r.alternative
        warm = (
            " — read the files once before training to warm the page cache" if r.reading_epochs == 1 else ""
        )
        return (
            f"Keep the dataset where it is: {where} would feed {rate(img_s)} img/s, but copying it there takes "
            f"about {duration(copy_s)} and saves only {duration(max(0.0, saved_s))} over the {r.epochs} epochs, "
            f"because {_epochs_read(r)}{warm}."
        )
    tail = " — a faster disk will not fix that." if r.limited_by != "storage" else "."
    return (
        f"No location measured keeps the accelerator {r.threshold:.0%} busy; the best, {r.location}, feeds "
        f"{rate(r.predicted_img_per_s)} img/s ({r.busy_share:.0%}), limited by {r.limited_by}{tail}"
    )


# -- ioprof run ----------------------------------------------------------------------------------

ENDED = {
    "finished": "finished",
    "failed": "failed",
    "interrupted": "was interrupted",
    "stopped-by-ioprof": "was stopped by ioprof after the window (--stop-after)",
    "running": "is still running",
}


def run_summary(result: object, code: int | None, ended: str) -> str:
    """``ioprof run``'s one line: how the script ended and what was observed."""
    from ioprof.core.results import SweepResult

    assert isinstance(result, SweepResult)
    how = ENDED.get(ended, ended) + (f" (exit code {code})" if code not in (None, 0) else "")
    if result.script is not None and result.script.shm_failure:
        how += f" because {result.script.shm_failure}"
    if not result.loaders:
        return f"your script {how} before iterating any DataLoader: nothing to measure"
    seen = ", ".join(f"{lo.key} ({lo.role}, {lo.batches} batches)" for lo in result.loaders)
    return f"your script {how}; observed {seen}. " + verdict_line(result.analysis).replace("**", "")


# -- ioprof whatif ---------------------------------------------------------------------------------

ALTERNATIVES = {
    "baseline": "your pipeline as it is",
    "threads": "a thread pool instead of worker processes (torchdata)",
    "decode_jpeg": "torchvision.io.decode_jpeg on the CPU instead of PIL",
    "gpu_decode": "batched nvJPEG decode on the GPU",
    "resized-256": "a copy pre-resized to a 256 px short side",
    "resized-320": "a copy pre-resized to a 320 px short side",
    "shards": "packed shards (tar, read sequentially)",
    "loose-on-scratch": "the same files (or shards), copied to the scratch storage (the copies' control)",
    "more-workers": "twice the loader's workers (twice the requests in flight)",
    "threads-per-worker-4": "4 threads reading each worker's batch (4× the requests in flight, no more processes)",
    "prefetch-1": "prefetch_factor=1",
    "prefetch-4": "prefetch_factor=4",
    "prefetch-8": "prefetch_factor=8",
    "persistent_workers": "persistent_workers=True",
    "pin_memory": "pin_memory=True",
    "cache": "the share of the dataset RAM can hold, warm",
}

WHY_NOT = {
    "needs-cuda": "needs a CUDA device; this machine has none",
    "not-built": "not built yet: it has never been run on a GPU with ioprof",
    "needs-workers": "applies to worker processes, and the current setting has none",
    "already-small": "the images are already that small",
    "emulated": "storage is emulated here: there is no page cache to warm",
    "object-store": "no page cache holds an object from a store: the local copy (loose files on the scratch "
    "folder) is the cache to compare",
    "sharded": "applies to loose image files; your data is already tar shards",
    "sharded-not-built": "not measured on tar shards in this version",
    "not-requests": "applies to data read by requests (an object store, shards over HTTP); more workers on a "
    "filesystem are the sweep's question (`ioprof sweep --workers`)",
}

# The change each alternative needs in a training script, in a few lines.
CODE = {
    "threads": """from torchdata.nodes import Batcher, Loader, Mapper, ParallelMapper, SamplerWrapper
node = ParallelMapper(SamplerWrapper(sampler), map_fn=dataset.__getitem__, num_workers=N, method="thread")
loader = Loader(Mapper(Batcher(node, batch_size=B, drop_last=True), collate_fn))""",
    "decode_jpeg": """from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2
dataset = ImageFolder(root, loader=lambda p: decode_jpeg(read_file(p), mode=ImageReadMode.RGB),
    transform=v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
                          v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]))""",
    "resized-256": """# once, offline: every image with its short side at 256 px (e.g. PIL's Image.thumbnail, or
# `mogrify -resize "256x256^" *.jpg`), then point ImageFolder at the copy""",
    "resized-320": """# once, offline: every image with its short side at 320 px, then point ImageFolder at the copy""",
    "shards": """import webdataset as wds  # pack once: tar files of a few hundred MB, key.jpg + key.cls
dataset = (wds.WebDataset("shards/shard-{00000..00999}.tar", shardshuffle=True)
           .shuffle(1000).decode("pil").to_tuple("jpg", "cls").map_tuple(transform, int))
loader = DataLoader(dataset, batch_size=B, num_workers=N)""",
    "prefetch-1": "DataLoader(..., prefetch_factor=1)",
    "prefetch-4": "DataLoader(..., prefetch_factor=4)",
    "prefetch-8": "DataLoader(..., prefetch_factor=8)",
    "persistent_workers": "DataLoader(..., persistent_workers=True)",
    "more-workers": "DataLoader(..., num_workers=2 * N)  # each worker makes its own client after the fork",
    "threads-per-worker-4": """class Threaded(Dataset):  # DataLoader hands each worker its batch's indices here
    def __getitems__(self, indices):  # a pool made in the worker, after the fork
        self.pool = getattr(self, "pool", None) or ThreadPoolExecutor(4)
        return [self.decode(b, i) for i, b in zip(indices, self.pool.map(self.get_object, indices))]""",
    "pin_memory": "DataLoader(..., pin_memory=True); batch.to(device, non_blocking=True)",
    "cache": "# more RAM for the page cache (or a smaller dataset): the warm share is served from memory",
}


def why_not(code: str) -> str:
    if code.startswith("missing:"):
        package = code.split(":", 1)[1]
        return f"{package} is not installed (pip install {package})"
    if code.startswith("pages-not-kept:"):
        fs = code.split(":", 1)[1]
        return (
            f"it cannot be warm here: {fs} drops read pages at every open (checked: files read and closed were no "
            "longer resident), so every epoch reads the storage whatever RAM there is"
        )
    return WHY_NOT.get(code, code)


def _on_data(x: f.RankedAlternative) -> str:
    if x.data_gain is None or x.control == "baseline":
        return ""
    how = (
        "estimated from the bytes per image it reads against the bandwidth your storage delivered read alone"
        if x.data_gain_estimated
        else "measured"
    )
    return f" On your data's own storage it would give about {x.data_gain:.2f}× ({how})."


def whatif_answer(r: f.Ranking | None, setting: str) -> str:
    """``ioprof whatif``'s first sentence: each fix credited with its gain over its control only,
    the storage move named as what it is."""
    if r is None or not r.ranked:
        return "**No answer** — your current pipeline could not be measured."
    base = next(x for x in r.ranked if x.name == "baseline")
    now = f"your current setting ({setting}, {rate(base.img_per_s)} img/s)"
    move = next((x for x in r.ranked if x.name == r.storage_move), None)
    move_text = (
        f" The same loose files on the scratch storage run {move.gain:.2f}× faster than where they live: that "
        f"part of any gain is moving the data, not changing how it is read — `ioprof place` measures where it "
        "should live and whether the copy pays."
        if move is not None
        else ""
    )
    if r.best:
        best = next(x for x in r.ranked if x.name == r.best)
        against = (
            "its control, the same loose files on the same scratch storage"
            if best.control != "baseline"
            else now
        )
        return (
            f"**{first_up(ALTERNATIVES.get(best.name, best.name))} is the best fix: {rate(best.img_per_s)} img/s, "
            f"{best.fix_gain or 0:.2f}× {against}** — beyond the noise of both.{_on_data(best)}{move_text}"
        )
    if move is not None:
        return (
            f"**No fix beats its control beyond the noise; moving the data does**: the same loose files on the "
            f"scratch storage run {move.gain:.2f}× {now} — that is where the data lives, not how it is read: "
            "`ioprof place` measures where it should live and whether the copy pays."
        )
    if r.compute_bound:
        return (
            f"**Nothing beats {now} beyond the noise: training is compute-bound here, so a faster input pipeline "
            "cannot speed it up.**"
        )
    return (
        f"**Nothing measured beats {now} beyond the noise**, though it is {r.baseline_input_bound} input-bound: "
        "see what was not measured here."
    )


def first_up(text: str) -> str:
    return text[:1].upper() + text[1:]


def dataset_facts(d: DatasetInfo) -> str:
    """What is known of a dataset, in words; what is not known is said so, never printed as 0."""
    parts = [f"{d.files:,} files" if d.files is not None else "how many files: unknown"]
    if d.sharded and d.files is not None and d.samples is not None:
        parts = [f"{d.files:,} tar shards, about {d.samples:,} samples (estimated from the first shard's)"]
    if d.total_bytes is not None:
        parts.append(f"{d.total_bytes / 1e6:,.1f} MB")
    if d.mean_file_bytes is not None:
        at = (
            f" at {d.mean_width_px:,.0f}×{d.mean_height_px:,.0f}"
            if d.mean_width_px is not None and d.mean_height_px is not None
            else ""
        )
        bpp = f" ({d.bits_per_pixel:.1f} bits/pixel)" if d.bits_per_pixel is not None else ""
        parts.append(f"mean {d.mean_file_bytes / 1e3:,.0f} kB a sample{at}{bpp}")
    else:
        parts.append("size per sample unknown")
    where = f"on {d.fs_type} ({d.mount_source})" if d.fs_type else "its filesystem not identified"
    return ", ".join(parts) + f", {where}" + (f", `{d.path}`" if d.path else "")


TRANSIENT_WHY = "a link's burst, a connection's slow start; found by MSER-5"


def transient_cut(storage: Sequence[StorageCeiling]) -> str:
    """What the storage readings left out of their rates at the start — '' where none did: the
    first reads that came as a start-up transient, each reading's count of its completions."""
    cut = [s for s in storage if s.warmup]
    if not cut:
        return ""
    unit = "chunks" if cut[0].latency_kind == "first byte" else "files"
    return (
        f"the rates leave out the first reads, which came as a start-up transient unlike the rest ({TRANSIENT_WHY}) "
        "and are counted as fetched all the same: "
        + ", ".join(
            f"{s.warmup} of {len(s.completed_s):,} {unit} at {s.concurrency} reader{'s' if s.concurrency > 1 else ''}"
            for s in cut
        )
    )
