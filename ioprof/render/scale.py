"""``report.md`` of ``ioprof scale``: how many ranks stay at least 90 % busy, what stops the next,
and every rank's figures. Pure."""

from __future__ import annotations

from pathlib import Path

from ioprof.conclude.scale import CountVerdict, Limit, RegimeConclusion
from ioprof.core.config import worker_count
from ioprof.core.resultfile import atomic_write_text
from ioprof.core.results_scale import RankCountResult, ScaleResult
from ioprof.core.thresholds import MIN_BUSY_SHARE, SATURATED_SHARE
from ioprof.render import words
from ioprof.render.fmt import counted, duration, pct, rate, rate_ci, share_ci
from ioprof.render.mdtable import table
from ioprof.render.plots import SCALE_PNG, plot_scale

REGIME_WORDS = {
    "cold": "Cold (files from storage, as in a first epoch or a dataset larger than RAM)",
    "warm": "Warm (files in the page cache, as in later epochs of a dataset that fits in RAM)",
}
STAGE_WORDS = {
    "storage": "the storage's bandwidth",
    "storage-undecided": "the storage's bandwidth, perhaps (its own reading too wide to tell)",
    "cores": "the CPU cores (decoding and augmenting)",
    "straggler": "a straggling rank",
    "lockstep": "ranks waiting for each other (stalls moving from rank to rank)",
    "workers": "too few loader workers per rank",
    "devices": "the GPUs this host has",
    "failed": "a failure",
    "undetermined": "nothing measured here",
}


def _ranks(n: int) -> str:
    return counted(n, "rank")


def _limit_sentence(limit: Limit, count: RankCountResult | None, verdict: CountVerdict | None) -> str:
    if limit.stage == "failed":
        return f"{_ranks(limit.at_ranks)} failed: {limit.reason}."
    if limit.stage == "borderline":
        return f"At {_ranks(limit.at_ranks)} the least busy rank's interval straddles {pct(MIN_BUSY_SHARE, 0)}: not decided."
    if limit.projected:
        parts = []
        if limit.ranks_by_cores is not None:
            parts.append(f"the cores would feed about {limit.ranks_by_cores:.1f} ranks")
        if limit.ranks_by_storage is not None:
            parts.append(f"the storage about {limit.ranks_by_storage:.1f} (at the readers measured)")
        if limit.ranks_by_devices is not None:
            parts.append(f"this host has {limit.ranks_by_devices} GPU(s)")
        basis = "; ".join(parts) if parts else "no resource's use was measured"
        return (
            f"Projected, not measured: {STAGE_WORDS[limit.stage]} would stop {_ranks(limit.at_ranks)} — at the "
            f"per-rank demand measured, {basis}. Run `--ranks {limit.at_ranks}` to measure it."
        )
    assert verdict is not None and count is not None
    text = f"At {_ranks(limit.at_ranks)}, {STAGE_WORDS[limit.stage]} stopped it"
    if limit.stage == "storage" and verdict.storage_use is not None and count.storage is not None:
        text += (
            f": the ranks fetched {words.fetched_rate(count)} MB/s, {pct(verdict.storage_use, 0)} of what the "
            f"storage gave {count.storage.concurrency} readers alone ({rate_ci(count.storage.bandwidth())} MB/s)"
        )
    elif (
        limit.stage == "storage-undecided"
        and verdict.storage_use_point is not None
        and count.storage is not None
    ):
        text = (
            f"At {_ranks(limit.at_ranks)}, the storage may have stopped it: the ranks fetched "
            f"{words.fetched_rate(count)} MB/s, {pct(verdict.storage_use_point, 0)} of what the storage gave "
            f"{count.storage.concurrency} readers alone ({rate_ci(count.storage.bandwidth())} MB/s), a reading too "
            "wide to tell whether they drew all it gives; no straggler is blamed while it may be the storage. "
            f"Read it alone for longer (`ioprof probe storage --workers {count.storage.concurrency}`)"
        )
    elif limit.stage == "cores":
        text += (
            f": the ranks and their workers kept {verdict.cores_used:.1f} of {verdict.host_cores} cores busy"
        )
    elif limit.stage == "straggler":
        text += (
            f": rank(s) {', '.join(map(str, limit.stragglers))} waited for data far longer than the others"
        )
    elif limit.stage == "lockstep":
        text += (
            f": no rank waited much for data itself (at most {pct(verdict.own_wait_max, 0)} of its time), yet the "
            f"ranks computed only {pct(verdict.busy_mean, 0)} of their time on average — a stall on any rank holds "
            "every rank at the all-reduce (tail latency on the storage, uneven batches); more workers per rank or "
            "a deeper `prefetch_factor` absorb it, faster storage removes it"
        )
    elif limit.stage == "workers":
        storage = f"storage at {pct(verdict.storage_use, 0)}, " if verdict.storage_use is not None else ""
        text += (
            f" — neither resource was saturated ({storage}cores at {verdict.cores_used:.1f} of {verdict.host_cores}): "
            "give each rank more loader workers (`--workers`)"
        )
    return text + "."


