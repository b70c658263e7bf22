"""``report.md`` of ``ioprof place``: the decision table first, then the measurements. Pure."""

from __future__ import annotations

from pathlib import Path

from ioprof.core.config import worker_count
from ioprof.core.findings_place import PlaceDecision, Recommendation
from ioprof.core.resultfile import atomic_write_text
from ioprof.core.results_place import PlaceResult
from ioprof.core.thresholds import MIN_BUSY_SHARE
from ioprof.render import words
from ioprof.render.findings import reclaimed
from ioprof.render.fmt import duration, gb, ms, pct, rate, rate_ci
from ioprof.render.mdtable import table
from ioprof.render.plots import PLACE_PNG, plot_placement


def _decision_row(dec: PlaceDecision, epochs: int, store: bool = False) -> list[str]:
    by_workers = sorted(dec.predicted_by_workers.items(), key=lambda kv: int(kv[0]))
    reads = "the first" if dec.reading_epochs == 1 else f"all {epochs}"
    why = " (an object store)" if store and dec.kind == "current" else " (drops read pages)"
    return [
        dec.label,
        rate(dec.predicted_img_per_s),
        f"{dec.best_workers}",
        " · ".join(f"{w}: {rate(v)}" for w, v in by_workers),
        f"{pct(dec.busy_share, 0)}",
        "yes" if dec.keeps_busy else "**no**",
        dec.limited_by,
        f"{dec.storage_headroom:,.1f}×",
        f"{dec.accelerators_fed:,} (at {dec.accelerators_at} readers)" if dec.accelerators_at else "—",
        duration(dec.epoch_s),
        reads + ("" if dec.keeps_pages is not False else why),
        duration(dec.total_s),
        duration(dec.copy_s),
        "—"
        if dec.saved_s is None
        else duration(dec.saved_s)
        if dec.saved_s >= 0
        else f"−{duration(-dec.saved_s)}",
        "—" if dec.copy_pays_off is None else ("yes" if dec.copy_pays_off else "no"),
        "yes" if dec.fits else "**no**",
    ]


_HEAD = [
    "location",
    "predicted img/s",
    "workers",
    "img/s by worker count",
    "accelerator busy",
    f"≥ {pct(MIN_BUSY_SHARE, 0)} busy",
    "limited by",
    "storage headroom",
    f"accelerators its storage keeps ≥ {pct(MIN_BUSY_SHARE, 0)} busy",
    "epoch from storage",
    "epochs reading storage",
    "all epochs",
    "copy whole dataset",
    "saves",
    "copy pays off",
    "dataset fits",
]


def _decisions(result: PlaceResult) -> list[str]:
    rows = [_decision_row(dec, result.epochs, result.dataset.object_store) for dec in result.decisions]
    for cand in result.candidates:
        if cand.status != "ok":
            rows.append([cand.label, *["—"] * 5, f"{cand.status}: {cand.reason}", *["—"] * (len(_HEAD) - 7)])
    return table(_HEAD, rows)


def _locations(result: PlaceResult) -> list[str]:
    rows = []
    for cand in result.candidates:
        for s in cand.storage:
            rows.append(
                [
                    cand.label,
                    cand.fs_type + (" (RAM-backed)" if cand.ram_backed else ""),
                    cand.mount_source or "—",
                    str(s.concurrency),
                    rate_ci(s.bandwidth()),
                    rate_ci(s.file_rate()),
                    ms(s.latency_p50_s),
                    ms(s.latency_p99_s),
                    f"{s.cache.regime}{'' if s.cache.verified else ' (NOT verified)'}",
                    f"{cand.sample_files} files, {cand.sample_bytes / 1e6:,.1f} MB",
                    "—" if cand.write_mb_per_s is None else f"{cand.write_mb_per_s:,.1f}",
                    "—" if cand.free_bytes is None else gb(cand.free_bytes),
                ]
            )
    head = [
        "location",
        "filesystem",
        "source",
        "readers",
        "MB/s",
        "files/s",
        "p50",
        "p99",
        "cache",
        "sample",
        "copy MB/s",
        "free",
    ]
    out = table(head, rows)
    notes = sorted({s.cache.note for cand in result.candidates for s in cand.storage if s.cache.note})
    notes += [
        f"{cand.label}: {cand.reason}" for cand in result.candidates if cand.status == "ok" and cand.reason
    ]
    return out + ([""] + [f"- {n}" for n in notes] if notes else [])


