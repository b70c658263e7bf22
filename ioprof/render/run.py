"""``report.md`` of ``ioprof run``: the user's own script — its verdict, its loaders as it set
them, each loader's measured window, and its pipeline measured alone. Pure."""

from __future__ import annotations

from pathlib import Path

from ioprof.conclude.threads import ThreadsAgainstProcesses, threads_against_processes
from ioprof.core.results import DatasetCeilings, StorageCeiling, SweepResult
from ioprof.core.results_run import ObservedLoader
from ioprof.render import inside, words
from ioprof.render import sweep as markdown
from ioprof.render.findings import pickled
from ioprof.render.fmt import counted, duration, mb, pct, rate, rate_ci, share_ci, size
from ioprof.render.mdtable import table


def render_run_markdown(result: SweepResult) -> str:
    s = result.script
    out = [f"# ioprof run — {result.run.started_at[:10]}", ""]
    if s is not None and s.ended == "running":
        out += [
            "> **Your script was still running** when this report was written; it is rewritten when it ends.",
            "",
        ]
    if not result.loaders:
        ended = ENDED.get(s.ended, s.ended) if s else "ended"
        out += [
            f"**No DataLoader was iterated** — your script {ended} before any batch was loaded: nothing to measure.",
            "",
        ]
    else:
        out += [words.verdict_line(result.analysis), ""]
        out += markdown._answer(result, True)
    out += _script(result)
    if result.cells:
        out += markdown._cells(result, title="## Each loader's measured window") + markdown._evidence(result)
        out += inside.section(result)
    for dc in result.ceilings:
        if dc.decode or dc.storage:
            out += _alone(dc) + _threads(dc, result)
    if result.cells:
        out += markdown._gpu_utilization(result)
    out += _how(result)
    return "\n".join(out)


def _script(result: SweepResult) -> list[str]:
    s = result.script
    if s is None:
        return []
    code = "" if s.exit_code in (None, 0) else f", exit code {s.exit_code}"
    out = [
        "## Your script",
        "",
        f"- `{s.command}` {ENDED.get(s.ended, s.ended)}{code}; {s.ranks} process(es) observed; "
        f"{s.optimizer_steps} optimizer steps (rank 0).",
        f"- Each loader's window: after {counted(s.warmup_steps, 'batch', 'batches')} of warm-up (plus one per worker: "
        f"their first batches arrive together), {s.window_steps} batches"
        + (f" or {s.window_seconds:g} s of them" if s.window_seconds else "")
        + "; pauses between batches (evaluation, checkpoints) are left out, and the batches queued during a pause "
        "skipped; after the window ioprof only counts batches, and the script goes on unchanged"
        + (" — until ioprof stopped it (--stop-after)." if s.stop_after else "."),
    ]
    if s.probed:
        when = f" {s.probe_when}" if s.probe_when else ""
        start = f"; {s.probe_start}" if s.probe_start else ""
        out.append(
            f"- Your training loader's pipeline was measured alone{when} (below), in a pause of your training of "
            f"{duration(s.probe_pause_s)}{start}."
            + (" " + words.read_back(s.probe_read_back, "the read itself took") if s.probe_read_back else "")
            + (
                " The fork server ioprof started for its workers was stopped once they were done, so the "
                "modules it imported do not stay beside your training."
                if s.probe_fork_server_stopped
                else ""
            )
        )
    elif s.probe_refused:
        out.append(f"- Your training loader's pipeline was not measured alone: {s.probe_refused}.")
    out += [f"- Not measured: {note}." for note in s.probe_notes]
    return [*out, "", *table(_LOADER_HEAD, [_loader_row(lo) for lo in result.loaders]), "", _ROLES, ""]