def regime_headline(result: ScaleResult, rc: RegimeConclusion) -> str:
    name = REGIME_WORDS.get(rc.regime, rc.regime).split(" (")[0]
    busy = f"≥ {pct(MIN_BUSY_SHARE, 0)} busy"
    if rc.limit is None:
        return f"**{name}: nothing was measured.**"
    if rc.largest_busy == 0:
        lead = f"not even {_ranks(min(c.ranks for c in rc.counts))} stays {busy}"
    else:
        top = (
            max(c.ranks for c in rc.counts if c.status != "failed")
            if any(c.status != "failed" for c in rc.counts)
            else 0
        )
        most = " (the most measured)" if rc.largest_busy == top and rc.limit.projected else ""
        lead = (
            f"{_ranks(rc.largest_busy)}{most} stay {busy}"
            if rc.largest_busy != 1
            else f"1 rank{most} stays {busy}"
        )
    stage = STAGE_WORDS.get(rc.limit.stage, rc.limit.stage)
    if rc.limit.stage == "failed":
        return f"**{name}: {lead}; {_ranks(rc.limit.at_ranks)} failed ({rc.limit.reason}).**"
    return _with_failures(_limited(name, lead, stage, rc), rc)


def _with_failures(headline: str, rc: RegimeConclusion) -> str:
    """A headline whose limit lies below a count that failed says that count too: a failure is
    never left to the table alone."""
    failed = [v for v in rc.counts if v.status == "failed" and rc.limit and v.ranks != rc.limit.at_ranks]
    said = "".join(f" {_ranks(v.ranks)} failed ({v.reason})." for v in failed)
    return headline[: -len("**")] + said + "**" if said else headline


def _limited(name: str, lead: str, stage: str, rc: RegimeConclusion) -> str:
    assert rc.limit is not None
    if rc.limit.stage == "borderline":
        v = next(c for c in rc.counts if c.ranks == rc.limit.at_ranks)
        assert v.least_busy is not None
        return (
            f"**{name}: {lead}; {_ranks(rc.limit.at_ranks)} are borderline (least busy rank {share_ci(v.least_busy, 0)} "
            "busy, the interval straddles the line): run more `--steps` to decide.**"
        )
    if rc.limit.projected:
        return f"**{name}: {lead}; projected, not measured: {stage} would stop {_ranks(rc.limit.at_ranks)}.**"
    if rc.limit.stage == "storage-undecided":
        return f"**{name}: {lead}; at {_ranks(rc.limit.at_ranks)}, the storage may have stopped it (its reading too wide to tell).**"
    return f"**{name}: {lead}; at {_ranks(rc.limit.at_ranks)}, {stage} stopped it.**"


def headlines(result: ScaleResult) -> list[str]:
    c = result.conclusion
    return [regime_headline(result, rc) for rc in (c.regimes if c else ())]


