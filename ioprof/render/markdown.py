"""``report.md``: the answer first, then the evidence, then how it was measured."""

from __future__ import annotations

from collections.abc import Sequence

from ioprof.analysis import (
    HIGHLY_INPUT_BOUND_SHARE,
    MODERATELY_INPUT_BOUND_SHARE,
    is_sweep,
    speedup_over_serial,
)
from ioprof.render.fmt import mb, ms, pct, rate, setting
from ioprof.render.plots import GPU_UTIL_PNG, THROUGHPUT_PNG
from ioprof.results import CellResult, SweepResult
from ioprof.stats import share_below, summarize

NVML_NOTE = (
    "NVML's GPU utilization is the share of each sample period in which at least one kernel was "
    "running — a single small kernel counts as 100 % busy — so it can look high while the GPU is "
    "starved; the verdict rests on the data-wait share, and utilization is supporting evidence."
)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _verdict_line(result: SweepResult) -> str:
    a = result.analysis
    if a is None:
        return "No verdict: no cell finished."
    if a.overall_bottleneck == "compute":
        return "**Verdict: compute-bound** — at the best loader setting, input is not what limits training."
    if a.overall_bottleneck == "unknown":
        return "**Verdict: none** — no cell finished."
    return (
        f"**Verdict: {a.overall_input_bound} input-bound — the bottleneck is {a.overall_bottleneck}**, "
        "even at the best loader setting measured."
    )


def _gpu_cell(c: CellResult) -> str:
    if not c.gpu.available:
        return "n/a"
    s = summarize(c.gpu.gpu_util_pct)
    return f"{s.mean:.0f} %" + (" (partial)" if c.gpu.partial else "")


def _cellstable(result: SweepResult) -> list[str]:
    sim = result.compute is not None and result.compute.simulated
    emu = bool(result.config.get("storage_profile"))
    rows = []
    for c in result.cells:
        v = c.verdict
        if c.status != "ok":
            rows.append(
                [c.dataset, setting(c.loader, c.workers), "failed", "", "", "", "", "", "", "", c.error]
            )
            continue
        hit = c.io.cache_hit_ratio
        rows.append(
            [
                c.dataset,
                setting(c.loader, c.workers),
                rate(c.img_per_s),
                pct(c.data_wait_share),
                v.input_bound if v else "—",
                v.bottleneck if v else "—",
                f"{rate(v.predicted_img_per_s)} ({v.predicted_by})" if v and v.predicted_img_per_s else "—",
                f"{c.io.storage_mb_per_s:,.1f} / {c.io.requested_mb_per_s:,.1f}",
                "—" if hit is None else pct(hit, 0),
                f"{c.startup_s:.2f} s",
                f"{c.steps} ({c.stopped_by})" + (f"; GPU {_gpu_cell(c)}" if c.gpu.available else ""),
            ]
        )
    head = [
        "dataset",
        "loader",
        "img/s" + (" (sim. compute)" if sim else ""),
        "data wait",
        "input-bound",
        "bottleneck",
        "predicted img/s (from)",
        "MB/s from storage / requested" + (" (emulated)" if emu else ""),
        "page-cache hits",
        "start-up",
        "steps measured",
    ]
    return table(head, rows)


def _gpu_timeline(result: SweepResult) -> list[str]:
    """Per cell, where each step's time went on the GPU's own clock (CUDA events)."""
    timed = [c for c in result.cells if c.status == "ok" and c.cuda is not None]
    if not timed:
        return []
    rows = []
    for c in timed:
        assert c.cuda is not None
        m = c.cuda.mean_s()
        total = sum(m.values())
        rows.append(
            [
                c.dataset,
                setting(c.loader, c.workers),
                *(f"{ms(m[k])} ({pct(m[k] / total, 0) if total > 0 else '—'})" for k in m),
                ms(sum(c.cuda.host_wait_s) / max(1, len(c.cuda.host_wait_s))),
            ]
        )
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


