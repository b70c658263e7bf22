"""``report.md`` of ``ioprof devices``: each model on the CPU, one GPU and N GPUs, what a GPU and a
second one gain, and what was not measured here, with why. Pure."""

from __future__ import annotations

from pathlib import Path

from ioprof.conclude.devices import payoffs
from ioprof.core.resultfile import atomic_write_text
from ioprof.core.results_devices import DeviceCell, DevicesResult
from ioprof.core.thresholds import MULTI_DEVICE_PAYS_EFFICIENCY
from ioprof.render.fmt import pct, rate_ci, size
from ioprof.render.mdtable import table
from ioprof.render.plots import DEVICES_PNG, plot_devices

PAYS = {
    "yes": "pays off",
    "barely": "faster, but most of the extra GPU is lost",
    "no": "does not pay off",
    "unknown": "not measured",
}


def _cell(c: DeviceCell | None, notes: dict[str, int]) -> str:
    if c is None:
        return "—"
    if c.measured:
        return rate_ci(c.throughput())
    mark = notes.setdefault(c.why_not, len(notes) + 1)
    return f"not measured [{mark}]"


def _headline(result: DevicesResult) -> str:
    ps = payoffs(result)
    # the CPU first, then by device count ("1 gpu" before "2 gpus"), not by spelling
    measured = sorted(
        {c.setup for c in result.cells if c.measured}, key=lambda s: (s != "cpu", s.split()[0].zfill(4))
    )
    if not measured:
        return "**Nothing was measured**; see the notes under the table."
    multi = [p for p in ps if p.pays != "unknown"]
    if not multi:
        gpus = "no GPU" if result.gpus == 0 else "one GPU"
        return (
            f"**Measured here: {' and '.join(measured)} only** — this machine has {gpus}, so whether more GPUs pay "
            "off was not measured; run this on a machine with 2 or more GPUs."
        )
    yes = [f"{p.model} (batch {p.batch_size})" for p in multi if p.pays == "yes"]
    if not yes:
        return (
            "**A second GPU does not pay off for any model measured**: DDP kept less than "
            f"{pct(MULTI_DEVICE_PAYS_EFFICIENCY, 0)} of perfect scaling everywhere."
        )
    return f"**More GPUs pay off for {', '.join(yes)}**; for the rest, communication eats the gain (table)."


def render_devices_markdown(result: DevicesResult) -> str:
    notes: dict[str, int] = {}
    ps = payoffs(result)
    n = max((c.devices for c in result.cells if c.devices > 1), default=2)
    head = [
        "model",
        "batch per device",
        "parameters",
        "CPU samples/s",
        "1 GPU samples/s",
        f"{n} GPUs (DDP) samples/s",
        "GPU ÷ CPU",
        "scaling efficiency [95 %]",
        "communication share of a step",
        f"do {n} GPUs pay off?",
    ]
    rows = []
    for p in ps:
        cell = p.cpu or p.one or p.multi
        eff = "—"
        if p.efficiency is not None:
            e = p.efficiency
            eff = f"{e.value:.2f}" + (f" [{e.low:.2f}–{e.high:.2f}]" if e.known else " [± ?]")
        rows.append(
            [
                p.model,
                str(p.batch_size),
                f"{cell.params / 1e6:.2f} M" if cell and cell.params else "—",
                _cell(p.cpu, notes),
                _cell(p.one, notes),
                _cell(p.multi, notes),
                "—" if p.gpu_speedup is None else f"{p.gpu_speedup:.1f}×",
                eff,
                pct(p.communication_share, 0),
                PAYS[p.pays],
            ]
        )
    m = result.machine
    out = [f"# ioprof devices — {result.run.started_at[:10]}", "", _headline(result), ""]
    out += [
        f"Machine: {m.cpu_model}, {m.cpu_cores_usable} usable cores; {result.gpus} GPU(s)"
        + (f" ({m.gpu})" if m.gpu else "")
        + ".",
        "",
        "## Each model on each device",
        "",
        *table(head, rows),
        "",
    ]
    out += [f"[{k}] {why}" for why, k in notes.items()] + ([""] if notes else [])
    grads = {c.model: c.gradient_bytes for c in result.cells if c.gradient_bytes}
    if grads:
        out += [
            "What DDP all-reduces each step (every gradient): "
            + ", ".join(f"{model} {size(b)}" for model, b in grads.items())
            + ".",
            "",
        ]
    out += [
        "## How this was measured",
        "",
        "- Each model trains on random input made once on the device (MLP and LeNet-5 on MNIST-sized images, an "
        "LSTM over 28 steps of 28 features, ResNets on 224×224 images): SGD with momentum, cross-entropy; each step "
        "timed until the device has finished it. Samples/s carry a 95 % interval from the steps' spread.",
        "- A cell first times two steps at batch 2; when its warm-up and minimum steps would take longer than "
        f"--seconds ({result.config.get('seconds')} s) it is not measured, and says so.",
        f"- N GPUs: N ranks under torchrun with DistributedDataParallel over NCCL, the same batch per GPU; a step "
        "lasts as long as its slowest rank. Scaling efficiency = N-GPU samples/s ÷ (N × one GPU's); communication "
        "share = the part of an N-GPU step beyond the one-GPU step. More GPUs pay off when the N-GPU run is faster "
        f"beyond both intervals and keeps at least {pct(MULTI_DEVICE_PAYS_EFFICIENCY, 0)} of perfect scaling.",
        "",
    ]
    return "\n".join(out)


def write(result: DevicesResult, out_dir: Path) -> Path:
    """Write report.md and devices.png for ``ioprof devices``; returns report.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(c.measured for c in result.cells):
        plot_devices(result, out_dir / DEVICES_PNG)
    report = out_dir / "report.md"
    atomic_write_text(report, render_devices_markdown(result))
    return report


def headline(result: DevicesResult) -> str:
    return _headline(result).replace("**", "")
