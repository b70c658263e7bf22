"""From measurements to verdicts: pure functions over result objects (no torch, no I/O).

Thresholds are named constants with their sources.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ioprof.config import worker_count
from ioprof.presets import published_preset
from ioprof.results import (
    Advice,
    Analysis,
    CellResult,
    CellVerdict,
    ComputeCeiling,
    DatasetCeilings,
    DatasetInfo,
    DecodeCeiling,
    StorageCeiling,
    SweepResult,
    TransferCeiling,
)
from ioprof.stats import summarize

# TensorFlow's input-pipeline analyzer: share of step time waiting for input.
HIGHLY_INPUT_BOUND_SHARE = 0.20
MODERATELY_INPUT_BOUND_SHARE = 0.05
# A prediction within this relative distance of the measurement counts as agreeing, unless the
# measurement's own spread is wider (then three standard errors of the measured rate).
RESIDUAL_TOLERANCE = 0.15
RESIDUAL_STD_ERRORS = 3.0
# MLPerf Storage asks for a dataset of at least 5x the host's RAM so that it cannot be cached.
DATASET_TO_RAM_FOR_COLD_EPOCHS = 5.0
# Storage "suffices" with this headroom over the bandwidth training draws.
STORAGE_HEADROOM = 1.2

INPUT_STAGES = ("storage", "decode", "transfer")
# The compute ceiling is a tuned trainer's when it reaches this share of the GPU's published
# ResNet-50 figure (presets.py cites each); below it, input-bound verdicts are understated.
PUBLISHED_SHARE_TUNED = 0.90


def data_wait_share(wait_s: Sequence[float], step_s: Sequence[float]) -> float:
    """Share of step time spent blocked waiting for the next batch."""
    total = sum(wait_s) + sum(step_s)
    return sum(wait_s) / total if total > 0 else 0.0


def classify_input_bound(share: float) -> str:
    """``highly`` (≥ 20 %), ``moderately`` (≥ 5 %) or ``not`` input-bound."""
    if share >= HIGHLY_INPUT_BOUND_SHARE:
        return "highly"
    if share >= MODERATELY_INPUT_BOUND_SHARE:
        return "moderately"
    return "not"


def miss_ratio(cell: CellResult) -> float:
    """Share of the cell's requested bytes that had to come from storage."""
    if cell.io.read_chars > 0:
        return min(1.0, cell.io.read_bytes / cell.io.read_chars)
    return 1.0 - cell.cache.resident_fraction


def stage_rates(
    cell: CellResult,
    compute: ComputeCeiling | None,
    decode: Sequence[DecodeCeiling],
    storage: Sequence[StorageCeiling],
    transfer: Sequence[TransferCeiling],
    pinned: bool,
) -> dict[str, float]:
    """Ceilings (img/s) of each stage for this cell's loader setting; absent stages are left out.

    Storage counts only for the bytes the cell actually fetched from storage: a cell served
    from the page cache is not limited by the disk.
    """
    rates: dict[str, float] = {}
    if compute is not None:
        rates["compute"] = compute.img_per_s
    for d in decode:
        if d.loader == cell.loader and d.workers == cell.workers:
            rates["decode"] = d.img_per_s
    concurrency = max(1, cell.workers)
    for s in storage:
        if s.concurrency == concurrency:
            # emulated storage throttles every read, page-cache hit or not
            miss = 1.0 if s.emulated else miss_ratio(cell)
            rates["storage"] = s.img_per_s / miss if miss > 0.01 else math.inf
    for t in transfer:
        if t.pinned == pinned:
            rates["transfer"] = t.img_per_s
    return rates


def predict(loader: str, rates: dict[str, float]) -> tuple[float | None, str]:
    """Predicted img/s and which stage sets it.

    The multiprocess loader overlaps loading with the step, so the slowest stage sets the
    pace. The serial loader does everything in turn in one process, so times add up.
    """
    finite = {k: v for k, v in rates.items() if math.isfinite(v) and v > 0}
    if not finite:
        return None, ""
    slowest = min(finite, key=lambda k: finite[k])
    if loader == "serial":
        return 1.0 / sum(1.0 / v for v in finite.values()), "+".join(sorted(finite)) + " in series"
    return finite[slowest], slowest


