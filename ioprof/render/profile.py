"""``report.md``, ``profile.csv`` and ``profile.png`` of ``ioprof profile``. Pure (files aside)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ioprof.core.resultfile import atomic_write_text
from ioprof.core.results_profile import EpochPrediction, PhaseTimes, ProfileConclusions, ProfileResult
from ioprof.render import words
from ioprof.render.fmt import duration, ms, pct, signed_pct, size
from ioprof.render.mdtable import table
from ioprof.render.plots import plot_layers

PROFILE_PNG = "profile.png"
PROFILE_CSV = "profile.csv"
PHASE_LABELS = {
    "data_wait": "data wait (loading the batch)",
    "copy": "host→device copy",
    "forward": "forward",
    "backward": "backward",
    "update": "optimizer update",
    "loss_read": "loss read (.item())",
}
TOP_LAYERS = 15
CANNOT_KNOW = (
    "what the run adds beyond training steps (evaluation passes, checkpoints, logging), other jobs on the "
    "machine, thermal or power limits, a page cache that another process empties, and — for later epochs — "
    "whether the dataset will really stay in RAM."
)


def _phase(p: PhaseTimes | None, name: str) -> str:
    if p is None:
        return "—"
    i = p.mean_interval(name)
    return f"{ms(i.value)} [{ms(i.low)}–{ms(i.high)}]" if i.known else ms(i.value)


def _epoch(p: EpochPrediction) -> list[str]:
    span = f" [{duration(p.total_low_s)}–{duration(p.total_high_s)}]" if p.total_low_s is not None else ""
    what = "first epoch: files from storage" if p.regime == "cold" else "later epochs: files in RAM"
    return [
        what,
        str(p.steps),
        duration(p.startup_s),
        duration(p.input_s),
        duration(p.compute_s),
        duration(p.total_s) + span,
    ]


def _headline(r: ProfileResult) -> str:
    """The profile's first sentence: the epoch, and the slowest layer."""
    c = r.prediction
    assert isinstance(c, ProfileConclusions)
    cold = next(p for p in c.predictions if p.regime == "cold")
    warm = next((p for p in c.predictions if p.regime == "warm"), None)
    text = (
        f"**An epoch of {r.epoch_images:,} images takes about {duration(cold.total_s)} from storage** "
        f"(input {duration(cold.input_s)}, compute {duration(cold.compute_s)})"
    )
    if warm is not None:
        text += f", about {duration(warm.total_s)} once the files are in RAM"
    elif r.dataset.keeps_pages is False:
        text += (
            f", every epoch: {r.dataset.fs_type} drops read pages at every open (checked), so no later epoch "
            "reads from RAM"
        )
    text += f"; the slowest layer is `{c.top_layer}`." if c.top_layer else "."
    m = r.measured_epoch
    if m is not None and c.check_error is not None:
        text += f" A real epoch of {m.images:,} images took {duration(m.seconds)}: the prediction is {signed_pct(c.check_error, 1)} off."
    return text


def render_profile_markdown(r: ProfileResult) -> str:
    c = r.prediction
    assert isinstance(c, ProfileConclusions)
    out = [f"# ioprof profile — {r.run.started_at[:10]}", "", _headline(r), ""]
    rows = [[PHASE_LABELS[n], _phase(r.cold, n), _phase(r.warm, n)] for n in PHASE_LABELS]
    step = sum(r.cold.step_s()) / max(1, len(r.cold.step_s()))
    out += [
        "## Each minibatch, phase by phase",
        "",
        *table(["phase", "from storage (ms)", "files in RAM (ms)"], rows),
        "",
        f"Mean per step [95 % interval], {len(r.cold.data_wait_s)} steps each, {r.setting}, batch {r.batch_size}: "
        f"{ms(step)} a step from storage. Device: {r.run.device} ({'CUDA events' if r.run.device.startswith('cuda') else 'host clock'})"
        + (f"; arithmetic: {r.config['precision']}." if r.config.get("precision") else "."),
        "",
    ]
    out += _layers(r, c) + _operators(r) + _prediction(r, c) + _how(r, c)
    return "\n".join(out)