def render_place_markdown(result: PlaceResult) -> str:
    c = result.compute
    d = result.dataset
    kind = "simulated" if c.simulated else "measured"
    fits = d.listed_bytes <= result.ram_available_bytes
    ram = f"{result.ram_available_bytes / 1e9:,.1f} GB" + (
        f" ({result.ram_source})" if result.ram_source else ""
    )
    out = [
        f"# ioprof place — {result.run.started_at[:10]}",
        "",
        f"**{recommendation(result.recommendation)}**",
        "",
    ]
    out += ["## Decision", "", *_decisions(result), ""]
    out += [
        f"Demand: the {kind} compute ceiling, {rate_ci(c.throughput())} img/s ({c.label}). "
        f"Busy share = predicted ÷ demand; {pct(MIN_BUSY_SHARE, 0)} is MLPerf Storage's bar for ResNet-50. "
        f"Accelerators its storage keeps busy: MLPerf Storage's figure, the most accelerators of this compute "
        f"that the storage alone feeds at {pct(MIN_BUSY_SHARE, 0)} of their demand, from its fastest rate measured "
        "(at the 95 % interval's low end; more readers may draw more); each accelerator's host decodes its own. "
        f"The dataset ({gb(d.listed_bytes)}) {'fits' if fits else 'does not fit'} in the {ram} the page cache can "
        "use: where it fits and the filesystem keeps read pages, only the first epoch reads the storage and "
        "the others run at the compute and decode rate; where it does not fit, or the filesystem drops read "
        "pages at every open (sshfs and other FUSE mounts by default — checked by reading files and looking "
        f"at their residency), all {result.epochs} epochs read it. A copy pays off when the time it saves over "
        "all the epochs exceeds the copy; a candidate is recommended only when it keeps the accelerator busy, "
        "holds the whole dataset (with 5 % to spare) and its copy pays off."
        + (reclaimed(result.machine.reclaim, result.machine.reclaim_idle_s) if fits else ""),
        "",
        f"![Predicted training rate per location]({PLACE_PNG})",
        "",
        "## Locations as measured",
        "",
        *_locations(result),
        "",
        "## Ceilings",
        "",
        f"- Compute ({kind}): {rate_ci(c.throughput())} img/s — {c.label}"
        + (f"; source: {c.source}" if c.source else ""),
    ]
    for dc in result.decode:
        out.append(
            f"- Decode from an in-memory sample ({dc.sample_files} files), {dc.setting.label}: "
            f"{rate_ci(dc.throughput())} img/s"
        )
    out += [
        "",
        "## How this was measured",
        "",
        f"- Dataset: `{d.path}` — {words.dataset_facts(d)}; only read.",
        (
            "- The current location is the object store, read by GETs at each concurrency, each on objects no "
            "earlier one read (nothing on this host caches them). Each candidate folder gets a shuffled sample "
            "copied from the store into a temporary folder inside it, by as many GETs in flight as the most "
            "workers asked for (the copy is timed, fsync included, for the copy cost), read back cold at each "
            "concurrency, and removed afterwards."
            if d.object_store
            else "- The current location is read where it is, cold (evicted and verified). Each candidate folder gets a "
            "shuffled sample copied into a temporary folder inside it (the copy is timed, fsync included, for the "
            "copy cost), read back cold at each concurrency, and removed afterwards."
        ),
        "- Emulated locations read an in-memory sample of the dataset through a shared bandwidth budget and a "
        "per-file latency (paid before each transfer); they are labelled (emulated).",
        "- `± x %`: half-width of a 95 % interval (batch means over consecutive file completions or steps).",
        f"- Predicted rate at each worker count = the lowest of compute, decode at that worker count, and storage "
        f"at that concurrency; the table shows the best worker count. Machine: {result.machine.cpu_model}, "
        f"{result.machine.cpu_cores_usable} cores, device {result.run.device}.",
        *words.read_back_lines(result.run),
        "",
        f"Command: `{result.run.command}`; ioprof {result.run.ioprof_version}.",
        "",
    ]
    return "\n".join(out)


def write(result: PlaceResult, out_dir: Path) -> Path:
    """Write report.md and placement.png for ``ioprof place``; returns report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if result.decisions:
        plot_placement(result, out_dir / PLACE_PNG)
    report = out_dir / "report.md"
    atomic_write_text(report, render_place_markdown(result))
    return report


def headline(result: PlaceResult) -> str:
    return recommendation(result.recommendation)


def _epochs_read(r: Recommendation) -> str:
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


def recommendation(r: Recommendation | None) -> str:
    """``ioprof place``'s one decision, in one sentence consistent with its figures."""
    if r is None or r.action == "nothing-measured":
        return "No location could be measured; see the table for why."
    kind = "simulated " if r.simulated_demand else ""
    need = f"{pct(r.threshold, 0)} of the {kind}{rate(r.demand_img_per_s)} img/s the accelerator consumes"
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
        f"No location measured keeps the accelerator {pct(r.threshold, 0)} busy; the best, {r.location}, feeds "
        f"{rate(r.predicted_img_per_s)} img/s ({pct(r.busy_share, 0)}), limited by {r.limited_by}{tail}"
    )