def cell_verdict(cell: CellResult, rates: dict[str, float]) -> CellVerdict:
    """Bottleneck and input-bound class of one cell, with the numbers they rest on."""
    share = cell.data_wait_share
    klass = classify_input_bound(share)
    inputs = {k: v for k, v in rates.items() if k in INPUT_STAGES}
    # not input-bound: the step is what the loop waits on; else the slowest input stage is to blame
    bottleneck = "compute" if klass == "not" or not inputs else min(inputs, key=lambda k: inputs[k])
    predicted, by = predict(cell.loader, rates)
    residual = None
    unexplained = False
    if predicted and cell.img_per_s > 0:
        residual = (cell.img_per_s - predicted) / predicted
        per_step = [w + s for w, s in zip(cell.wait_s, cell.step_s, strict=True)]
        spread = summarize(per_step).rel_std_error if len(per_step) > 1 else 0.0
        unexplained = abs(residual) > max(RESIDUAL_TOLERANCE, RESIDUAL_STD_ERRORS * spread)
    parts = [f"data wait {share:.1%} of step time ({klass} input-bound)"]
    parts += [f"{k} ceiling {v:,.1f} img/s" for k, v in sorted(rates.items()) if math.isfinite(v)]
    if "storage" in rates and not math.isfinite(rates["storage"]):
        parts.append("storage not involved (served from page cache)")
    parts.append(f"read from storage {cell.io.storage_mb_per_s:,.1f} MB/s")
    return CellVerdict(
        bottleneck=bottleneck,
        input_bound=klass,
        data_wait_share=share,
        predicted_img_per_s=predicted,
        predicted_by=by,
        residual=residual,
        residual_unexplained=unexplained,
        evidence="; ".join(parts),
    )


def advise(
    info: DatasetInfo,
    cells: Sequence[CellResult],
    compute: ComputeCeiling | None,
    ceilings: DatasetCeilings | None,
    cores_usable: int,
) -> Advice:
    """Workers needed, storage bandwidth needed, and whether the serial loader suffices."""
    text: list[str] = []
    serial = [c for c in cells if c.loader == "serial" and c.verdict is not None]
    serial_ok = serial[0].verdict.input_bound == "not" if serial and serial[0].verdict else None
    demand = compute.img_per_s if compute else None
    mp_decode = sorted(
        (d for d in (ceilings.decode if ceilings else ()) if d.loader == "multiprocess"),
        key=lambda d: d.workers,
    )
    needed = estimated = shortfall = None
    cores_ok = True
    if demand and mp_decode:
        first = mp_decode[0]
        per_worker = first.img_per_s / first.workers
        estimated = demand / per_worker
        meeting = [d for d in mp_decode if d.img_per_s >= demand]
        if meeting:
            needed = meeting[0].workers
            text.append(
                f"{needed} loader worker{'s decode' if needed != 1 else ' decodes'} "
                f"{meeting[0].img_per_s:,.0f} img/s, enough for the "
                f"{demand:,.0f} img/s the training step consumes (about {per_worker:,.0f} img/s per worker)."
            )
        else:
            best = max(mp_decode, key=lambda d: d.img_per_s)
            shortfall = best.img_per_s / demand
            cores_ok = estimated <= cores_usable
            text.append(
                f"Feeding {demand:,.0f} img/s takes about {math.ceil(estimated)} workers at "
                f"{per_worker:,.0f} img/s each; the best measured ({best.workers} workers) decodes "
                f"{best.img_per_s:,.0f} img/s, {shortfall:.0%} of the demand."
            )
            if not cores_ok:
                text.append(
                    f"This machine has {cores_usable} usable cores, so more workers cannot get there: "
                    "use fewer or cheaper transforms, torchvision.io.decode_jpeg, GPU decode "
                    "(decode_jpeg on CUDA, DALI), or store smaller images."
                )
    need_mb = (demand or 0.0) * info.mean_file_bytes / 1e6
    cold = [s for s in (ceilings.storage if ceilings else ()) if s.cache.regime == "cold"]
    measured_mb = max((s.read_mb_per_s for s in cold), default=None)
    storage_ok = measured_mb >= need_mb * STORAGE_HEADROOM if measured_mb is not None else None
    if demand:
        where = f"; storage delivers {measured_mb:,.0f} MB/s cold" if measured_mb is not None else ""
        text.append(
            f"Training at {demand:,.0f} img/s draws {need_mb:,.1f} MB/s from storage "
            f"(mean file {info.mean_file_bytes / 1e3:,.0f} kB){where}."
        )
    if serial_ok is not None and serial:
        text.append(
            "The serial loader (num_workers=0) suffices."
            if serial_ok
            else f"The serial loader does not suffice: it waits {serial[0].data_wait_share:.0%} of step time for data."
        )
    return Advice(
        dataset=info.label,
        workers_needed=needed,
        workers_estimated=estimated,
        cores_usable=cores_usable,
        cores_suffice=cores_ok,
        decode_shortfall=shortfall,
        storage_mb_per_s_needed=need_mb,
        storage_mb_per_s_measured=measured_mb,
        storage_suffices=storage_ok,
        serial_suffices=serial_ok,
        text=tuple(text),
    )