def _ceilings(result: SweepResult) -> list[str]:
    out = ["## Stage ceilings", ""]
    comp = result.compute
    if comp is not None:
        kind = "**simulated**" if comp.simulated else "measured"
        src = f" Source of the simulated figure: {comp.source}." if comp.source else ""
        out.append(
            f"- **Compute** ({kind}): {rate(comp.img_per_s)} img/s — {comp.label}, batch {comp.batch_size}, "
            f"synthetic batches already on the device, {len(comp.step_s)} steps.{src}"
        )
        if result.analysis is not None and result.analysis.compute_reference:
            out.append(f"  {result.analysis.compute_reference}")
    if result.transfer:
        for t in result.transfer:
            out.append(
                f"- **Transfer** (host→device, {'pinned' if t.pinned else 'pageable'} memory): "
                f"{t.gb_per_s:,.1f} GB/s = {rate(t.img_per_s)} img/s at batch {t.batch_size}"
            )
    elif result.run.device == "cpu":
        out.append("- **Transfer**: not measured — training runs on the CPU, nothing is copied to a device.")
    else:
        out.append("- **Transfer**: not measured in this run.")
    if result.machine.virtual_machine and result.ceilings:
        out.append(
            "- This machine is a virtual machine: its host may cache the virtual disk, so a read that is cold "
            "inside the VM (evicted, verified, and counted in `read_bytes`) can still be faster than the "
            "physical device."
        )
    out.append("")
    for dc in result.ceilings:
        out += [f"### {dc.dataset}", ""]
        if dc.storage:
            emu = dc.storage[0].emulated
            title = f"Storage — raw reads, shuffled, {'**emulated ' + emu + '**' if emu else 'real device'}"
            out += [f"{title}:", ""]
            rows = [
                [
                    str(s.concurrency),
                    f"{s.read_mb_per_s:,.1f}",
                    rate(s.files_per_s),
                    ms(s.latency_p50_s),
                    ms(s.latency_p99_s),
                    rate(s.img_per_s),
                    mb(s.storage_read_bytes) + " of " + mb(s.bytes),
                    f"{s.cache.regime}{'' if s.cache.verified else ' (NOT verified)'}, "
                    f"{pct(s.cache.resident_fraction, 0)} resident before",
                ]
                for s in dc.storage
            ]
            out += table(
                [
                    "readers",
                    "MB/s",
                    "files/s",
                    "latency p50",
                    "latency p99",
                    "img/s it feeds",
                    "fetched from storage",
                    "cache",
                ],
                rows,
            )
            notes = {s.cache.note for s in dc.storage if s.cache.note}
            notes |= {
                f"{s.unreadable_files} file(s) could not be read and were skipped"
                for s in dc.storage
                if s.unreadable_files
            }
            out += [""] + [f"> {n}" for n in sorted(notes)] + ([""] if notes else [])
        if dc.decode:
            out += [
                "Decode — the real loader over files in RAM (decode + augment + collate, no training):",
                "",
            ]
            rows = [
                [
                    setting(d.loader, d.workers),
                    rate(d.img_per_s),
                    rate(d.img_per_s / d.workers) if d.workers else rate(d.img_per_s),
                    str(d.images),
                    f"{d.cache.regime}, {pct(d.cache.resident_fraction, 0)} resident",
                ]
                for d in dc.decode
            ]
            out += table(["loader", "img/s", "img/s per worker", "images timed", "cache"], rows)
            out.append("")
    return out


def render_markdown(result: SweepResult) -> str:
    """The whole report as markdown. Pure: the same result gives the same text."""
    r = result.run
    a = result.analysis
    sweep = is_sweep(result)
    stages = ", ".join(result.config.get("stages", ()))
    out = [f"# ioprof {'sweep' if sweep else 'probe ' + stages} — {r.started_at[:10]}", ""]
    if r.interrupted:
        out += ["> **This run was interrupted.** The figures below are the cells that finished.", ""]
    if sweep:
        out += [_verdict_line(result), ""]
    else:
        out += [
            f"**The {stages} ceiling alone** — no training on real data, so no verdict; "
            "`ioprof sweep` measures every stage and the training they feed.",
            "",
        ]
    out += ["## The answer", ""]
    if a:
        out += [f"- {line}" for line in a.headline]
        out.append("")
        for adv in a.advice:
            if adv.text:
                out.append(f"**{adv.dataset}** — " + " ".join(adv.text))
                out.append("")
        if a.warnings:
            out += ["### Warnings", ""] + [f"- {w}" for w in a.warnings] + [""]
    if sweep:
        out += _sweep_sections(result)
    out += _ceilings(result)
    if sweep:
        out += _gpu_utilization(result)
    out += _how_measured(result, sweep)
    return "\n".join(out)


def _sweep_sections(result: SweepResult) -> list[str]:
    """What only a sweep has: the speed-up, every end-to-end cell, the GPU's timeline per step."""
    out = ["## Speed-up of the multiprocess loader over the serial one", ""]
    rows = []
    for info in result.datasets:
        serial, best, ratio = speedup_over_serial([c for c in result.cells if c.dataset == info.label])
        rows.append(
            [
                info.label,
                rate(serial.img_per_s) if serial else "—",
                f"{rate(best.img_per_s)} ({setting(best.loader, best.workers)})" if best else "—",
                f"{ratio:.2f}×" if ratio else "—",
            ]
        )
    out += [*table(["dataset", "serial img/s", "best multiprocess img/s", "speed-up"], rows), ""]
    out += ["## Every cell", ""]
    out += _cellstable(result)
    out += [
        "",
        f"Data wait is the share of step time spent blocked waiting for the next batch: "
        f"≥ {HIGHLY_INPUT_BOUND_SHARE:.0%} highly input-bound, ≥ {MODERATELY_INPUT_BOUND_SHARE:.0%} moderately, "
        'else not (TensorFlow\'s input-pipeline analyzer). "MB/s from storage" is what the kernel fetched for the '
        'loader\'s processes (`read_bytes`), "requested" what their reads returned (`rchar`); the gap is page-cache hits.',
        "",
        f"![Training throughput against loader workers]({THROUGHPUT_PNG})" if result.cells else "",
        "",
    ]
    out += _gpu_timeline(result)
    return out


