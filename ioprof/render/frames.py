"""Results as pandas DataFrames: for notebooks (``ioprof.load``) and for ``results.csv``.

One row per cell, ceiling, loader, alternative or placement decision, raw values with their unit
in the column name, every figure's 95 % interval beside it. No torch: pandas and the result types.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ioprof.core.results import CellResult, SweepResult
from ioprof.core.results_devices import DevicesResult
from ioprof.core.results_place import PlaceResult
from ioprof.core.results_profile import ProfileResult
from ioprof.core.results_scale import ScaleResult
from ioprof.core.results_whatif import WhatifResult
from ioprof.core.stats import Interval


def _bounds(name: str, i: Interval | None) -> dict[str, Any]:
    if i is None or not i.known:
        return {f"{name}_low": None, f"{name}_high": None}
    return {f"{name}_low": i.low, f"{name}_high": i.high}


def _cell_row(c: CellResult) -> dict[str, Any]:
    v = c.verdict
    ok = c.status == "ok" and c.steps > 0
    util = c.gpu.utilization_pct()
    parts = c.cuda.mean_s() if c.cuda is not None else {}
    return {
        "dataset": c.dataset,
        "loader": c.loader,
        "workers": c.workers,
        "status": c.status,
        # the figures the report shows (``CellResult.rates``)
        "img_per_s": c.delivered() if ok else c.img_per_s,
        **_bounds("img_per_s", c.throughput() if ok else None),
        "data_wait_share": c.wait_share().value if ok else c.data_wait_share,
        **_bounds("data_wait_share", c.wait_share() if ok else None),
        "input_bound": v.input_bound if v else None,
        "bottleneck": v.bottleneck if v else None,
        "predicted_img_per_s": v.predicted_img_per_s if v else None,
        "predicted_low_img_per_s": v.predicted_low_img_per_s if v else None,
        "predicted_by": v.predicted_by if v else None,
        "steps": c.steps,
        "stopped_by": c.stopped_by,
        "warmup_steps": c.warmup_steps,
        "batch_size": c.batch_size,
        "startup_s": c.startup_s,
        "wait_s_total": sum(c.wait_s),
        "step_s_total": sum(c.step_s),
        "requested_bytes": c.requested_bytes,
        "fetched_bytes": c.fetched.bytes,
        "fetched_method": c.fetched.method,
        "fetched_mb_per_s": c.fetched_mb_per_s(),
        **_bounds("fetched_mb_per_s", c.fetched_bandwidth() if ok else None),
        "requested_mb_per_s": c.requested_mb_per_s(),
        "kernel_read_bytes": c.io.read_bytes,
        "kernel_read_chars": c.io.read_chars,
        "cache_regime": c.cache.regime,
        "cache_verified": c.cache.verified,
        "resident_fraction_before": c.cache.resident_fraction,
        "resident_fraction_after": c.cache.resident_after,
        "gpu_util_mean_pct": sum(util) / len(util) if util else None,
        "gpu_telemetry": "ok" if c.gpu.available else c.gpu.reason,
        **{f"gpu_{k}_s_mean": parts.get(k) for k in ("data_stall", "host_overhead", "copy", "compute")},
        # the window in seconds since the epoch: to join with a storage server's or a switch's series
        "window_start_unix_s": c.window_wall_s[0] if c.window_wall_s else None,
        "window_end_unix_s": c.window_wall_s[1] if c.window_wall_s else None,
        "error": c.error,
    }


def cells_frame(result: SweepResult) -> pd.DataFrame:
    """One row per end-to-end cell (``results.csv``)."""
    return pd.DataFrame([_cell_row(c) for c in result.cells], columns=list(CELL_COLUMNS))


STAGE_COLUMNS = (
    "dataset",
    "loader",
    "workers",
    "stage",
    "where",
    "s_per_sample",
    "s_per_sample_low",
    "s_per_sample_high",
    "share",
    "share_low",
    "share_high",
)


def stages_frame(result: SweepResult) -> pd.DataFrame:
    """One row per stage of each cell whose loader was looked inside (``where``: worker stages per
    sample, main-process stages per batch in the ``s_per_sample`` columns)."""
    rows = []
    for c in result.cells:
        s = c.inside.stages if c.inside is not None else None
        for st in (*s.worker, *s.main) if s is not None else ():
            rows.append(
                dict(
                    dataset=c.dataset,
                    loader=c.loader,
                    workers=c.workers,
                    stage=st.name,
                    where=st.where,
                    s_per_sample=st.s_per_sample,
                    s_per_sample_low=st.low_s,
                    s_per_sample_high=st.high_s,
                    share=st.share,
                    share_low=st.share_low,
                    share_high=st.share_high,
                )
            )
    return pd.DataFrame(rows, columns=list(STAGE_COLUMNS))


def ceilings_frame(result: SweepResult | PlaceResult) -> pd.DataFrame:
    """One row per stage ceiling: compute, each decode setting, each storage concurrency."""
    rows: list[dict[str, Any]] = []
    if result.compute is not None:
        c = result.compute
        rows.append(
            {
                "dataset": "",
                "stage": "compute",
                "setting": c.label,
                "img_per_s": c.img_per_s,
                **_bounds("img_per_s", c.throughput()),
                "read_mb_per_s": None,
                "simulated": c.simulated,
            }
        )
    decode = (
        result.decode if isinstance(result, PlaceResult) else [d for dc in result.ceilings for d in dc.decode]
    )
    datasets = {id(d): dc.dataset for dc in getattr(result, "ceilings", ()) for d in dc.decode}
    for d in decode:
        rows.append(
            {
                "dataset": datasets.get(id(d), ""),
                "stage": "decode",
                "setting": d.setting.label,
                "img_per_s": d.img_per_s,
                **_bounds("img_per_s", d.throughput()),
                "read_mb_per_s": None,
                "simulated": False,
            }
        )
    storage = (
        [(cand.label, s) for cand in result.candidates for s in cand.storage]
        if isinstance(result, PlaceResult)
        else [(dc.dataset, s) for dc in result.ceilings for s in dc.storage]
    )
    for where, s in storage:
        rows.append(
            {
                "dataset": where,
                "stage": "storage",
                "setting": f"{s.concurrency} reader(s)",
                "img_per_s": s.img_per_s,
                **_bounds("img_per_s", s.file_rate()),
                "read_mb_per_s": s.read_mb_per_s,
                "simulated": bool(s.emulated),
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "dataset",
            "stage",
            "setting",
            "img_per_s",
            "img_per_s_low",
            "img_per_s_high",
            "read_mb_per_s",
            "simulated",
        ],
    )


def loaders_frame(result: SweepResult) -> pd.DataFrame:
    """``ioprof run``: every DataLoader of the user's script, as it set them."""
    from dataclasses import asdict

    return pd.DataFrame([asdict(lo) for lo in result.loaders])