_CLASS_ORDER = {"not": 0, "moderately": 1, "highly": 2}


def speedup_over_serial(
    cells: Sequence[CellResult],
) -> tuple[CellResult | None, CellResult | None, float | None]:
    """(serial cell, best multiprocess cell, best / serial) for one dataset's cells."""
    ok = [c for c in cells if c.status == "ok"]
    serial = next((c for c in ok if c.loader == "serial"), None)
    mps = [c for c in ok if c.loader == "multiprocess"]
    best = max(mps, key=lambda c: c.img_per_s) if mps else None
    ratio = best.img_per_s / serial.img_per_s if serial and best and serial.img_per_s > 0 else None
    return serial, best, ratio


def is_sweep(result: SweepResult) -> bool:
    """Whether the run measured end-to-end cells (``ioprof probe`` measures one ceiling alone)."""
    return "end-to-end" in result.config.get("stages", ["end-to-end"])


def compute_against_published(result: SweepResult) -> tuple[str, bool] | None:
    """The measured compute ceiling against the published figure for this GPU: (sentence, tuned?)."""
    comp = result.compute
    if comp is None or comp.simulated or not result.run.device.startswith("cuda"):
        return None
    gpu = result.machine.gpu or "this GPU"
    preset = published_preset(result.machine.gpu)
    if preset is None:
        return (
            f"No published ResNet-50 figure is on file for {gpu}: the compute ceiling is not compared.",
            True,
        )
    crop = result.config.get("crop_px")
    precision = result.config.get("precision")
    if comp.model != "resnet50" or crop != 224 or precision not in ("bf16", "fp16"):
        return (
            f"The published figure for {gpu} ({preset.img_per_s:,.0f} img/s) is for ResNet-50 at 224 px in mixed "
            f"precision; this step ({comp.label}, {crop} px) is not compared with it.",
            True,
        )
    share = comp.img_per_s / preset.img_per_s
    text = (
        f"The compute ceiling, {comp.img_per_s:,.0f} img/s, is {share:.0%} of the published ResNet-50 figure "
        f"for {gpu} ({preset.img_per_s:,.0f} img/s, {preset.source})."
    )
    tuned = share >= PUBLISHED_SHARE_TUNED
    if not tuned:
        text += (
            f" Below {PUBLISHED_SHARE_TUNED:.0%}: this training step is slower than a tuned one, so a tuned "
            "trainer would draw more from the input pipeline than these verdicts assume."
        )
    return text, tuned