def _count_rows(result: ScaleResult, rc: RegimeConclusion) -> list[list[str]]:
    by = {(c.ranks, c.regime): c for c in result.counts}
    rows = []
    for v in rc.counts:
        count = by[(v.ranks, v.regime)]
        if v.status == "failed":
            rows.append(
                [
                    str(v.ranks),
                    f"failed: {v.reason}",
                    "—",
                    "—",
                    "—",
                    "—",
                    "—",
                    "—",
                    "—",
                    "—",
                    duration(count.launch_s),
                ]
            )
            continue
        assert v.least_busy is not None
        fetched = count.fetched_mb_per_s()
        storage = (
            f"{rate_ci(count.storage.bandwidth())} ({counted(count.storage.concurrency, 'reader')})"
            if count.storage
            else (count.storage_error or "—")
        )
        check = (
            f"{pct(v.busy_mean, 0)} (efficiency says {pct(v.busy_from_efficiency, 0)})"
            if v.busy_mean is not None and v.busy_from_efficiency is not None
            else pct(v.busy_mean, 0)
        )
        rows.append(
            [
                str(v.ranks),
                rate_ci(count.aggregate()),
                rate(count.aggregate().value / v.ranks),
                "—" if v.efficiency is None else f"{v.efficiency:.2f}",
                f"{share_ci(v.least_busy, 0)} (rank {v.least_busy_rank})",
                check,
                v.status,
                "—" if fetched is None else words.fetched_rate(count),
                storage,
                f"{v.cores_used:.2f} of {v.host_cores}",
                duration(count.launch_s),
            ]
        )
    return rows


def _rank_rows(count: RankCountResult) -> list[list[str]]:
    rows = []
    for r in count.per_rank:
        cell = r.cell
        fetched = cell.fetched_mb_per_s()
        rows.append(
            [
                str(r.rank),
                r.host,
                rate_ci(r.throughput()),
                share_ci(r.wait_share()),
                share_ci(r.busy(), 0),
                f"{r.cores_used:.2f}",
                "—" if fetched is None else f"{words.fetched_rate(cell)} ({cell.fetched.method})",
                f"{cell.cache.regime}{'' if cell.cache.verified else ' (not verified)'}",
            ]
        )
    return rows


def render_scale_markdown(result: ScaleResult) -> str:
    conclusion = result.conclusion
    regimes = conclusion.regimes if conclusion else ()
    ds = result.dataset
    out = [f"# ioprof scale — {result.run.started_at[:10]}", ""]
    out += [*(f"- {line}" for line in headlines(result)), ""]
    step = result.compute if result.sim_img_per_s else f"real training of {result.config.get('model')}"
    loader = worker_count(result.workers_per_rank) if result.workers_per_rank else "no workers (serial)"
    out += [
        f"Each rank: {step}, {loader}, batch {result.run.batch_size}, {result.run.steps} measured steps after "
        f"{result.run.warmup_steps} warm-up (+1 per worker); ranks over {result.backend}. Data: {ds.path} "
        f"({ds.files} files, {ds.fs_type}). Host: {result.machine.cpu_cores_usable} usable cores, {result.gpus} GPU(s).",
        "",
    ]
    for rc in regimes:
        out += [f"## {REGIME_WORDS.get(rc.regime, rc.regime)}", ""]
        head = [
            "ranks",
            "img/s, all ranks",
            "img/s per rank",
            "scaling efficiency",
            "least busy rank: busy [95 %]",
            "mean busy",
            f"≥ {pct(MIN_BUSY_SHARE, 0)} busy",
            "fetched MB/s, all ranks",
            "storage alone MB/s",
            "CPU cores used",
            "run took",
        ]
        out += [*table(head, _count_rows(result, rc)), ""]
        if rc.limit is not None:
            count = next(
                (c for c in result.counts if c.regime == rc.regime and c.ranks == rc.limit.at_ranks), None
            )
            verdict = next((v for v in rc.counts if v.ranks == rc.limit.at_ranks), None)
            out += [_limit_sentence(rc.limit, count, verdict), ""]
        for v in rc.counts:
            if v.stragglers:
                out += [
                    f"At {_ranks(v.ranks)}, rank(s) {', '.join(map(str, v.stragglers))} straggled: they waited for "
                    "data clearly longer than the median rank, and DDP made the others wait for them.",
                    "",
                ]
        for count in (c for c in result.counts if c.regime == rc.regime and c.status == "ok"):
            out += [f"### {_ranks(count.ranks)}, per rank", ""]
            head = [
                "rank",
                "host",
                "img/s",
                "data wait [95 %]",
                "busy [95 %]",
                "CPU cores used (rank + workers)",
                "fetched MB/s (method)",
                "cache",
            ]
            out += [*table(head, _rank_rows(count)), ""]
    out += _how(result)
    return "\n".join(out)