def alternatives_frame(result: WhatifResult) -> pd.DataFrame:
    """``ioprof whatif``: each alternative, measured or why not, ranked where measured."""
    ranked = {r.name: r for r in (result.ranking.ranked if result.ranking else ())}
    rows = []
    for a in result.alternatives:
        r = ranked.get(a.name)
        rows.append(
            {
                "alternative": a.name,
                "measured": a.measured,
                "why_not": a.why_not,
                "img_per_s": r.img_per_s if r else None,
                "img_per_s_low": r.low if r else None,
                "img_per_s_high": r.high if r else None,
                "gain": r.gain if r else None,
                "beyond_noise": r.beyond_noise if r else None,
                "busy_share": r.busy_share if r else None,
                "where": a.where,
                "prep_s": a.prep_s,
                "prep_bytes": a.prep_bytes,
            }
        )
    return pd.DataFrame(rows)


def decisions_frame(result: PlaceResult) -> pd.DataFrame:
    from dataclasses import asdict

    return pd.DataFrame(
        [{k: v for k, v in asdict(d).items() if k != "predicted_by_workers"} for d in result.decisions]
    )


def ranks_frame(result: ScaleResult) -> pd.DataFrame:
    """``ioprof scale``: one row per rank of each rank count and regime (a failed count: one row)."""
    rows: list[dict[str, Any]] = []
    for count in result.counts:
        head = {
            "ranks": count.ranks,
            "regime": count.regime,
            "count_status": count.status,
            "reason": count.reason,
            "aggregate_img_per_s": count.aggregate().value if count.per_rank else None,
            "storage_alone_mb_per_s": count.storage.bandwidth().value if count.storage else None,
        }
        if not count.per_rank:
            rows.append({**head, "rank": None})
        for r in count.per_rank:
            rate, share = r.throughput(), r.wait_share()
            rows.append(
                {
                    **head,
                    "rank": r.rank,
                    "host": r.host,
                    "cores_used": r.cores_used,
                    "busy_share": r.busy().value,
                    **_bounds("busy_share", r.busy()),
                    **_cell_row(r.cell),
                    # the rank's own figures: its loader's where the loop drained a read-ahead queue
                    "img_per_s": rate.value,
                    **_bounds("img_per_s", rate),
                    "data_wait_share": share.value,
                    **_bounds("data_wait_share", share),
                }
            )
    return pd.DataFrame(rows)


def devices_frame(result: DevicesResult) -> pd.DataFrame:
    """``ioprof devices``: one row per model, batch size and device setup."""
    rows = []
    for c in result.cells:
        t = c.throughput() if c.measured else None
        rows.append(
            {
                "model": c.model,
                "batch_size": c.batch_size,
                "setup": c.setup,
                "devices": c.devices,
                "measured": c.measured,
                "why_not": c.why_not,
                "samples_per_s": t.value if t else None,
                **_bounds("samples_per_s", t),
                "steps": len(c.step_s),
                "params": c.params,
                "gradient_bytes": c.gradient_bytes,
            }
        )
    return pd.DataFrame(rows)


def layers_frame(result: ProfileResult) -> pd.DataFrame:
    """``ioprof profile``: one row per layer, ms per minibatch forward and backward."""
    n = max(1, len(result.hooked.forward_s))
    rows = [
        {
            "layer": x.name,
            "kind": x.kind,
            "forward_ms": sum(x.forward_s) / n * 1e3,
            "backward_ms": sum(x.backward_s) / n * 1e3,
            "share_of_step": x.share_of_step,
            "params": x.params,
            "output_bytes": x.activation_bytes,
        }
        for x in result.layers
    ]
    return pd.DataFrame(rows)


def _empty_cell() -> CellResult:
    from ioprof.core.counts import CacheInfo, IoCounts
    from ioprof.core.gpu import GpuTelemetry

    return CellResult(
        "",
        "serial",
        0,
        0,
        0,
        0,
        0,
        0.0,
        0.0,
        (),
        (),
        0.0,
        0.0,
        IoCounts(0, 0, 0, 0.0),
        CacheInfo("as-is", 0.0, False, "", ""),
        GpuTelemetry(False, ""),
        "",
        status="none",
    )


# the columns of results.csv and of ``Run.cells``, in order
CELL_COLUMNS = tuple(_cell_row(_empty_cell()).keys())