def analyze(result: SweepResult) -> SweepResult:
    """Verdicts for every cell and the run as a whole; returns the result with them filled in."""
    ceilings = {c.dataset: c for c in result.ceilings}
    pinned = bool(result.config.get("pin_memory", False))
    cells = []
    for cell in result.cells:
        if cell.status != "ok":
            cells.append(cell)
            continue
        dc = ceilings.get(cell.dataset)
        rates = stage_rates(
            cell, result.compute, dc.decode if dc else (), dc.storage if dc else (), result.transfer, pinned
        )
        cells.append(replace(cell, verdict=cell_verdict(cell, rates)))

    headline: list[str] = []
    warnings: list[str] = list(result.warnings)
    advice = []
    best_verdicts = []
    if result.run.device == "cpu" and result.compute is not None and not result.compute.simulated:
        headline.append(
            f"The compute device is the CPU ({result.run.device_reason}): {result.compute.model} trains at "
            f"{result.compute.img_per_s:,.1f} img/s here. A GPU consumes images far faster; "
            "--compute sim:h100 (or another preset) asks whether this loader and storage would keep one busy."
        )
    unexplained: list[tuple[str, CellResult]] = []
    end_to_end = is_sweep(result)
    for info in result.datasets:
        ds_cells = [c for c in cells if c.dataset == info.label]
        ok = [c for c in ds_cells if c.verdict is not None]
        advice.append(
            advise(info, ds_cells, result.compute, ceilings.get(info.label), result.machine.cpu_cores_usable)
        )
        if not ok:
            if end_to_end:
                headline.append(f"{info.label}: no cell finished.")
            continue
        serial, best, ratio = speedup_over_serial(ds_cells)
        bound = [c for c in ok if c.verdict and c.verdict.input_bound != "not"]
        parts = []
        if bound:
            parts.append(
                "input-bound: "
                + ", ".join(
                    f"{_setting(c)} ({c.verdict.input_bound}, {c.verdict.bottleneck}, "
                    f"{c.data_wait_share:.0%} wait)"
                    for c in bound
                    if c.verdict
                )
            )
        else:
            parts.append("no setting is input-bound")
        if serial and best and ratio is not None:
            parts.append(
                f"best multiprocess ({_setting(best)}, {best.img_per_s:,.1f} img/s) is "
                f"{ratio:.2f}× the serial loader ({serial.img_per_s:,.1f} img/s)"
            )
        headline.append(f"{info.label}: " + "; ".join(parts) + ".")
        top = max(ok, key=lambda c: c.img_per_s)
        if top.verdict:
            best_verdicts.append(top.verdict)
        unexplained.extend((info.label, c) for c in ok if c.verdict and c.verdict.residual_unexplained)
        consumed = max((c.images + c.warmup_steps * c.batch_size for c in ok), default=0)
        if consumed > info.files and any(c.cache.regime == "cold" for c in ok):
            warnings.append(
                f"{info.label}: a cell reads up to {consumed} images from {info.files} files, so after the "
                "first pass reads come from the page cache; the bytes actually read from storage are "
                "shown per cell"
            )
    warnings.extend(residual_warnings(unexplained, len([c for c in cells if c.verdict]), result.compute))
    cores = result.machine.cpu_cores_usable
    over = sorted({c.workers for c in cells if c.workers > cores})
    if over:
        warnings.append(
            f"{', '.join(map(str, over))} worker(s) exceed the {cores} usable cores: those workers share "
            "cores with each other and with the training process"
        )
    ram = result.machine.ram_bytes
    small = [i for i in result.datasets if i.total_bytes * DATASET_TO_RAM_FOR_COLD_EPOCHS <= ram]
    if small:
        sizes = ", ".join(f"{i.label} {i.total_bytes / 1e9:,.2f} GB" for i in small)
        warnings.append(
            f"The dataset{'s' if len(small) > 1 else ''} ({sizes}) fit{'' if len(small) > 1 else 's'} in RAM "
            f"({ram / 1e9:,.0f} GB): in real training every epoch after the first would come from the page "
            f"cache, not storage (MLPerf Storage asks for a dataset ≥ {DATASET_TO_RAM_FOR_COLD_EPOCHS:g}× RAM)"
        )
    reference = compute_against_published(result)
    if reference and not reference[1]:
        warnings.append(reference[0])
    if best_verdicts:
        counts: dict[str, int] = {}
        for v in best_verdicts:
            counts[v.bottleneck] = counts.get(v.bottleneck, 0) + 1
        overall = max(counts, key=lambda k: (counts[k], k != "compute"))
        worst = max(best_verdicts, key=lambda v: _CLASS_ORDER[v.input_bound]).input_bound
    else:
        overall, worst = "unknown", "unknown"
    return replace(
        result,
        cells=tuple(cells),
        analysis=Analysis(
            overall_bottleneck=overall,
            overall_input_bound=worst,
            headline=tuple(headline),
            advice=tuple(advice),
            warnings=tuple(warnings),
            compute_reference=reference[0] if reference else "",
        ),
    )


# Beyond this many, cells off their prediction are summarized in one warning, not listed one by one.
RESIDUALS_LISTED = 3


def residual_warnings(
    off: Sequence[tuple[str, CellResult]], cells: int, compute: ComputeCeiling | None
) -> list[str]:
    """Cells whose measured rate the ceilings do not explain, listed or summarized."""
    items = [
        (label, c, c.verdict.residual) for label, c in off if c.verdict and c.verdict.residual is not None
    ]
    if not items:
        return []
    if len(items) <= RESIDUALS_LISTED:
        return [
            f"{label} {_setting(c)}: measured {c.img_per_s:,.1f} img/s vs predicted "
            f"{c.verdict.predicted_img_per_s or 0:,.1f} ({r:+.0%}), beyond the measurement's spread: "
            "not explained by the stage ceilings"
            for label, c, r in items
            if c.verdict
        ]
    residuals = [r for *_, r in items]
    text = (
        f"{len(items)} of {cells} cells differ from their prediction beyond the measurement's spread "
        f"({min(residuals):+.0%} to {max(residuals):+.0%}): not explained by the stage ceilings"
    )
    faster = all(r > 0 for r in residuals)
    by_compute = all(c.verdict and c.verdict.predicted_by.startswith("compute") for _, c, _ in items)
    if faster and by_compute and compute is not None:
        text += (
            f". Training ran faster than the compute ceiling ({compute.img_per_s:,.1f} img/s) allows, so that "
            "ceiling was measured low — was the machine busy while it was measured? Re-run on a quiet machine"
        )
    return [text]


def _setting(cell: CellResult) -> str:
    if cell.loader == "serial":
        return "serial"
    return worker_count(cell.workers)
