"""The sentences a sweep and a run share — the verdict, the answer per dataset, the advice, how
bytes were counted, progress on the terminal. Analysis returns typed verdicts, advice and
findings with their numbers; this module turns them into words (each finding: ``findings``; a
command's own: its ``render/<command>.py``). Pure: the same objects give the same text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ioprof.core import findings as f
from ioprof.core.config import worker_count
from ioprof.core.counts import Fetched, ReadBack
from ioprof.core.results import (
    CellResult,
    ComputeCeiling,
    DatasetInfo,
    DecodeCeiling,
    ProbeFailure,
    RunInfo,
    StorageCeiling,
)
from ioprof.core.results_devices import DeviceCell
from ioprof.core.results_scale import RankCountResult
from ioprof.core.stats import MIN_BATCHES, Interval
from ioprof.render.findings import finding, first_pass
from ioprof.render.fmt import counted, duration, mb, pct, rate, rate_ci, share_ci, share_range, size

PLACE_HINT = "`ioprof place --data PATH --candidates /local/nvme,/dev/shm`"


# -- the verdict and the answer ----------------------------------------------------------------


DECODE_BY_WORKERS = (
    "(W): the interval rests on the workers' own batches (each worker's time from one batch to its next), "
    "where they hold more of them than the probe held whole turns of the workers; the rate itself is the "
    "batches' arrivals."
)


def decode_rate(d: DecodeCeiling) -> str:
    """A decode ceiling's rate with its interval, marked (W) where the workers' batches gave it."""
    interval, method = d.rate()
    return rate_ci(interval) + (" (W)" if method == "workers" else "")


def decode_by_workers(decode: Sequence[DecodeCeiling]) -> list[str]:
    """The (W) mark's note and a blank line, where any of ``decode`` took its interval from the
    workers' batches; nothing otherwise."""
    return [DECODE_BY_WORKERS, ""] if any(d.rate()[1] == "workers" for d in decode) else []


def compute_steps(comp: ComputeCeiling) -> str:
    """The steps a compute ceiling rests on: its own, and the serial cells' where they were pooled."""
    cut = (
        f" (after its first {comp.startup_steps}, left out as a fresh model's start-up: MSER-5)"
        if comp.startup_steps
        else ""
    )
    if not comp.alone_steps:
        return f"synthetic batches already on the device, {len(comp.step_s)} steps{cut}"
    return (
        f"{comp.alone_steps} steps on synthetic batches already on the device{cut} and the serial cells' "
        f"{len(comp.step_s) - comp.alone_steps} (the same step alone, later in the sweep: a CPU's pace is the "
        "host's, which varies)"
    )


def verdict_line(a: f.Analysis | None) -> str:
    """The report's first sentence."""
    if a is not None and a.first_pass is not None:
        fp = a.first_pass
        steady = verdict_line(replace(a, first_pass=None)).replace("**Verdict: ", "", 1).replace("**", "", 1)
        start = " — the bottleneck is its loader's start"
        by = {"storage": " — the bottleneck is storage", "loader": start, "start": start}
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
            f"{where}, and neither a stage measured alone nor the kernel's split of its waits names one "
            "(see *What each verdict rests on*)."
        )
    return (
        f"**Verdict: {a.overall_input_bound} input-bound — the bottleneck is {a.overall_bottleneck}**: {where}."
        + (leading(worst) if a.overall_bottleneck == "decode" else "")
    )


def leading(v: f.DatasetVerdict) -> str:
    """Where decode's time goes: the costliest stage in the workers, when they were timed."""
    if not v.leading_stage or v.leading_share is None:
        return ""
    waited = v.waited_for_core_share
    return (
        f" Costliest stage in the loader: **{v.leading_stage}**, "
        f"{share_range(v.leading_share, v.leading_share_low, v.leading_share_high)} of the workers' time "
        "per sample ("
        # on a busy host most of that time can be the wait for a core, no stage's own: said beside it
        + (
            f"{pct(waited, 0)} of it they waited for a core; "
            if waited is not None and waited >= 0.005
            else ""
        )
        + "see *Inside the loader*)."
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
            f"the fastest multiprocess setting ({v.best_multiprocess_setting}, {rate(v.best_multiprocess_img_per_s)} img/s) is "
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
            f"{rate(a.demand_img_per_s)} img/s and each worker decodes about {_per_worker(a)} img/s"
            + (
                f"; at {a.workers_needed} the loop did not wait for them in its window."
                if a.workers_needed_kept_up
                else "."
            )
        )
    if a.fix_first != "storage" and a.demand_img_per_s:
        out.append(_storage_need(a))
    if a.serial_suffices is not None:
        out.append(
            "The serial loader (num_workers=0) suffices."
            if a.serial_suffices
            else f"The serial loader does not suffice: it waits {pct(a.serial_wait_share, 0)} of step time for data."
        )
    elif a.serial_wait_share is not None:  # measured, its class borderline
        out.append(
            f"Whether the serial loader suffices is not decided: it waits {pct(a.serial_wait_share)} of step "
            "time for data, an interval that straddles a class's bar (see Warnings)."
        )
    return [s for s in out if s]


