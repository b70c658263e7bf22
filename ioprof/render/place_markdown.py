"""``report.md`` of ``ioprof place``: the decision table first, then the measurements."""

from __future__ import annotations

from ioprof.placement import MIN_BUSY_SHARE
from ioprof.render.fmt import ms, rate
from ioprof.render.markdown import table
from ioprof.render.plots import PLACE_PNG
from ioprof.results import PlaceResult


def _duration(s: float | None) -> str:
    if s is None:
        return "—"
    if abs(s) >= 3600:
        return f"{s / 3600:,.1f} h"
    if abs(s) >= 60:
        return f"{s / 60:,.1f} min"
    return f"{s:,.1f} s"


def render_place_markdown(result: PlaceResult) -> str:
    c = result.compute
    d = result.dataset
    kind = "simulated" if c.simulated else "measured"
    out = [
        f"# ioprof place — {result.run.started_at[:10]}",
        "",
        f"**{result.recommendation}**",
        "",
        "## Decision",
        "",
    ]
    rows = []
    for dec in result.decisions:
        rows.append([
            dec.label, rate(dec.predicted_img_per_s), f"{dec.best_workers}",
            " · ".join(f"{w}: {rate(v)}" for w, v in sorted(dec.predicted_by_workers.items(), key=lambda kv: int(kv[0]))),
            f"{dec.busy_share:.0%}",
            "yes" if dec.keeps_busy else "**no**", dec.limited_by, f"{dec.storage_headroom:,.1f}×",
            _duration(dec.epoch_s), _duration(dec.copy_s),
            "—" if dec.copy_pays_off is None else ("yes" if dec.copy_pays_off else "no"),
        ])  # fmt: skip
    for cand in result.candidates:
        if cand.status != "ok":
            rows.append(
                [cand.label, "—", "—", "—", "—", "—", f"{cand.status}: {cand.reason}", "—", "—", "—", "—"]
            )
    out += table(
        ["location", "predicted img/s", "workers", "img/s by worker count", "accelerator busy", f"≥ {MIN_BUSY_SHARE:.0%} busy",
         "limited by", "storage headroom", "epoch", "copy whole dataset", "copy pays off"],
        rows,
    )  # fmt: skip
    fits = d.total_bytes <= result.ram_available_bytes
    out += [
        "",
        f"Demand: the {kind} compute ceiling, {rate(c.img_per_s)} img/s ({c.label}). "
        f"Busy share = predicted ÷ demand; {MIN_BUSY_SHARE:.0%} is MLPerf Storage's bar for ResNet-50. "
        f"Copy pays off when the time saved over {result.epochs} epoch(s) exceeds the copy time"
        + (
            f"; the dataset ({d.total_bytes / 1e9:,.2f} GB) fits in the {result.ram_available_bytes / 1e9:,.0f} GB "
            "of free RAM, so only the first epoch reads storage and only it is counted."
            if fits
            else "."
        ),
        "",
        f"![Predicted training rate per location]({PLACE_PNG})",
        "",
        "## Locations as measured",
        "",
    ]
    rows = []
    for cand in result.candidates:
        for s in cand.storage:
            rows.append([
                cand.label, cand.fs_type + (" (RAM-backed)" if cand.ram_backed else ""), cand.mount_source or "—",
                str(s.concurrency), f"{s.read_mb_per_s:,.1f}", rate(s.files_per_s), ms(s.latency_p50_s),
                ms(s.latency_p99_s),
                f"{s.cache.regime}{'' if s.cache.verified else ' (NOT verified)'}",
                f"{cand.sample_files} files, {cand.sample_bytes / 1e6:,.1f} MB",
                "—" if cand.write_mb_per_s is None else f"{cand.write_mb_per_s:,.1f}",
            ])  # fmt: skip
    out += table(
        ["location", "filesystem", "source", "readers", "MB/s", "files/s", "p50", "p99", "cache", "sample",
         "copy MB/s"],
        rows,
    )  # fmt: skip
    notes = sorted({s.cache.note for cand in result.candidates for s in cand.storage if s.cache.note})
    notes += [
        f"{cand.label}: {cand.reason}" for cand in result.candidates if cand.status == "ok" and cand.reason
    ]
    if notes:
        out += [""] + [f"- {n}" for n in notes]
    out += ["", "## Ceilings", ""]
    out.append(
        f"- Compute ({kind}): {rate(c.img_per_s)} img/s — {c.label}"
        + (f"; source: {c.source}" if c.source else "")
    )
    for dc in result.decode:
        out.append(f"- Decode from RAM, {dc.workers} workers: {rate(dc.img_per_s)} img/s")
    out += [
        "",
        "## How this was measured",
        "",
        f"- Dataset: `{d.path}` — {d.files} files, {d.total_bytes / 1e6:,.1f} MB, mean {d.mean_file_bytes / 1e3:,.0f} kB, "
        f"on {d.fs_type} ({d.mount_source}); only read.",
        "- The current location is read where it is, cold (evicted and verified). Each candidate folder gets a "
        "shuffled sample copied into a temporary folder inside it (the copy is timed, fsync included, for the "
        "copy cost), read back cold at each concurrency, and removed afterwards.",
        "- Emulated locations read the dataset's files through a shared bandwidth budget and a per-file latency; "
        "they are labelled (emulated).",
        f"- Predicted rate at each worker count = the lowest of compute, decode at that worker count, and storage "
        f"at that concurrency; the table shows the best worker count. Machine: {result.machine.cpu_model}, "
        f"{result.machine.cpu_cores_usable} cores, device {result.run.device}.",
        "",
        f"Command: `{result.run.command}`; ioprof {result.run.ioprof_version}.",
        "",
    ]
    return "\n".join(out)