def _gpu_utilization(result: SweepResult) -> list[str]:
    m = result.machine
    out = ["## GPU utilization (NVML)", ""]
    gpu_cells = [c for c in result.cells if c.gpu.available and c.gpu.gpu_util_pct]
    if gpu_cells:
        out.append(NVML_NOTE)
        out.append("")
        rows = []
        for c in gpu_cells:
            s = summarize(c.gpu.gpu_util_pct)
            rows.append(
                [
                    c.dataset,
                    setting(c.loader, c.workers),
                    f"{s.mean:.0f}",
                    f"{s.p5:.0f}",
                    f"{s.p50:.0f}",
                    f"{s.p95:.0f}",
                    pct(share_below(c.gpu.gpu_util_pct, 50.0), 0),
                    str(s.n),
                ]
            )
        out += table(
            ["dataset", "loader", "mean %", "p5 %", "p50 %", "p95 %", "samples < 50 %", "samples"], rows
        )
        cost = max(c.gpu.sampler_core_share for c in gpu_cells)
        every = max(c.gpu.interval_s for c in gpu_cells)
        out += ["", f"The sampler (every {every:g} s) used at most {cost:.2%} of one CPU core."]
        out += ["", f"![GPU utilization over time]({GPU_UTIL_PNG})", ""]
    else:
        reason = m.gpu_unavailable_reason or next((c.gpu.reason for c in result.cells if c.gpu.reason), "")
        out += [f"No GPU telemetry: {reason or 'no samples'}.", ""]
    return out


def _how_measured(result: SweepResult, sweep: bool) -> list[str]:
    r = result.run
    m = result.machine
    out = ["## How this was measured", ""]
    ram_gb = m.ram_bytes / 2**30
    out += [
        f"- Machine: {m.cpu_model}, {m.cpu_cores_usable} usable of {m.cpu_cores_logical} logical cores, "
        f"{ram_gb:,.0f} GiB RAM; GPU: {m.gpu or 'none'}"
        + (f" (driver {m.gpu_driver})" if m.gpu_driver else "")
        + f"; Python {m.python}, torch {m.torch}, torchvision {m.torchvision}.",
        f"- Compute device: **{r.device}** ({r.device_reason}).",
        f"- Training step: {result.compute.label if result.compute else result.config.get('model')}, SGD with "
        "momentum 0.9, cross-entropy; transform RandomResizedCrop("
        f"{result.config.get('crop_px')}) + horizontal flip + to-tensor + normalize.",
    ]
    if sweep:
        out += [
            f"- Each cell: batch {r.batch_size}, {r.warmup_steps} warm-up step(s) run and excluded, then up to "
            f"{r.steps} measured steps"
            + (f" or {r.seconds:g} s, whichever comes first" if r.seconds else "")
            + ". The table says how many steps each figure rests on. Start-up is the time from creating the "
            "loader's iterator to its first batch.",
            f"- Loader workers start with multiprocessing '{r.start_method}'; the serial loader is "
            "`DataLoader(num_workers=0)`, loading in the training process.",
            f"- Cache regime of the end-to-end cells: **{result.config.get('cache')}**"
            + (
                " (every file evicted with posix_fadvise(DONTNEED) before each cell and residency checked with "
                "cachestat/mincore)"
                if result.config.get("cache") == "cold"
                else ""
            )
            + ". Storage ceilings are measured cold, decode ceilings warm (files verified resident).",
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
    if result.compute is not None and result.compute.simulated:
        out.append(
            f"- Compute is **simulated**: each step waits as long as {result.compute.label} would take."
        )
    if result.config.get("storage_profile"):
        sp = result.config["storage_profile"]
        out.append(
            f"- Storage is **emulated** ({sp.get('name')}: {sp.get('read_mb_per_s')} MB/s shared, "
            f"{sp.get('latency_ms')} ms per file; {sp.get('source')}); real reads still happen underneath."
        )
    out.append("- Datasets:" if result.datasets else "- Datasets: none read (synthetic batches only).")
    for d in result.datasets:
        kind = "generated" if d.generated else "user data"
        out.append(
            f"  - {d.label} ({kind}): {d.files} files, {d.total_bytes / 1e6:,.1f} MB, mean "
            f"{d.mean_file_bytes / 1e3:,.0f} kB at {d.mean_width_px:,.0f}×{d.mean_height_px:,.0f} "
            f"({d.bits_per_pixel:.1f} bits/pixel), on {d.fs_type} ({d.mount_source}), `{d.path}`"
        )
    out += [
        "",
        f"Command: `{r.command}` — started {r.started_at}, finished {r.finished_at or '—'}; "
        f"ioprof {r.ioprof_version}. Raw samples: `results.json`, one row per cell: `results.csv`.",
        "",
    ]
    return out