def _storage_mb(a: f.Advice) -> str:
    """The best cold storage figure, with its interval where it has one."""
    i = a.storage_mb_per_s_interval
    return rate_ci(i) if i is not None else rate(a.storage_mb_per_s_measured)


def _not_cold(a: f.Advice) -> str:
    """How the storage figure was read, where not cold: from memory, or not verified cold."""
    return {
        "cold": "",
        "memory": " (it is memory: nothing to evict)",
        "unverified": " read alone, not verified cold (the page cache may have served it)",
    }[a.storage_read]


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
        read = _not_cold(a) or " cold"
        where = f"; storage delivers {_storage_mb(a)} MB/s{read}" + (f", {verdict}" if verdict else "")
    if a.window_fetched_share is not None:
        fetched = (
            "none of what it read (a copy served it"
            if a.window_fetched_share == 0.0
            else f"{pct(a.window_fetched_share, 0)} of what it read (a copy served the rest"
        )
        where += (
            f" — in a pass that reads it from storage: in its window it fetched {fetched}: a cache of its own, "
            "or the page cache)"
        )
    if a.storage_mb_per_s_needed is None or a.mean_file_bytes is None:
        why = (
            "the files it reads are known, but not how many samples they hold: its pipeline was not measured alone"
            if a.files_known
            else "its dataset does not say what it reads"
        )
        return (
            f"{a.consumer.capitalize()} at {rate(a.demand_img_per_s)} img/s (the pace its step allows): the bytes "
            f"it reads per image are not known ({why}), so neither is the bandwidth it would need{where}."
        )
    return (
        f"{a.consumer.capitalize()} at {rate(a.demand_img_per_s)} img/s (the pace its step allows) would draw "
        f"{rate(a.storage_mb_per_s_needed)} MB/s from storage ({a.mean_file_bytes / 1e3:,.0f} kB an image){where}."
    )