_LOADER_HEAD = [
    "loader",
    "role",
    "dataset",
    "workers",
    "batch",
    "pin_memory",
    "prefetch",
    "persistent",
    "sampler",
    "start method",
    "batches",
    "passes",
    "first batch of a pass",
    "window",
    "before its window",
    "pauses left out",
    "clock",
]
_ROLES = (
    "A loader is *training* when optimizer steps ran between its batches within a pass (gradient accumulation "
    "included), *evaluation* when none did; the verdict is the training loader's. *first batch of a pass*: from "
    "`iter()` to the first batch in the loop's hands (*in iter()*: the part spent starting its workers, where "
    "they are not persistent). *clock*: `host` times each "
    "wait and step on the host; `gpu-events` on the GPU's own clock (CUDA events), where the data wait is the "
    "time the GPU sat idle for want of a batch."
)


def _loader_row(lo: ObservedLoader) -> list[str]:
    if lo.dataset_root and lo.root_seen_in_passing:  # a few files opened one a sample: where they lay
        dataset = f"{lo.dataset_class}: files opened one a sample, those seen under `{lo.dataset_root}`"
    else:
        dataset = lo.dataset_class + (f" `{lo.dataset_root}`" if lo.dataset_root else "")
    if lo.dataset_len is not None:  # a dataset that makes whole batches (batch_size None) counts them
        dataset += f", {lo.dataset_len:,} {'items' if lo.batch_size is None else 'samples'}"
    role = lo.role + (f" (on {lo.off_thread})" if lo.off_thread else "")
    window = (
        lo.window if lo.window != "none" else f"none (needs {lo.measured_batches_needed} batches in a pass)"
    )
    return [
        lo.key,
        role,
        dataset,
        str(lo.num_workers) + (f" ({lo.workers_out} out of data)" if lo.workers_out else ""),
        str(lo.batch_size),
        "yes" if lo.pin_memory else "no",
        str(lo.prefetch_factor or "—"),
        "yes" if lo.persistent_workers else "no",
        lo.sampler,
        lo.start_method or "—",
        str(lo.batches),
        str(lo.passes),
        _pass_starts(lo),
        window,
        _before(lo),
        str(lo.gaps_left_out),
        lo.clock,
    ]


def _pass_starts(lo: ObservedLoader) -> str:
    """How its passes began: iter() to the first batch, the first pass and the mean of the later."""
    if not lo.pass_starts:
        return "—"
    first = lo.pass_starts[0]
    out = f"{duration(first.first_batch_s)} (in iter() {duration(first.startup_s)})"
    later = lo.pass_starts[1:]
    if later:
        mean = sum(p.first_batch_s for p in later) / len(later)
        inside = sum(p.startup_s for p in later) / len(later)
        out += f"; later {duration(mean)} (in iter() {duration(inside)}, mean of {len(later)})"
    if lo.sent_bytes is not None:
        out += f"; each worker handed {pickled(lo.sent_bytes, lo.sent_s, lo.sent_whole)}"
    return out


def _before(lo: ObservedLoader) -> str:
    """Its first pass up to the window: how long, the first batch, the wait."""
    b = lo.before
    if b is None:
        return "—"
    first = f"first batch after {duration(b.first_batch_s)}, " if b.first_batch_s is not None else ""
    return f"{duration(b.seconds)}: {first}{b.batches} batches, {duration(b.wait_s)} of it waiting"


def _alone(dc: DatasetCeilings) -> list[str]:
    """The probed loader alone: its own dataset, transforms and collate, no model; and its storage."""
    out = [f"## {dc.dataset} alone (no model)", ""]
    if dc.decode:
        rows = [
            [
                d.setting.label + (f" ({d.fed} with data)" if d.fed else ""),
                words.decode_rate(d),
                rate(d.per_reader_img_per_s),
                str(d.images),
            ]
            for d in dc.decode
        ]
        fed = next((d.fed for d in dc.decode if d.fed), None)
        dealt = (
            f" Your dataset deals out {counted(fed, 'shard')} among the workers: a count above that "
            f"is read at {fed}, as many as have data — the rest would have nothing to make."
            if fed
            else ""
        )
        out += [
            "**Decode and augment**: your dataset, transforms and collate in a DataLoader of ioprof's, at your worker "
            f"count and at more, with no model, {dc.decode[0].cache.note} — the storage is not in these figures."
            + dealt,
            "",
            *table(["loader", "img/s", "img/s per worker", "images timed"], rows),
            "",
            *words.decode_by_workers(dc.decode),
        ]
    for s in dc.storage:
        shared = (
            f", for the {s.shared_by} ranks on this host together (each gets its share)"
            if s.shared_by > 1
            else ""
        )
        out += [_storage_alone(s, shared), ""]
    return out


