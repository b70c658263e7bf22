"""Plots of a finished sweep (matplotlib, no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ioprof.core.inside import GARBAGE_COLLECTOR, WAITING_FOR_A_CORE
from ioprof.core.results import CellResult, SweepResult
from ioprof.core.results_place import PlaceResult
from ioprof.core.stats import Interval
from ioprof.core.thresholds import MIN_BUSY_SHARE
from ioprof.render.fmt import pct

THROUGHPUT_PNG = "throughput.png"
# Above this ratio of the compute ceiling to the fastest cell, the throughput plot's axis is logarithmic.
LOG_SCALE_RATIO = 5.0
GPU_UTIL_PNG = "gpu_utilization.png"
PLACE_PNG = "placement.png"


def plot_throughput(result: SweepResult, path: Path) -> None:
    """Images per second against worker count, one line per dataset, the serial loader marked."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    xticks: set[int] = set()
    for i, info in enumerate(result.datasets):
        color = colors[i % len(colors)]
        cells = [c for c in result.cells if c.dataset == info.label and c.status == "ok" and c.steps]
        mp = sorted((c for c in cells if c.loader == "multiprocess"), key=lambda c: c.workers)
        serial = [c for c in cells if c.loader == "serial"]
        if mp:
            ax.errorbar(
                [c.workers for c in mp],
                [c.delivered() for c in mp],
                yerr=_yerr(mp),
                fmt="o-",
                color=color,
                capsize=3,
                label=f"{info.label}",
            )
            xticks.update(c.workers for c in mp)
        if serial:
            ax.errorbar(
                [0],
                [serial[0].delivered()],
                yerr=_yerr(serial),
                fmt="*",
                markersize=14,
                color=color,
                capsize=3,
                label=f"{info.label}, serial loader" if not mp else None,
            )
            if mp:
                ax.plot([0, mp[0].workers], [serial[0].delivered(), mp[0].delivered()], ":", color=color)
            xticks.add(0)
    if result.compute is not None:
        kind = "simulated" if result.compute.simulated else "measured"
        ax.axhline(result.compute.img_per_s, color="0.4", linestyle="--", linewidth=1)
        ax.annotate(
            f"compute ceiling ({kind}) {result.compute.img_per_s:,.1f} img/s",
            xy=(0.99, result.compute.img_per_s),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=8,
            color="0.3",
        )
    measured = [r for c in result.cells if c.status == "ok" and c.steps and (r := c.delivered()) > 0]
    if measured and result.compute is not None and result.compute.img_per_s > LOG_SCALE_RATIO * max(measured):
        # the ceiling far above every cell: a log axis shows both the gap and the cells' differences
        ax.set_yscale("log")
        ax.set_ylim(bottom=min(measured) / 2, top=result.compute.img_per_s * 2)
    else:
        ax.set_ylim(bottom=0)
    ticks = sorted(xticks)
    ax.set_xticks(ticks)
    ax.set_xticklabels(["serial\n(0)" if t == 0 else str(t) for t in ticks])
    ax.set_xlabel("loader worker processes (num_workers); ★ = serial loader; bars: 95 % interval")
    ax.set_ylabel("training throughput (img/s)" + (", log scale" if ax.get_yscale() == "log" else ""))
    ax.set_title(f"End-to-end training throughput on {result.run.device}")
    ax.grid(True, alpha=0.3)
    ax.legend(title="dataset", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _yerr(cells: list[CellResult]) -> list[list[float]]:
    """Asymmetric error bars from each cell's 95 % interval (0 where it has none)."""
    lows, highs = [], []
    for c in cells:
        i = c.throughput()
        lows.append(max(0.0, i.value - i.low) if i.known else 0.0)
        highs.append(max(0.0, i.high - i.value) if i.known else 0.0)
    return [lows, highs]


def plot_gpu_utilization(result: SweepResult, path: Path) -> bool:
    """NVML utilization over time, one panel per cell; False (nothing drawn) without samples."""
    cells = [c for c in result.cells if c.gpu.available and c.gpu.gpu_util_pct]
    if not cells:
        return False
    fig, axes = plt.subplots(
        len(cells), 1, figsize=(7.5, 1.6 * len(cells) + 0.6), dpi=110, sharex=True, squeeze=False
    )
    for ax, c in zip(axes[:, 0], cells, strict=True):
        ax.plot(c.gpu.t_s, c.gpu.gpu_util_pct, linewidth=1)
        ax.set_ylim(0, 105)
        ax.set_ylabel("util %", fontsize=8)
        ax.set_title(f"{c.dataset}, {c.setting.label}", fontsize=9, loc="left")
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since the cell started")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_placement(result: PlaceResult, path: Path) -> None:
    """Predicted training rate per location (best worker count), against the demand."""
    decisions = list(result.decisions)
    fig, ax = plt.subplots(figsize=(7.5, 1.0 + 0.6 * max(1, len(decisions))), dpi=110)
    labels = [d.label for d in decisions]
    values = [d.predicted_img_per_s for d in decisions]
    colors = ["tab:green" if d.keeps_busy and d.fits else "tab:red" for d in decisions]
    bars = ax.barh(labels, values, color=colors)
    for bar, d in zip(bars, decisions, strict=True):
        ax.annotate(
            f" {d.predicted_img_per_s:,.0f} img/s — {d.limited_by}",
            xy=(bar.get_width(), bar.get_y() + bar.get_height() / 2),
            va="center",
            fontsize=8,
        )
    demand = result.compute.img_per_s
    ax.axvline(demand, color="0.3", linestyle="--", linewidth=1, label=f"compute ceiling {demand:,.0f} img/s")
    ax.axvline(
        MIN_BUSY_SHARE * demand,
        color="0.6",
        linestyle=":",
        linewidth=1,
        label=f"{pct(MIN_BUSY_SHARE, 0)} busy",
    )
    ax.invert_yaxis()
    ax.set_xlabel("predicted training throughput (img/s) at the best worker count")
    ax.set_title(
        f"Where should the data live?\ngreen: keeps the accelerator ≥ {pct(MIN_BUSY_SHARE, 0)} busy; red: does not "
        "(or cannot hold the dataset)",
        fontsize=9,
    )
    # room on the right for each bar's words; the legend under the plot, where no bar or word is
    ax.set_xlim(0, 1.45 * max([*values, demand, 1e-9]))
    fig.legend(fontsize=8, loc="lower center", ncol=2, frameon=False)
    ax.grid(True, axis="x", alpha=0.3)
    fig.set_figheight(fig.get_figheight() + 0.6)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def plot_comparison(comparison: object, path: Path) -> None:
    """img/s of each matched cell in each run, with 95 % intervals (grouped bars)."""
    from ioprof.core.comparison import Comparison

    assert isinstance(comparison, Comparison)
    labels: list[str] = []
    ref: list[tuple[float, tuple[float, float] | None]] = []
    for i, c in enumerate(comparison.runs[0].cells if comparison.runs else ()):
        settings = [c.setting_a] + [r.cells[i].setting_b for r in comparison.runs if i < len(r.cells)]
        labels.append(f"{c.dataset}\n" + " → ".join(dict.fromkeys(settings)))
        ref.append((c.img_per_s_a, c.interval_a))
    series = [(comparison.reference, ref)] + [
        (r.label, [(c.img_per_s_b, c.interval_b) for c in r.cells]) for r in comparison.runs
    ]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(labels) + 2), 4.2), dpi=110)
    width = 0.8 / max(1, len(series))
    for k, (name, values) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(values))]
        ys = [v for v, _ in values]
        err = [
            [max(0.0, v - i[0]) if i else 0.0 for v, i in values],
            [max(0.0, i[1] - v) if i else 0.0 for v, i in values],
        ]
        ax.bar(xs, ys, width, yerr=err, capsize=3, label=Path(name).name or name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("training throughput (img/s)")
    ax.set_title("Each matched cell in each run (bars: 95 % interval)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_layers(result: object, path: Path, top: int = 15) -> None:
    """The slowest layers: forward and backward ms per minibatch, stacked."""
    from ioprof.core.results_profile import ProfileResult

    assert isinstance(result, ProfileResult)
    layers = sorted(result.layers, key=lambda layer: layer.mean_s(), reverse=True)[:top][::-1]
    n = max(1, len(result.hooked.forward_s))
    fwd = [sum(layer.forward_s) / n * 1e3 for layer in layers]
    bwd = [sum(layer.backward_s) / n * 1e3 for layer in layers]
    fig, ax = plt.subplots(figsize=(7.5, 0.8 + 0.32 * max(1, len(layers))), dpi=110)
    names = [f"{layer.name} ({layer.kind})" for layer in layers]
    ax.barh(names, fwd, label="forward")
    ax.barh(names, bwd, left=fwd, label="backward")
    ax.set_xlabel("ms per minibatch")
    ax.set_title(f"The {len(layers)} slowest layers", fontsize=10)
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


SCALE_PNG = "scale.png"
DEVICES_PNG = "devices.png"


def _err(intervals: Sequence[Interval]) -> list[list[float]]:
    lows, highs = [], []
    for i in intervals:
        lows.append(max(0.0, i.value - i.low) if i.known else 0.0)
        highs.append(max(0.0, i.high - i.value) if i.known else 0.0)
    return [lows, highs]


def plot_scale(result: object, path: Path) -> None:
    """Left: img/s of all ranks against the rank count, per regime, with perfect scaling dotted.
    Right: the least busy rank's busy share, with the 90 % line."""
    from ioprof.core.results_scale import ScaleResult

    assert isinstance(result, ScaleResult)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=110)
    colors = {"cold": "tab:blue", "warm": "tab:orange"}
    ticks: set[int] = set()
    for regime in dict.fromkeys(c.regime for c in result.counts):
        ok = sorted(
            (c for c in result.counts if c.regime == regime and c.status == "ok" and c.per_rank),
            key=lambda c: c.ranks,
        )
        failed = [c.ranks for c in result.counts if c.regime == regime and c.status != "ok"]
        color = colors.get(regime, "tab:gray")
        if ok:
            xs = [c.ranks for c in ok]
            ax.errorbar(
                xs,
                [c.aggregate().value for c in ok],
                yerr=_err([c.aggregate() for c in ok]),
                fmt="o-",
                color=color,
                capsize=3,
                label=regime,
            )
            per = ok[0].aggregate().value / ok[0].ranks
            ax.plot(xs, [per * n for n in xs], ":", color=color, label=f"{regime}, perfect scaling")
            busy = [min((r.busy() for r in c.per_rank), key=lambda i: i.value) for c in ok]
            bx.errorbar(
                xs,
                [b.value * 100 for b in busy],
                yerr=[[e * 100 for e in side] for side in _err(busy)],
                fmt="o-",
                color=color,
                capsize=3,
                label=regime,
            )
            ticks.update(xs)
        for n in failed:
            ax.plot([n], [0], "x", color=color, markersize=10, label=f"{regime}: {n} ranks failed")
            ticks.add(n)
    if result.sim_img_per_s:
        top = max(result.ranks_measured(), default=1)
        ax.plot(
            [1, top],
            [result.sim_img_per_s, result.sim_img_per_s * top],
            "--",
            color="0.5",
            linewidth=1,
            label="what the emulated accelerators consume",
        )
    bx.axhline(MIN_BUSY_SHARE * 100, color="0.4", linestyle="--", linewidth=1)
    bx.annotate(
        f"{pct(MIN_BUSY_SHARE, 0)} busy",
        xy=(0.01, MIN_BUSY_SHARE * 100),
        xycoords=("axes fraction", "data"),
        va="bottom",
        fontsize=8,
        color="0.3",
    )
    for a in (ax, bx):
        a.set_xlabel("ranks")
        a.set_xticks(sorted(ticks) or [1])
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    ax.set_ylabel("img/s, all ranks")
    ax.set_ylim(bottom=0)
    ax.set_title("Throughput (bars: 95 % interval)", fontsize=10)
    bx.set_ylabel("least busy rank: busy %")
    bx.set_ylim(0, 105)
    bx.set_title("Accelerator busy (1 − data-wait share)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_devices(result: object, path: Path) -> None:
    """samples/s per model and batch size on each device setup (log axis: models differ by orders)."""
    from ioprof.core.results_devices import DevicesResult

    assert isinstance(result, DevicesResult)
    keys = list(dict.fromkeys((c.model, c.batch_size) for c in result.cells))
    setups = list(dict.fromkeys(c.setup for c in result.cells))
    by = {(c.model, c.batch_size, c.setup): c for c in result.cells}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(keys) + 2), 4.4), dpi=110)
    width = 0.8 / max(1, len(setups))
    for k, setup in enumerate(setups):
        xs, ys, errs = [], [], []
        for i, (model, batch) in enumerate(keys):
            c = by.get((model, batch, setup))
            if c is None or not c.measured:
                continue
            xs.append(i + (k - (len(setups) - 1) / 2) * width)
            ys.append(c.throughput().value)
            errs.append(c.throughput())
        ax.bar(xs, ys, width, yerr=_err(errs), capsize=2, label=setup)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{m}\nbatch {b}" for m, b in keys], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("training samples/s (log)")
    ax.set_title("Each model on each device (bars: 95 % interval; missing: not measured)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


STAGES_PNG = "stages.png"
STAGES_SHOWN = 6  # the costliest stages of all cells get a colour each; the rest are "other"


def plot_stages(result: SweepResult, path: Path) -> bool:
    """A bar per cell of its workers' time per sample, split into its stages (the costliest named,
    the rest as "other"). Returns False, writing nothing, when no cell's stages were timed."""
    cells = [
        c for c in result.cells if c.status == "ok" and c.inside is not None and c.inside.stages is not None
    ]
    if not cells:
        return False
    totals: dict[str, float] = {}
    for c in cells:
        assert c.inside is not None and c.inside.stages is not None
        for st in c.inside.stages.worker:
            totals[st.name] = totals.get(st.name, 0.0) + st.s_per_sample
    named = sorted(totals, key=lambda n: -totals[n])[:STAGES_SHOWN]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(8.5, 1.4 + 0.45 * len(cells)), dpi=110)
    labels = [f"{c.dataset} · {c.setting.label}" for c in cells]
    left = [0.0] * len(cells)
    for k, name in enumerate([*named, "other"]):
        widths = []
        for c in cells:
            assert c.inside is not None and c.inside.stages is not None
            stages = c.inside.stages.worker
            ms = [
                st.s_per_sample * 1e3
                for st in stages
                if (st.name == name) or (name == "other" and st.name not in named)
            ]
            widths.append(sum(ms))
        color = colors[k % len(colors)] if name != "other" else "0.75"
        # the wait for a core and the collector's pauses are no stage's work: drawn apart, light
        # and hatched (each its own way)
        hatch = {WAITING_FOR_A_CORE: "///", GARBAGE_COLLECTOR: "..."}.get(name)
        waiting = hatch is not None
        ax.barh(
            labels,
            widths,
            left=left,
            color="0.92" if waiting else color,
            hatch=hatch,
            edgecolor="0.55" if waiting else None,
            label=name,
            height=0.6,
        )
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("ms per sample in a worker (the training process, without workers)")
    ax.set_title("Inside the loader: where a sample's time goes", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