def _storage_fix(a: f.Advice) -> list[str]:
    share = a.storage_fetched_share
    need = (
        f"needs {rate(a.storage_mb_per_s_needed)} MB/s ({a.mean_file_bytes / 1e3:,.0f} kB an image"
        + (f"; {rate(a.storage_mb_per_s_needed * share)} MB/s at the share it fetched" if share else "")
        + ")"
        if a.storage_mb_per_s_needed is not None and a.mean_file_bytes is not None
        else "needs more (the bytes it reads per image are not known)"
    )
    delivers = (
        f"the storage delivers {_storage_mb(a)} MB/s{_not_cold(a)} ({rate(a.storage_img_per_s_best)} img/s "
        f"at {a.storage_best_readers} reader(s)"
        + (
            f" reading whole samples; {rate(a.storage_img_per_s_fetched)} img/s to this loader, which fetched "
            f"{pct(share, 0)} of the bytes its samples hold"
            if share and a.storage_img_per_s_fetched
            else ""
        )
        + ")"
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
    """Whether the ceiling that meets the demand does so only in its middle: its interval reaches
    below, and no window at that many workers showed them keeping up."""
    i = a.workers_needed_interval
    return (
        not a.workers_needed_kept_up
        and i is not None
        and i.known
        and a.demand_img_per_s is not None
        and i.low < a.demand_img_per_s
    )


def _undecided_words(a: f.Advice) -> str:
    n, i = a.workers_needed or 0, a.workers_needed_interval
    assert i is not None
    return (
        f"Whether {worker_count(n)} {'keeps' if n == 1 else 'keep'} up with decoding is not decided: measured "
        f"alone, {'it decodes' if n == 1 else 'they decode'} {rate_ci(i)} img/s against the {rate(a.demand_img_per_s)} img/s "
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
    fed = f", {a.decode_fed} with data" if a.decode_fed else ""
    out.append(
        f"Feeding {rate(a.demand_img_per_s)} img/s takes about {math.ceil(a.workers_estimated or 0)} workers"
        f"{_workers_range(a.demand_img_per_s, a.per_worker_interval)} at {_per_worker(a)} img/s each; "
        f"the best measured ({worker_count(a.best_decode_workers or 0)}{fed}) decodes "
        f"{rate_ci(best) if best is not None else rate(a.best_decode_img_per_s)} img/s, "
        f"{pct(a.decode_shortfall, 0)} of the demand."
    )
    if a.decode_fed:
        out.append(
            f"Your dataset deals out {counted(a.decode_fed, 'shard')} among the workers, so "
            f"only {worker_count(a.decode_fed)} {'makes' if a.decode_fed == 1 else 'make'} batches: more workers "
            "need more shards first (at least "
            f"{math.ceil(a.workers_estimated or 0)}, one a worker)."
        )
    if not a.cores_suffice:
        out.append(
            f"This machine has {a.cores_usable} usable cores, so more workers cannot get there: use fewer or "
            "cheaper transforms, torchvision.io.decode_jpeg, GPU decode (decode_jpeg on CUDA, DALI), or store "
            "smaller images."
        )
    return out


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
    "own-rchar": "what the loader's processes read: pipes, TLS sockets and any local file alike, a cache of "
    "their own included (`rchar` of their own threads: each byte once)",
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
        cut = f"; its first {result.startup_steps} steps left out as start-up" if result.startup_steps else ""
        return f"compute ceiling: {rate_ci(result.throughput())} img/s ({result.label}{cut})"
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
    waits = ", ".join(pct(r.wait_share().value, 0) for r in c.per_rank)
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
    mark = " (W)" if r.method in ("workers", "drained") else ""
    if decided(r.throughput):
        return rate_ci(r.throughput) + mark, share_ci(r.wait_share) + (" (W)" if r.share_from_workers else "")
    return rate(r.throughput.value), f"{pct(r.wait_share.value)}: {_too_few(c, r.turns)}"


def busy_figure(c: CellResult) -> str:
    """A cell's busy share (the loop's time not waiting for data: MLPerf Storage's AU) with its
    interval where its figures are decided, marked (W) where the workers' batches gave it."""
    r = c.rates()
    if decided(r.throughput):
        return share_ci(r.busy) + (" (W)" if r.share_from_workers else "")
    return pct(r.busy.value)


BUSY_WORDS = {
    "busy": "meets it",
    "starved": "short of it",
    "borderline": "not decided against it (its interval reaches both sides, or there is none)",
}


def decided(i: Interval) -> bool:
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
    unit = "chunks" if cut[0].latency_kind == "first byte" else "samples" if cut[0].by_member else "files"
    return (
        f"the rates leave out the first reads, which came as a start-up transient unlike the rest ({TRANSIENT_WHY}) "
        "and are counted as fetched all the same: "
        + ", ".join(
            f"{s.warmup} of {len(s.completed_s):,} {unit} at {s.concurrency} reader{'s' if s.concurrency > 1 else ''}"
            for s in cut
        )
    )


# how long a command's read-back may take, in the words of its report
READ_BACK_LIMIT = "the measurements took, and an interrupted run reads none back"


def read_back(back: ReadBack, limit: str = READ_BACK_LIMIT) -> str:
    """What reading a user's files cold evicted of the page cache they had, and what was read back
    (``pagecache.read_back``); ``limit``: what the read-back's time is bounded by."""
    said = f"Reading your files cold evicted the pages the page cache held of {back.files:,} of them; "
    why = f"(the read-back stops after as long as {limit}): your training reads "
    if back.bytes <= 0:
        return said + f"none of their {size(back.left_bytes)} were read back {why}them from storage again."
    said += f"{size(back.bytes)} were read back in {duration(back.seconds)}"
    if back.left_bytes <= 0:
        return said + ", so your training finds the cache as it left it."
    return said + f", and {size(back.left_bytes)} were not {why}those from storage again."


def read_back_lines(run: RunInfo) -> list[str]:
    """The report's line on what the command's cold reads evicted of the user's cached files."""
    return [f"- Page cache: {read_back(run.read_back)}"] if run.read_back is not None else []