def _layers(r: ProfileResult, c: ProfileConclusions) -> list[str]:
    top = sorted(r.layers, key=lambda layer: layer.mean_s(), reverse=True)[:TOP_LAYERS]
    n = max(1, len(r.hooked.forward_s))
    rows = [
        [
            f"`{layer.name}`",
            layer.kind,
            ms(sum(layer.forward_s) / n),
            ms(sum(layer.backward_s) / n),
            pct(layer.share_of_step, 1),
            f"{layer.params:,}",
            size(layer.activation_bytes),
            str(layer.calls_per_step),
        ]
        for layer in top
    ]
    cover = (
        f"The layers account for {pct(c.layers_cover, 0)} of the forward and backward phases"
        if c.layers_cover
        else ""
    )
    cost = f"; timing them cost {pct(c.hooks_cost, 1)} of a compute step" if c.hooks_cost is not None else ""
    return [
        f"## The {len(top)} slowest layers (of {len(r.layers)})",
        "",
        *table(["layer", "kind", "forward", "backward", "share of step", "params", "output", "calls"], rows),
        "",
        f"{cover}{cost} (the rest: the loss, the autograd engine's own work). Every layer, forward and backward, "
        f"is in `{PROFILE_CSV}`.",
        "",
        f"![The slowest layers]({PROFILE_PNG})",
        "",
    ]


def _operators(r: ProfileResult) -> list[str]:
    rows = [[f"`{o.name}`", ms(o.self_s), pct(o.share, 1), str(o.calls)] for o in r.operators]
    return [
        "## Operators with the most self time (torch.profiler)",
        "",
        *table(["operator", "self time", "share", "calls"], rows),
        "",
        f"Over {3} steps. Their trace is `{r.trace_file}`: open it in https://ui.perfetto.dev or HolisticTraceAnalysis.",
        "",
    ]


def _prediction(r: ProfileResult, c: ProfileConclusions) -> list[str]:
    rows = [_epoch(p) for p in c.predictions]
    out = [
        "## The epoch, predicted",
        "",
        *table(["regime", "steps", "worker start-up", "input (data wait)", "compute", "total [95 %]"], rows),
        "",
    ]
    m = r.measured_epoch
    if m is not None and c.check_error is not None:
        out += [
            f"Checked against a real epoch, from cold: {m.steps} steps, {m.images:,} images in {duration(m.seconds)}; "
            f"the prediction for it is {signed_pct(c.check_error, 1)} off.",
            "",
        ]
    return [
        *out,
        "The prediction is the measured per-step means times the steps, plus the workers' start-up once. "
        f"It cannot know {CANNOT_KNOW}",
        "",
    ]


def _how(r: ProfileResult, c: ProfileConclusions) -> list[str]:
    d = r.dataset
    return [
        "## How this was measured",
        "",
        f"- Dataset `{d.path}`: {d.listed_files:,} files, {size(d.listed_bytes)}; the real loader ({r.setting}) and model "
        f"({r.config.get('model')}), SGD with momentum, cross-entropy.",
        "- Phases: per step, the host's time in `next()` (data wait), then the copy, forward (with the loss), "
        "backward, optimizer step and `loss.item()`. From storage: every file evicted before and after each read.",
        "- Layers: each leaf module's forward between a pre- and a post-hook; its backward from the moment the "
        "gradient of its output is ready (a tensor hook) to the next such moment, so the backward of each layer "
        "and whatever the autograd engine runs right after it are charged to it.",
        *words.read_back_lines(r.run),
        "",
        f"Command: `{r.run.command}`; ioprof {r.run.ioprof_version}.",
        "",
    ]


def render_profile_csv(r: ProfileResult) -> str:
    """One row per layer and phase (and one per step phase), in milliseconds per minibatch."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "layer",
            "kind",
            "phase",
            "ms_mean",
            "ms_low",
            "ms_high",
            "share_of_step",
            "params",
            "output_bytes",
            "calls_per_step",
        ]
    )
    step = sum(r.hooked.compute_s()) / max(1, len(r.hooked.compute_s()))
    for name in PHASE_LABELS:
        i = r.cold.mean_interval(name)
        w.writerow(
            [
                f"({name})",
                "step",
                name,
                i.value * 1e3,
                i.low * 1e3 if i.known else "",
                i.high * 1e3 if i.known else "",
                i.value / step if step else "",
                "",
                "",
                "",
            ]
        )
    for layer in r.layers:
        for phase, xs in (("forward", layer.forward_s), ("backward", layer.backward_s)):
            mean = sum(xs) / max(1, len(xs))
            w.writerow(
                [
                    layer.name,
                    layer.kind,
                    phase,
                    mean * 1e3,
                    min(xs, default=0) * 1e3,
                    max(xs, default=0) * 1e3,
                    mean / step if step else "",
                    layer.params,
                    layer.activation_bytes,
                    layer.calls_per_step,
                ]
            )
    return buf.getvalue()


def write(result: ProfileResult, out_dir: Path) -> Path:
    """Write report.md, profile.csv and profile.png for ``ioprof profile``; returns report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if result.layers:
        plot_layers(result, out_dir / PROFILE_PNG)
    atomic_write_text(out_dir / PROFILE_CSV, render_profile_csv(result))
    report = out_dir / "report.md"
    atomic_write_text(report, render_profile_markdown(result))
    return report


def headline(result: ProfileResult) -> str:
    return _headline(result).replace("**", "")