def _how(result: ScaleResult) -> list[str]:
    cfg = result.config
    return [
        "## How this was measured",
        "",
        "- Each rank count ran as `python -m torch.distributed.run --standalone --nproc-per-node N -m ioprof.runners.rank` "
        "(torchrun's logs are under `logs/`). Every rank builds its own DataLoader over the whole dataset with a "
        "`DistributedSampler`, its own workers, and its own step followed by DDP's all-reduce "
        + (
            "(a simulated step sleeps as long as the accelerator would, then a one-element all-reduce keeps the ranks "
            "in lockstep as DDP does; the gradient exchange itself runs on the GPUs' interconnect and is not emulated)"
            if result.sim_img_per_s
            else "(the model wrapped in `DistributedDataParallel`)"
        )
        + "; every rank runs the same number of steps, as DDP requires.",
        "- Busy = the share of a rank's wall time its accelerator computes (MLPerf Storage's AU: compute time ÷ total "
        "time), with a 95 % interval from batch means; the compute time per step is the simulated step's, or real "
        "steps timed under DDP's `no_sync` (no all-reduce). A rank's img/s and busy share are its loop's, unless the "
        "loop took more batches in the window than its loader made there (each batch stamped when its worker made it) "
        "and the loader made them more slowly (over whole turns of its workers): then the loop drained batches read "
        "ahead before the window opened (while a late rank's first all-reduce or a first step's set-up held it), "
        "handed over without a wait, and what the loader made in the window is the rate (its data wait never below the loop's own). Neither the time blocked in `next()` waiting for data nor "
        "the time in the all-reduce waiting for a late rank is busy: with stalls that move from rank to rank, every "
        "rank's own data wait stays small while every step stretches. The mean busy share is checked against the "
        "scaling efficiency × the smallest count's busy share. A count is "
        f"≥ {pct(MIN_BUSY_SHARE, 0)} busy only when its least busy rank's whole interval is; a count whose interval "
        "straddles the line is borderline, not decided.",
        "- Scaling efficiency = img/s per rank ÷ img/s per rank at the smallest count measured in the same regime.",
        "- Cold: the dataset's pages are evicted before the ranks start and each file after it is read (verified by "
        "page residency); warm: read into the page cache first. Before each count, the storage is read alone, cold, "
        "by as many readers as the ranks' loaders run together: what it can give them (its first reads left out where "
        f"they came as a start-up transient: {words.TRANSIENT_WHY}).",
        f"- What stops the next count is read from the first count that is not busy: storage when the ranks fetched "
        f"at least {pct(SATURATED_SHARE, 0)} of what the storage gave alone (the top of its interval); cores when the "
        f"ranks and their workers used at least {pct(SATURATED_SHARE, 0)} of the host's; where the ranks fetched that much "
        "of the storage's point figure but not of its top, the storage may have: no straggler is blamed; else a "
        "straggler; else, where no rank waits much itself, ranks "
        "waiting for each other; else too few workers per rank. Bytes counted for the whole host (NFS client "
        "statistics, the FUSE daemon's reads) are taken once per host, not once per rank. When every "
        "count was busy, the next is projected from the largest one's per-rank demand, and said to be a projection.",
        "- Multi-node: run the same command on every node under torchrun, e.g. "
        "`torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST:29400 --rdzv-id JOB "
        "-m ioprof scale --data /shared/path --out DIR` (one rank count: all the ranks torchrun starts); every "
        "rank is gathered on rank 0, which writes the report.",
        f"- Settings: {', '.join(f'{k}={v}' for k, v in cfg.items() if k not in ('out_dir', 'cache_dir', 'compute') and v is not None)}.",
        *words.read_back_lines(result.run),
        "",
    ]


def write(result: ScaleResult, out_dir: Path) -> Path:
    """Write report.md and scale.png for ``ioprof scale``; returns report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(c.status == "ok" for c in result.counts):
        plot_scale(result, out_dir / SCALE_PNG)
    report = out_dir / "report.md"
    atomic_write_text(report, render_scale_markdown(result))
    return report


def headline(result: ScaleResult) -> str:
    return " ".join(headlines(result)).replace("**", "")