def _threads(dc: DatasetCeilings, result: SweepResult) -> list[str]:
    """Threads against worker processes at the loader's count and one process alone, where all
    three were measured alone."""
    x = threads_against_processes(dc)
    if x is None:
        return []
    lead = (
        f"**Threads against processes**: your pipeline makes {rate_ci(x.one)} img/s in one process alone, "
        f"{rate_ci(x.processes)} in {x.workers} worker processes and {rate_ci(x.threads)} in {x.workers} "
        "threads of one process (a thread pool)"
    )
    if x.call == "holds-the-gil":
        return [
            lead
            + ": threads take turns, nearer one process's rate than the processes'. Its work holds Python's "
            "GIL (a transform written in Python, not in PIL or torch), so threads will not help; keep worker "
            "processes.",
            "",
        ]
    if x.call == "no-gain":
        return [
            lead
            + ": the worker processes make no more than one process alone here, beyond the intervals, so "
            "there is no gain for threads to keep or lose — not decided whether its work holds the GIL.",
            "",
        ]
    if x.call == "undecided":
        return [
            lead + ": the threads' rate is within its interval of midway between one process's rate and the "
            "processes' — not decided whether its work holds the GIL.",
            "",
        ]
    return [lead + ": " + _threads_serve(x, dc, result), ""]


def _threads_serve(x: ThreadsAgainstProcesses, dc: DatasetCeilings, result: SweepResult) -> str:
    """What a thread-based loader would keep and save, where the pipeline releases the GIL."""
    cell = next((c for c in result.cells if c.dataset == dc.dataset), None)
    lo = next((lo for lo in result.loaders if lo.key == dc.dataset), None)
    m = cell.inside.memory if cell is not None and cell.inside is not None else None
    held = (
        f" — each holds {size(m.worker_uss_bytes)} of its own here (USS), {size(m.worker_uss_bytes * x.workers)} in all"
        if m is not None and m.worker_uss_bytes
        else ""
    )
    again = "" if lo is None or lo.persistent_workers else ", and none started again at every epoch"
    took = cell.throughput() if cell is not None else None
    pace = ""
    if took is not None and took.known and x.threads.known:
        if took.high < x.threads.low:
            pace = f" Your training took {rate_ci(took)} img/s in the window: threads would keep up with it."
        elif took.low > x.threads.high:
            pace = (
                f" Your training took {rate_ci(took)} img/s in the window: threads alone would not keep up."
            )
    return (
        "threads work at once, nearer the processes' rate than one process's: its work releases the GIL "
        f"(decode in PIL, torch's ops). Threads made {share_ci(x.share, 0)} of the processes' rate. A "
        f'thread-based loader (torchdata.nodes with method="thread") would do without the {x.workers} worker '
        f"processes{held}{again}.{pace}"
    )


