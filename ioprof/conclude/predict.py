"""A setting's predicted rate from its stage ceilings, how far a measurement lies outside it, and
the paces a cell itself ran its stages at where those, not the ceilings read at other moments of a
shared host, explain it. Pure functions, no words."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ioprof.core.config import LoaderSetting
from ioprof.core.results import CellResult, DatasetCeilings
from ioprof.core.stats import Interval
from ioprof.core.thresholds import FETCHED_NOTHING_SHARE, RESIDUAL_TOLERANCE


def _series(rates: Sequence[float]) -> float:
    """Stages done one after the other by one process: their times per image add up."""
    return 1.0 / sum(1.0 / r for r in rates) if rates else math.inf


@dataclass(frozen=True)
class Prediction:
    high: float  # the stages overlap perfectly: the slowest sets the pace
    low: float  # each loader process reads, then decodes, in turn
    by: str


def predict(setting: LoaderSetting, rates: dict[str, float], *, compute_async: bool) -> Prediction | None:
    """Predicted img/s of a setting from its stage ceilings, as a range, and what sets it.

    Serial loader: loading runs in the training process, so decode and the step add up, except
    where the step runs asynchronously on a GPU (the host loads the next batch while the GPU
    computes): then the slower of host and device sets the pace. The storage adds its time at
    worst; at best it goes on delivering while the process decodes and steps (read-ahead, a link's
    credit built up while it idled: a serial loader on an 80 Mbit/s sshfs link drew the link's
    whole rate, 31 % above storage, decode and step in turn), and the slower of it and the rest
    sets the pace. Multiprocess loader: the workers overlap with the step, so the slowest stage
    sets the pace — at best; each worker reads and then decodes in turn, so at worst those two add up.
    """
    finite = {k: v for k, v in rates.items() if math.isfinite(v) and v > 0}
    if not finite:
        return None
    host = [v for k, v in finite.items() if k in ("storage", "decode")]
    device = [v for k, v in finite.items() if k in ("compute", "transfer")]
    if setting.kind == "serial":
        return _predict_serial(finite, host, device, compute_async)
    slowest = min(finite, key=lambda k: finite[k])
    low = min([_series(host), *device]) if host else finite[slowest]
    return Prediction(finite[slowest], min(low, finite[slowest]), slowest)


def _predict_serial(
    finite: dict[str, float], host: list[float], device: list[float], compute_async: bool
) -> Prediction:
    """The serial loader's range (see ``predict``): every stage in turn at worst; at best the
    storage overlapping the rest, which runs in turn on the process (the step apart, on a GPU)."""
    storage = finite.get("storage")
    if compute_async and host and device:
        h, d = _series(host), _series(device)
        low = min(h, d)
        decode = finite.get("decode")
        h_best = min(storage, decode) if storage is not None and decode is not None else h
        by = "+".join(sorted(k for k in finite if k in ("storage", "decode")))
        return Prediction(min(h_best, d), low, by if h < d else "compute (overlapped with loading)")
    low = _series(list(finite.values()))
    rest = {k: v for k, v in finite.items() if k != "storage"}
    if storage is None or not rest:
        return Prediction(low, low, "+".join(sorted(finite)) + " in series")
    in_turn = _series(list(rest.values()))
    by = "storage" if storage <= in_turn else "+".join(sorted(rest)) + " in series"
    return Prediction(min(storage, in_turn), low, by)


def residual(measured: Interval, prediction: Prediction, ceiling_spread: float = 0.0) -> tuple[float, bool]:
    """How far the measurement lies outside the predicted range (0 inside), and whether that is
    beyond RESIDUAL_TOLERANCE and the intervals of the two figures compared: the measurement's
    and the predicting ceiling's (``ceiling_spread``, relative), taken together as independent
    (a compute ceiling read at one moment of a shared host, a cell at another)."""
    m = measured.value
    if prediction.low * (1 - 1e-9) <= m <= prediction.high * (1 + 1e-9):  # inside, to rounding
        return 0.0, False
    bound = prediction.high if m > prediction.high else prediction.low
    r = (m - bound) / bound
    spread = math.hypot(measured.rel_half_width if measured.known else 0.0, ceiling_spread)
    return r, abs(r) > max(RESIDUAL_TOLERANCE, spread)


def own_paces(
    cell: CellResult,
    rates: dict[str, float],
    prediction: Prediction,
    *,
    compute_async: bool,
    decode_pace: float | None = None,
) -> dict[str, float]:
    """The rates the cell's own stages ran at, where predicting with them instead of the ceilings
    holds the measurement: the ceilings were read at other moments, and a shared host's speed varies
    between moments. ``compute``: the cell's own steps' pace (its images over its steps' time);
    ``decode``: the decode ceiling × ``decode_pace``, how many times faster the same loader work per
    sample (decode, transforms, collate: not the read, not the wait for a core) ran in the cell than
    in its probe, both timed inside the loader. Each alone, then both; empty where neither sets
    ``prediction`` or the cell's own paces do not explain the measurement."""
    own: dict[str, float] = {}
    if "compute" in rates and "compute" in prediction.by and cell.step_s and sum(cell.step_s) > 0:
        images = sum(cell.images_per_step) if cell.images_per_step else cell.batch_size * len(cell.step_s)
        own["compute"] = images / sum(cell.step_s)
    if "decode" in rates and "decode" in prediction.by and decode_pace and math.isfinite(decode_pace):
        own["decode"] = rates["decode"] * decode_pace
    tries = [[k] for k in own] + ([list(own)] if len(own) > 1 else [])
    for keys in tries:
        paced = {k: own[k] for k in keys}
        again = predict(cell.setting, {**rates, **paced}, compute_async=compute_async)
        if again is not None and not residual(cell.throughput(), again)[1]:
            return paced
    return {}


def decode_pace_of(
    cell: CellResult, ceilings: DatasetCeilings | None, fetched: float | None = None
) -> float | None:
    """How many times faster the loader's own work per sample ran in ``cell`` than in the decode
    ceiling at its setting, both timed inside the loader and the same way
    (``LoaderStages.work_as_timed_s_per_sample``): the same decode, transforms and collate, read at
    two moments of the host. Where the dataset reads inside what was timed whole (its
    ``__getitem__``, its iterator), only a cell that fetched nothing from storage is compared
    (``fetched``, the share of what it read that storage delivered: ``FETCHED_NOTHING_SHARE``): its
    reads came from a copy in memory, as the ceiling's did, and a read from storage is not the
    host's pace. None where either was not timed so."""
    stages = cell.inside.stages if cell.inside is not None else None
    if stages is None:
        return None
    mine = stages.work_as_timed_s_per_sample
    theirs = next(
        (
            d.work_s_per_sample
            for d in (ceilings.decode if ceilings else ())
            if d.setting == cell.setting and d.work_seen == stages.seen
        ),
        None,
    )
    if stages.seen != "stages" and (fetched is None or fetched > FETCHED_NOTHING_SHARE):
        return None
    if not mine or not theirs:
        return None
    return theirs / mine
