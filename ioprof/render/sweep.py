"""``report.md`` of a sweep or probe: the answer first, then the evidence, then how it was measured.

Pure: the same analyzed result gives the same text. Sentences come from ``words``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ioprof.conclude.sweep import is_sweep
from ioprof.core.config import DECIDED_REL_HALF_WIDTH
from ioprof.core.findings import CpuIsTheDevice, FetchedAboveStorage
from ioprof.core.rates import busy_class
from ioprof.core.resultfile import atomic_write_text
from ioprof.core.results import CellResult, DatasetCeilings, RunInfo, SweepResult
from ioprof.core.stats import INTERIM_LOOKS, LOOKS, looks_level, share_below, summarize
from ioprof.core.thresholds import (
    DECODE_ABOVE_COMPUTE,
    HIGHLY_INPUT_BOUND_SHARE,
    MIN_BUSY_SHARE,
    MODERATELY_INPUT_BOUND_SHARE,
    READ_CALLS_MIN_SHARE,
)
from ioprof.render import inside, speedup, words
from ioprof.render.findings import DECIDED_BY, KERNEL_SPLIT_NOTE, compute_reference, finding, wait_split
from ioprof.render.fmt import mb, ms, pct, rate, rate_ci, rate_span
from ioprof.render.mdtable import table
from ioprof.render.plots import (
    GPU_UTIL_PNG,
    STAGES_PNG,
    THROUGHPUT_PNG,
    plot_gpu_utilization,
    plot_stages,
    plot_throughput,
)
from ioprof.render.results_csv import render_csv

NVML_NOTE = (
    "NVML's GPU utilization is the share of each sample period in which at least one kernel was "
    "running — a single small kernel counts as 100 % busy — so it can look high while the GPU is "
    "starved; the verdict rests on the data-wait share, and utilization is supporting evidence."
)
INTERVALS = (
    "`± x %` is the half-width of a 95 % interval relative to the figure, `[a–b]` a 95 % interval: "
    "batch means over up to 10 groups of consecutive measured steps (cells), batches (decode) or "
    "file completions (storage), Student's t. A measurement that stops once its interval is within "
    f"± 5 % looks at it only at fixed counts (the first, then each doubling: {INTERIM_LOOKS} looks) and "
    f"at its cap, and each of its intervals is held to {pct(looks_level(LOOKS), 1)} so that the one it "
    f"stops at still covers 95 % (Bonferroni over {LOOKS} looks); a window of fixed length (`--steps`, "
    "your script's) needs no such correction. `± ?`: too few samples for an interval. An interval "
    "describes this run's window; a repeat on a shared machine can differ more (`ioprof compare "
    "--repeat` measures that from repeats you declare)."
)


def render_markdown(result: SweepResult) -> str:
    """The whole report as markdown (a user's own run has its own shape: ``render.run``)."""
    sweep = is_sweep(result)
    stages = ", ".join(result.config.get("stages", ()))
    out = [f"# ioprof {'sweep' if sweep else 'probe ' + stages} — {result.run.started_at[:10]}", ""]
    if result.run.interrupted:
        out += ["> **This run was interrupted.** The figures below are the cells that finished.", ""]
    if sweep:
        out += [words.verdict_line(result.analysis), ""]
    else:
        out += [
            f"**The {stages} ceiling alone** — no training on real data, so no verdict; "
            "`ioprof sweep` measures every stage and the training they feed.",
            "",
        ]
    out += _answer(result, sweep)
    if sweep:
        out += (
            speedup.section(result)
            + _cells(result)
            + _evidence(result)
            + inside.section(result)
            + _gpu_timeline(result)
        )
    out += _ceilings(result)
    if sweep:
        out += _gpu_utilization(result)
    out += _how_measured(result, sweep)
    return "\n".join(out)


def _answer(result: SweepResult, sweep: bool) -> list[str]:
    a = result.analysis
    out = ["## The answer", ""]
    if a is None:
        return out
    roles = {lo.key: lo.role for lo in result.loaders}
    out += [f"- {line}" for line in words.headline(a, sweep, [d.label for d in result.datasets], roles)] + [
        ""
    ]
    out += _busy(result)
    for adv in a.advice:
        text = words.advice(adv)
        if text:
            out += [f"**{adv.dataset}** — " + " ".join(text), ""]
    warnings = [finding(x) for x in a.findings if not isinstance(x, CpuIsTheDevice)]
    if warnings:
        out += ["### Warnings", ""] + [f"- {w}" for w in warnings] + [""]
    return out


def _busy(result: SweepResult) -> list[str]:
    """MLPerf Storage's accelerator utilization at each training dataset's best setting, against
    its 90 % bar: the share of the loop's time not spent waiting for data."""
    roles = {lo.key: lo.role for lo in result.loaders}
    verdicts = result.analysis.datasets if result.analysis is not None else ()
    chosen = {v.dataset: v.best_setting for v in verdicts}  # the verdict's best setting
    parts, settings = [], 0
    for info in result.datasets:
        cells = [
            c
            for c in result.cells
            if c.dataset == info.label and c.status == "ok" and roles.get(c.dataset, "training") == "training"
        ]
        best = next((c for c in cells if c.setting.label == chosen.get(info.label)), None)
        if best is None:
            continue
        settings = max(settings, len(cells))
        where = f" ({best.setting.label})" if len(cells) > 1 else ""
        said = words.BUSY_WORDS[busy_class(best.rates().busy)]
        parts.append(f"{info.label}{where} {words.busy_figure(best)}, {said}")
    if not parts:
        return []
    return [
        f"**Accelerator busy** (MLPerf Storage's AU: the share of the loop's time not spent waiting for data; its "
        f"bar is {pct(MIN_BUSY_SHARE, 0)}){' at the best setting' if settings > 1 else ''}: "
        + "; ".join(parts)
        + ".",
        "",
    ]


def _cache(c: CellResult) -> str:
    mark = "verified" if c.cache.verified else "**NOT verified**"
    return f"{c.cache.regime}, {mark}"


def _fetched_above(result: SweepResult) -> set[tuple[str, str, int]]:
    """Cells whose fetched figure exceeds what the storage delivers: a finding, not a figure."""
    if result.analysis is None:
        return set()
    above = {(x.dataset, x.setting) for x in result.analysis.findings if isinstance(x, FetchedAboveStorage)}
    return {c.key for c in result.cells if (c.dataset, c.setting.label) in above}


def _cell_row(c: CellResult, sim: bool, impossible: bool = False) -> list[str]:
    if c.status != "ok":
        return [c.dataset, c.setting.label, "failed", "", "", "", "", "", "", "", "", c.error]
    v = c.verdict
    shown = "see warnings" if impossible else words.fetched_rate(c)
    predicted = "—"
    if v and v.predicted_img_per_s:
        low = v.predicted_low_img_per_s or v.predicted_img_per_s
        predicted = f"{rate_span(low, v.predicted_img_per_s)} ({v.predicted_by})"
    klass: str = v.input_bound if v else "—"
    if v and v.input_bound == "borderline":
        klass = f"borderline ({v.input_bound_range[0]}/{v.input_bound_range[1]})"
    gpu = f"; GPU {_gpu_mean(c)}" if c.gpu.available else ""
    return [
        c.dataset,
        c.setting.label,
        *words.cell_figures(c),
        words.busy_figure(c),
        klass,
        v.bottleneck if v else "—",
        predicted,
        f"{shown} / {'— (page faults)' if v and v.read_by_faults else rate(c.requested_mb_per_s())} "
        f"({c.fetched.method})",
        _cache(c),
        f"{c.startup_s:.2f} s" if c.startup_s else "—",
        f"{c.steps} ({c.stopped_by}){gpu}",
    ]


def _cells(result: SweepResult, title: str = "## Every cell") -> list[str]:
    sim = result.compute is not None and result.compute.simulated
    emu = bool(result.config.get("storage_profile"))
    head = [
        "dataset",
        "loader",
        "img/s" + (" (sim. compute)" if sim else ""),
        "data wait",
        "busy (AU)",
        "input-bound",
        "bottleneck",
        "predicted img/s (from)",
        "MB/s fetched / read (counted by)" + (" (emulated)" if emu else ""),
        "cache",
        "start-up",
        "steps (stopped by)",
    ]
    methods = sorted({c.fetched.method for c in result.cells if c.status == "ok"})
    above = _fetched_above(result)
    out = [title, "", *table(head, [_cell_row(c, sim, c.key in above) for c in result.cells]), ""]
    out += [
        f"Data wait is the share of step time spent blocked waiting for the next batch; busy (AU) is the rest, "
        f"the loop's time not waiting (MLPerf Storage's accelerator utilization, whose bar is {pct(MIN_BUSY_SHARE, 0)}). "
        "Data wait classes: "
        f"≥ {pct(HIGHLY_INPUT_BOUND_SHARE, 0)} highly input-bound, ≥ {pct(MODERATELY_INPUT_BOUND_SHARE, 0)} moderately, "
        "else not (TensorFlow's input-pipeline analyzer); a class whose interval straddles a threshold is "
        "borderline. The prediction is a range: the stages overlapping perfectly (the slowest sets the pace) "
        "down to each worker reading and then decoding in turn (the serial loader: at best the storage "
        "delivering while the process decodes and steps, at worst reading, decoding and stepping in "
        'turn). "MB/s fetched" is what came from storage '
        "(its interval from the window cut where the counters were read again, every half second or less), "
        '"read" what the loader read from the dataset\'s files through read() calls ("— (page faults)" where '
        "its samples came as pages of a memory-mapped file, which no read() counts). Intervals rest on the loop's steps, in groups of "
        "whole turns of the workers (one batch each; step by step where the workers could make wholly more than "
        "the step takes), or — marked (W) — on the workers' own batches where they hold more observations (each "
        "one's time from a batch to its next: a turn of the loop sees one worker's; the loop's total agrees; the data wait "
        "then still the loop's own, but in windows of too few turns), or where they made fewer in it than the loop took (it drained a queue filled before its window), on their batches alone, its data "
        "wait never below the loop's own (a drain only spared it waits); no rate's interval reaches above what the step alone or the workers allow. How the fetched bytes were counted:",
        "",
        *(f"- `{m}`: {words.FETCH_METHODS.get(m, m)}" for m in methods),
        "",
    ]
    retried = [c for c in result.cells if c.retries]
    if retried:
        out += [
            "The object store's client repeated requests in these windows (throttling, 5xx replies or dropped "
            "connections; each costs a request, and the backoff before it is in the data wait): "
            + ", ".join(f"{c.dataset} {c.setting.label}: {c.retries:,}" for c in retried)
            + ".",
            "",
        ]
    if result.cells and result.kind != "run":
        out += [f"![Training throughput against loader workers]({THROUGHPUT_PNG})", ""]
    return out


def _evidence(result: SweepResult) -> list[str]:
    """Per cell, the numbers its verdict was decided from, and by which method."""
    kernel = any(c.wait_split is not None for c in result.cells)
    rows = []
    for c in result.cells:
        v = c.verdict
        if v is None:
            continue
        ceilings = ", ".join(
            f"{k} {rate(x)}" if x != float("inf") else f"{k}: not involved (nothing fetched)"
            for k, x in sorted(v.rates.items())
        )
        miss = "unknown" if v.storage_miss_ratio is None else pct(v.storage_miss_ratio, 0)
        row = [c.dataset, c.setting.label, v.bottleneck, ceilings or "—", miss, words.fetched(c.fetched)]
        if kernel:
            row[3:3] = [
                DECIDED_BY.get(v.decided_by, "—"),
                wait_split(c.wait_split, v.kernel_call),
            ]
        rows.append(row)
    if not rows:
        return []
    head = [
        "dataset",
        "loader",
        "bottleneck",
        "stage ceilings used (img/s)",
        "share of bytes read fetched",
        "bytes fetched counted by",
    ]
    if kernel:
        head[3:3] = ["decided by", "while the loop waited, the producer of its batch was (kernel)"]
    return [
        "### What each verdict rests on",
        "",
        *table(head, rows),
        "",
        "The storage ceiling is scaled to the share of the bytes read that came from storage (a cell "
        "served by the page cache is not limited by the disk); where that share is unknown, storage is "
        "assumed to serve every read. A loader whose read() calls read under "
        f"{pct(READ_CALLS_MIN_SHARE, 0)} of what its samples hold got them by page faults (rows of a "
        "memory-mapped file): its share is of its samples' bytes (images × the bytes a sample takes)."
        + (
            " The samples its workers' queue could hold read already as each span of the window opened "
            "(prefetch_factor × workers batches) are not counted against its read() calls."
            if result.kind == "run"
            else ""
        ),
        *([] if not kernel else ["", KERNEL_SPLIT_NOTE]),
        "",
    ]


def _gpu_mean(c: CellResult) -> str:
    s = summarize(c.gpu.utilization_pct())
    return f"{s.mean:.0f} %" + (" (partial)" if c.gpu.partial else "")


def _gpu_timeline(result: SweepResult) -> list[str]:
    """Per cell, where each step's time went on the GPU's own clock (CUDA events)."""
    rows = []
    for c in result.cells:
        if c.status != "ok" or c.cuda is None:
            continue
        m = c.cuda.mean_s()
        total = sum(m.values())
        rows.append(
            [
                c.dataset,
                c.setting.label,
                *(f"{ms(m[k])} ({pct(m[k] / total, 0) if total > 0 else '—'})" for k in m),
                ms(sum(c.cuda.host_wait_s) / max(1, len(c.cuda.host_wait_s))),
            ]
        )
    if not rows:
        return []
    head = [
        "dataset",
        "loader",
        "idle: waiting for data",
        "idle: host overhead",
        "host→device copy",
        "compute",
        "host blocked in next()",
    ]
    return [
        "## Where each step's GPU time went (CUDA events)",
        "",
        *table(head, rows),
        "",
        "Mean per measured step on the GPU's own clock. The four parts tile the GPU's timeline, so they add "
        "up to the step. The GPU is counted as waiting for data only while it sat idle *and* the host was "
        "blocked fetching that batch; the host's wait while the GPU still had queued work costs nothing.",
        "",
    ]


def _compute_lines(result: SweepResult) -> list[str]:
    comp = result.compute
    out = []
    if comp is not None:
        kind = "**simulated**" if comp.simulated else "measured"
        src = f" Source of the simulated figure: {comp.source}." if comp.source else ""
        out.append(
            f"- **Compute** ({kind}): {rate_ci(comp.throughput())} img/s — {comp.label}, batch {comp.batch_size}, "
            f"{words.compute_steps(comp)}.{src}"
        )
        if result.analysis is not None and result.analysis.compute_reference is not None:
            out.append(f"  {compute_reference(result.analysis.compute_reference)}")
    for t in result.transfer:
        out.append(
            f"- **Transfer** (host→device, {'pinned' if t.pinned else 'pageable'} memory): "
            f"{t.gb_per_s:,.1f} GB/s = {rate(t.img_per_s)} img/s at batch {t.batch_size}"
        )
    if not result.transfer:
        why = (
            "training runs on the CPU, nothing is copied to a device"
            if result.run.device == "cpu"
            else "not asked for"
        )
        out.append(f"- **Transfer**: not measured — {why}.")
    on_disk = any(s.latency_kind != "first byte" for dc in result.ceilings for s in dc.storage)
    if result.machine.virtual_machine and on_disk:
        out.append(
            "- This machine is a virtual machine: its host may cache the virtual disk, so a read that is cold "
            "inside the VM (evicted, verified, and counted as fetched) can still be faster than the physical device."
        )
    return out


def _storage_table(dc: DatasetCeilings) -> list[str]:
    rows = [
        [
            str(s.concurrency),
            rate_ci(s.bandwidth()),
            rate_ci(s.file_rate()),
            ms(s.latency_p50_s),
            ms(s.latency_p99_s),
            f"{mb(s.fetched.bytes) if s.fetched.bytes is not None else '?'} of {mb(s.bytes)} ({s.fetched.method})",
            f"{s.cache.regime}{'' if s.cache.verified else ' (NOT verified)'}, {pct(s.cache.resident_fraction, 0)} resident before",
            s.stopped_by,
        ]
        for s in dc.storage
    ]
    emu = dc.storage[0].emulated
    title = f"Storage — raw reads, shuffled, {'**emulated ' + emu + '** (from an in-memory sample)' if emu else 'real device'}"
    streams = dc.storage[0].latency_kind == "first byte"
    if streams:  # objects or shards over the network: GETs, timed to their first byte
        title = f"Storage — read whole as streams from {dc.storage[0].where}, shuffled"
    head = [
        "readers",
        "MB/s",
        (
            "img/s it feeds (MB/s ÷ bytes a sample)"
            if dc.storage[0].bytes_per_sample
            else "objects/s (= img/s it feeds)"
            if streams
            else "files/s (= img/s it feeds)"
        ),
        "first byte p50" if streams else "latency p50",
        "first byte p99" if streams else "latency p99",
        "fetched (counted by)",
        "cache",
        "stopped by",
    ]
    out = [f"{title}:", "", *table(head, rows), ""]
    if dc.real_storage is not None:
        r = dc.real_storage
        out += [
            f"The real device, one reader, cold: {rate_ci(r.bandwidth())} MB/s, {rate(r.files_per_s)} files/s.",
            "",
        ]
    notes = sorted({s.cache.note for s in dc.storage if s.cache.note})
    notes += [
        f"{s.unreadable_files} file(s) could not be read and were skipped"
        for s in dc.storage
        if s.unreadable_files
    ][:1]
    if streams:
        notes.append(
            f"{sum(s.files for s in dc.storage):,} GET requests read {mb(sum(s.bytes for s in dc.storage))} "
            "(an object store bills both)"
        )
    cut = words.transient_cut(dc.storage)
    if cut:
        notes.append(cut)
    repeated = sum(s.retries for s in dc.storage)
    if repeated:
        notes.append(
            f"the client repeated {repeated:,} of {sum(s.files for s in dc.storage):,} requests "
            "(throttling, 5xx replies or dropped connections): each costs a request"
        )
    return out + [f"> {n}" for n in notes] + ([""] if notes else [])


# why a decode ceiling's probe stopped, in words (``measure.decode``)
DECODE_STOPS = {
    "interval": "interval ± 5 %",
    "above-compute": f"interval above {DECODE_ABOVE_COMPUTE:g}× compute",
    "above-storage": f"interval above {DECODE_ABOVE_COMPUTE:g}× storage",
    "decided": f"interval ± {pct(DECIDED_REL_HALF_WIDTH, 0)}, below compute and storage",
    "seconds": "time cap",
}


def _decode_table(dc: DatasetCeilings, cell_batch: int) -> list[str]:
    batch = [max(d.batch_images, default=0) for d in dc.decode]  # each ceiling's (drop_last: all full)
    smaller = any(0 < b < cell_batch for b in batch)
    rows = [
        [
            d.setting.label,
            words.decode_rate(d),
            rate(d.per_reader_img_per_s),
            str(d.images),
            *([str(b)] if smaller else []),
            DECODE_STOPS.get(d.stopped_by, d.stopped_by),
        ]
        for d, b in zip(dc.decode, batch, strict=True)
    ]
    sample = dc.decode[0]
    batches = (
        f" Where a turn of the workers (a batch each) would be long, a batch holds fewer images than the "
        f"training's {cell_batch} (the batch column): the same work per image, in more turns to read the "
        "interval from."
        if smaller
        else ""
    )
    return [
        f"Decode — the real loader over an in-memory sample of {sample.sample_files} images ({mb(sample.sample_bytes)}, "
        f"held in this process): decode + augment + collate, no training, no storage.{batches}",
        "",
        *table(
            [
                "loader",
                "img/s",
                "img/s per worker",
                "images timed",
                *(["batch"] if smaller else []),
                "stopped by",
            ],
            rows,
        ),
        "",
        *words.decode_by_workers(dc.decode),
    ]


def _ceilings(result: SweepResult) -> list[str]:
    out = ["## Stage ceilings", "", *_compute_lines(result), ""]
    for dc in result.ceilings:
        out += [f"### {dc.dataset}", ""]
        if dc.storage:
            out += _storage_table(dc)
        if dc.decode:
            out += _decode_table(dc, result.run.batch_size)
    return out


def _sampled_over(result: SweepResult) -> str:
    """What a window's NVML samples leave out: a script's window also its pauses and what follows."""
    if result.kind == "run":
        return (
            "warm-up and worker start-up excluded, and the pauses between its batches that the window leaves "
            "out — evaluation, a checkpoint, ioprof's probe — and what ran after it"
        )
    return "warm-up and worker start-up excluded"


def _gpu_utilization(result: SweepResult) -> list[str]:
    out = ["## GPU utilization (NVML)", ""]
    gpu_cells = [c for c in result.cells if c.gpu.available and c.gpu.gpu_util_pct]
    if not gpu_cells:
        reason = result.machine.gpu_unavailable_reason or next(
            (c.gpu.reason for c in result.cells if c.gpu.reason), ""
        )
        return [*out, f"No GPU telemetry: {reason or 'no samples'}.", ""]
    rows = []
    for c in gpu_cells:
        util = c.gpu.utilization_pct()
        s = summarize(util)
        rows.append(
            [
                c.dataset,
                c.setting.label,
                f"{s.mean:.0f}",
                f"{s.p5:.0f}",
                f"{s.p50:.0f}",
                f"{s.p95:.0f}",
                pct(share_below(util, 50.0), 0),
                f"{s.n}" + ("" if c.gpu.driver_util_pct else " (readings)"),
            ]
        )
    cost = max(c.gpu.sampler_core_share for c in gpu_cells)
    every = max(c.gpu.interval_s for c in gpu_cells)
    return [
        *out,
        NVML_NOTE,
        "",
        *table(["dataset", "loader", "mean %", "p5 %", "p50 %", "p95 %", "samples < 50 %", "samples"], rows),
        "",
        f"Sampled over each cell's measured window only ({_sampled_over(result)}): the driver's own "
        "samples, each once (its buffer, `nvmlDeviceGetSamples`), or where that could not be read, readings "
        f"every {every:g} s, which repeat the driver's value until it updates it (marked). The sampler used at "
        f"most {pct(cost, 2)} of one CPU core.",
        "",
        f"![GPU utilization over time]({GPU_UTIL_PNG})",
        "",
    ]


def _how_measured(result: SweepResult, sweep: bool) -> list[str]:
    r = result.run
    m = result.machine
    out = [
        "## How this was measured",
        "",
        f"- Machine: {m.cpu_model}, {m.cpu_cores_usable} usable cores of {m.cpu_cores_logical}, "
        f"{m.ram_bytes / 2**30:,.0f} GiB RAM; GPU: {m.gpu or 'none'}; Python {m.python}, torch {m.torch}, "
        f"torchvision {m.torchvision}.",
        f"- Device: {r.device} ({r.device_reason}). Loader workers start by `{r.start_method}`.",
        f"- {INTERVALS}",
    ]
    if sweep:
        out += _run_length_lines(result)
    out += _what_if_lines(result)
    out.append("- Datasets:" if result.datasets else "- Datasets: none read (synthetic batches only).")
    for d in result.datasets:
        kind = "generated" if d.generated else "user data"
        out.append(f"  - {d.label} ({kind}): {words.dataset_facts(d)}")
    return [
        *out,
        *words.read_back_lines(r),
        "",
        f"Command: `{r.command}` — started {r.started_at}, finished {r.finished_at or '—'}{_resumed(r)}; "
        f"ioprof {r.ioprof_version}. Raw samples: `results.json`, one row per cell: `results.csv`.",
        "",
    ]


def _resumed(r: RunInfo) -> str:
    if not r.resumed_from:
        return ""
    return f" (resumed: {r.kept_cells} cell(s) and the ceilings it had measured kept from the run started {r.resumed_from})"


def _run_length_lines(result: SweepResult) -> list[str]:
    r = result.run
    cap = f"{r.seconds:g} s" if r.seconds else "no time cap"
    cache = result.config.get("cache")
    regime = {
        "cold": " (every file evicted with posix_fadvise(DONTNEED) before each cell and again right after each "
        "read, so a file read twice is read cold twice — as in a dataset much larger than RAM; residency checked "
        "with cachestat/mincore before the cell and, on the files read, after it)",
        "warm": " (files read once and verified resident before each cell)",
        "as-is": " (whatever the page cache held; the resident fraction is shown)",
    }.get(str(cache), "")
    if result.datasets and all(d.object_store for d in result.datasets):
        regime = (
            " (objects in a store or shards over HTTP: no page cache on this host holds them, so every read is a GET and nothing is "
            "evicted; a cache inside the store is outside what ioprof controls)"
            if cache != "warm"
            else " (not possible for objects in a store: nothing on this host holds them; every read is a GET)"
        )
    out = [
        f"- Each cell: batch {r.batch_size}; warm-up of {r.warmup_steps} step(s){_burst_words(result)}, excluded; "
        "then measured until the throughput's interval "
        f"is within ± {pct(r.target_rel_half_width, 0)} and the data wait's class is decided at a look (after "
        f"{r.min_steps}, {2 * r.min_steps}, {4 * r.min_steps}… steps, rounded up to whole turns of the workers; "
        f"`decided`: the class decided and the rate within ± {pct(r.decided_rel_half_width, 0)}, which changes neither "
        f"the class nor the bottleneck), or {r.steps} steps, or {cap}. The serial loader is `DataLoader(num_workers=0)`, "
        "loading in the training process.",
        f"- Cache regime of the end-to-end cells: **{cache}**{regime}. Storage ceilings are measured cold; decode "
        "ceilings from an in-memory sample.",
    ]
    if r.device.startswith("cuda"):
        pin = "pinned" if result.config.get("pin_memory") else "pageable"
        nb = "non-blocking" if result.config.get("non_blocking") else "blocking"
        out.append(
            "- On CUDA steps are only enqueued, as in a tuned training loop: nothing synchronizes inside the "
            "measured window. Each step records CUDA events before and after its host→device copy and after "
            "its optimizer step, and the device is synchronized once, after the last step. "
            f"Batches: {pin} host memory, {nb} copies."
        )
    return out


def _burst_words(result: SweepResult) -> str:
    """The warm-up's part per loader worker, as the cells ran it (each cell records its warm-up):
    the start-up burst, rounded up to whole turns of the workers where every cell's warm-up is
    (files from before the rounding say the burst alone)."""
    base = result.run.warmup_steps
    mp = [c for c in result.cells if c.workers and c.warmup_steps >= base]
    if mp and all(c.warmup_steps % c.workers == 0 for c in mp) and any(c.warmup_steps > base for c in mp):
        return (
            " plus the loader workers' start-up burst (their first batches, made together; on a GPU every batch "
            "they prefetch), the whole rounded up to whole turns of the workers (a batch each) and all but the "
            "last step(s) taken without a step"
        )
    per_worker = {(c.warmup_steps - base) / c.workers for c in mp}
    if not per_worker or per_worker == {0}:
        return ""
    if per_worker == {1}:
        return " plus one per loader worker (their first batches arrive together after start-up)"
    if len(per_worker) == 1:
        k = per_worker.pop()
        return (
            f" plus {k:g} per loader worker (every batch they prefetched during start-up comes as fast as a "
            "step takes it)"
        )
    return " plus the batches the loader's workers prefetch at start-up"


def _what_if_lines(result: SweepResult) -> list[str]:
    out = []
    if result.compute is not None and result.compute.simulated:
        out.append(
            f"- Compute is **simulated**: each step waits as long as {result.compute.label} would take."
        )
    sp = result.config.get("storage_profile")
    if sp:
        out.append(
            f"- Storage is **emulated** ({sp.get('name')}: {sp.get('read_mb_per_s')} MB/s shared, "
            f"{sp.get('latency_ms')} ms per file before its transfer; {sp.get('source')}). Emulated cells read an "
            "in-memory sample of the dataset, so the real device adds nothing to the emulated figures."
        )
    return out


def write(
    result: SweepResult,
    out_dir: Path,
    markdown: Callable[[SweepResult], str] = render_markdown,
    throughput: bool = True,
) -> Path:
    """Write report.md (by ``markdown``), results.csv and the plots for a sweep, a probe or a
    ``run`` (``throughput`` False: one point per loader, a table says it better); returns report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if throughput and result.cells:
        plot_throughput(result, out_dir / THROUGHPUT_PNG)
    plot_gpu_utilization(result, out_dir / GPU_UTIL_PNG)
    plot_stages(result, out_dir / STAGES_PNG)
    atomic_write_text(out_dir / "results.csv", render_csv(result))
    report = out_dir / "report.md"
    atomic_write_text(report, markdown(result))
    return report


def headline(result: SweepResult) -> str:
    """The verdict in one line."""
    return words.verdict_line(result.analysis).replace("**", "")
