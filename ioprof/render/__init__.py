"""Renderers: finished results in, files out. No measuring, no torch."""

from __future__ import annotations

from pathlib import Path

from ioprof.core.resultfile import atomic_write_text
from ioprof.core.results import (
    DevicesResult,
    PlaceResult,
    ProfileResult,
    ScaleResult,
    SweepResult,
    WhatifResult,
)
from ioprof.render.markdown import render_markdown
from ioprof.render.place_markdown import render_place_markdown
from ioprof.render.plots import (
    GPU_UTIL_PNG,
    PLACE_PNG,
    THROUGHPUT_PNG,
    plot_gpu_utilization,
    plot_placement,
    plot_throughput,
)
from ioprof.render.results_csv import render_csv


def write_report(result: SweepResult, out_dir: Path) -> Path:
    """Write report.md, results.csv and the plots for ``result`` into ``out_dir``; returns report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if result.cells and result.kind != "run":  # one point per loader: a table says it better
        plot_throughput(result, out_dir / THROUGHPUT_PNG)
    plot_gpu_utilization(result, out_dir / GPU_UTIL_PNG)
    atomic_write_text(out_dir / "results.csv", render_csv(result))
    report = out_dir / "report.md"
    atomic_write_text(report, render_markdown(result))
    return report


def write_place_report(result: PlaceResult, out_dir: Path) -> Path:
    """Write report.md and placement.png for ``ioprof place``; returns report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if result.decisions:
        plot_placement(result, out_dir / PLACE_PNG)
    report = out_dir / "report.md"
    atomic_write_text(report, render_place_markdown(result))
    return report


def write_whatif_report(result: WhatifResult, out_dir: Path) -> Path:
    """Write report.md for ``ioprof whatif``; returns its path."""
    from ioprof.render.whatif_markdown import render_whatif_markdown

    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "report.md"
    atomic_write_text(report, render_whatif_markdown(result))
    return report


def write_profile_report(result: ProfileResult, out_dir: Path) -> Path:
    """Write report.md, profile.csv and profile.png for ``ioprof profile``; returns report.md."""
    from ioprof.render.plots import plot_layers
    from ioprof.render.profile_markdown import (
        PROFILE_CSV,
        PROFILE_PNG,
        render_profile_csv,
        render_profile_markdown,
    )

    out_dir.mkdir(parents=True, exist_ok=True)
    if result.layers:
        plot_layers(result, out_dir / PROFILE_PNG)
    atomic_write_text(out_dir / PROFILE_CSV, render_profile_csv(result))
    report = out_dir / "report.md"
    atomic_write_text(report, render_profile_markdown(result))
    return report


def write_scale_report(result: ScaleResult, out_dir: Path) -> Path:
    """Write report.md and scale.png for ``ioprof scale``; returns report.md."""
    from ioprof.render.plots import SCALE_PNG, plot_scale
    from ioprof.render.scale_markdown import render_scale_markdown

    out_dir.mkdir(parents=True, exist_ok=True)
    if any(c.status == "ok" for c in result.counts):
        plot_scale(result, out_dir / SCALE_PNG)
    report = out_dir / "report.md"
    atomic_write_text(report, render_scale_markdown(result))
    return report


def write_devices_report(result: DevicesResult, out_dir: Path) -> Path:
    """Write report.md and devices.png for ``ioprof devices``; returns report.md."""
    from ioprof.render.devices_markdown import render_devices_markdown
    from ioprof.render.plots import DEVICES_PNG, plot_devices

    out_dir.mkdir(parents=True, exist_ok=True)
    if any(c.measured for c in result.cells):
        plot_devices(result, out_dir / DEVICES_PNG)
    report = out_dir / "report.md"
    atomic_write_text(report, render_devices_markdown(result))
    return report