def _storage_alone(s: StorageCeiling, shared: str) -> str:
    """One sentence: the source read alone — files cold, or streams (shards, objects) over the network."""
    if s.where:
        what = f"{s.files} of the items it reads, streamed from {s.where} (every byte crosses the network)"
    elif s.by_member:
        what = (
            f"{s.files} of its samples, each read cold at its place in the file that holds it (an archive, "
            "a database), in a random order (as a random sampler asks for them)"
            + (f"; {s.cache.note}" if s.cache.verified and s.cache.note else "")
        )
    else:
        what = f"a sample of {s.files} of the files it lists, read cold"
    rate_line = (
        f"{rate_ci(s.file_rate())} img/s at {s.sample_bytes() / 1e3:,.1f} kB a sample"
        if s.bytes_per_sample or s.by_member
        else f"{rate_ci(s.file_rate())} files/s"
    )
    return (
        f"**Storage**: {what}, at {s.concurrency} reader(s){shared}: {rate_ci(s.bandwidth())} MB/s, {rate_line}, "
        f"latency ({s.latency_kind}) p50 {s.latency_p50_s * 1e3:,.2f} ms, p99 {s.latency_p99_s * 1e3:,.2f} ms; "
        f"fetched {mb(s.fetched.bytes) if s.fetched.bytes is not None else '?'} ({s.fetched.method})"
        + (f" for the {mb(s.bytes)} its samples hold" if s.by_member else "")
        + "."
        + (f" {words.first_up(cut)}." if (cut := words.transient_cut([s])) else "")
    )


def _own_cost(result: SweepResult) -> list[str]:
    """What observing cost: ioprof's own code around each next(), against the loop's time per batch."""
    out = []
    for lo in result.loaders:
        cell = next((c for c in result.cells if c.dataset == lo.key and c.steps), None)
        if cell is None or not lo.own_s_per_batch:
            continue
        per_batch = cell.elapsed_s / cell.steps
        once = f" and {duration(lo.own_once_s)} once" if lo.own_once_s >= 1e-3 else ""
        out.append(
            f"{lo.key} {lo.own_s_per_batch * 1e6:,.0f} µs ({pct(lo.own_s_per_batch / per_batch, 2)}){once}"
        )
    if not out:
        return []
    return [
        "- What observing cost: ioprof's own code around each `next()`, per batch, and its share of your loop's "
        "time per batch: "
        + "; ".join(out)
        + (
            " (*once*: what comes once, not with each batch — the window's start and end, each pass's end, the "
            "first batch's look, the first waits' split — in all; the pause for the probe is stated above, apart)."
            if any(lo.own_once_s >= 1e-3 for lo in result.loaders)
            else " (the pause for the probe is stated above, apart)."
        )
    ]


def _how(result: SweepResult) -> list[str]:
    m = result.machine
    return [
        "## How this was measured",
        "",
        f"- Machine: {m.cpu_model}, {m.cpu_cores_usable} usable cores, {m.ram_bytes / 2**30:,.0f} GiB RAM; "
        f"device: {result.run.device}; torch {m.torch}.",
        "- Nothing in your script changed: a `sitecustomize` on its `PYTHONPATH` wrapped the DataLoader iterator "
        "(the time blocked in `next()` is the data wait; the time until the next call on the same iterator, the "
        "step; on CUDA both on the GPU's clock, from events on the training stream) and counted optimizer steps "
        "through torch's global step hook.",
        "- Your step is the compute ceiling; decode and augment were measured over a sample copied into memory, "
        "the storage by reading the same files cold (DS-Analyzer's split by difference).",
        *_own_cost(result),
        f"- {markdown.INTERVALS}",
        "- Bytes fetched are counted by what the filesystem offers (block I/O of the loader's processes, NFS "
        "client statistics, the FUSE daemon's reads) over the same spans as the steps, pauses left out; a counter "
        "of the whole host is shared among its ranks by their own reads. The cache regime is whatever your script "
        "left (as-is).",
        "",
        f"Command: `{result.run.command}` — started {result.run.started_at}; ioprof {result.run.ioprof_version}. "
        "Raw samples: `results.json`.",
        "",
    ]


def write(result: SweepResult, out_dir: Path) -> Path:
    """Write report.md, results.csv and the GPU plot for ``ioprof run`` / ``watch()``; returns report.md."""
    return markdown.write(result, out_dir, render_run_markdown, throughput=False)


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
    return f"your script {how}; observed {seen}. " + words.verdict_line(result.analysis).replace("**", "")
