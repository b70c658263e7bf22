"""``results.csv``: one row per cell, raw values with units in the column names."""

from __future__ import annotations

import csv
import io
from typing import Any

from ioprof.results import CellResult, SweepResult

COLUMNS = (
    "dataset",
    "loader",
    "workers",
    "status",
    "img_per_s",
    "img_per_s_low",
    "img_per_s_high",
    "data_wait_share",
    "data_wait_share_low",
    "data_wait_share_high",
    "input_bound",
    "bottleneck",
    "predicted_img_per_s",
    "predicted_low_img_per_s",
    "predicted_by",
    "steps",
    "stopped_by",
    "warmup_steps",
    "batch_size",
    "startup_s",
    "wait_s_total",
    "step_s_total",
    "requested_bytes",
    "fetched_bytes",
    "fetched_method",
    "fetched_mb_per_s",
    "requested_mb_per_s",
    "kernel_read_bytes",
    "kernel_read_chars",
    "cache_regime",
    "cache_verified",
    "resident_fraction_before",
    "resident_fraction_after",
    "gpu_util_mean_pct",
    "gpu_telemetry",
    "gpu_data_stall_s_mean",
    "gpu_host_overhead_s_mean",
    "gpu_copy_s_mean",
    "gpu_compute_s_mean",
    "error",
)


def _row(c: CellResult) -> list[Any]:
    v = c.verdict
    util = c.gpu.gpu_util_pct
    parts = c.cuda.mean_s() if c.cuda is not None else {}
    ok = c.status == "ok" and c.steps > 0
    thr = c.throughput() if ok else None
    share = c.wait_share() if ok else None

    def bound(i: Any, which: str) -> Any:
        return getattr(i, which) if i is not None and i.known else ""

    return [
        c.dataset, c.loader, c.workers, c.status, c.img_per_s, bound(thr, "low"), bound(thr, "high"),
        c.data_wait_share, bound(share, "low"), bound(share, "high"),
        v.input_bound if v else "", v.bottleneck if v else "",
        "" if v is None or v.predicted_img_per_s is None else v.predicted_img_per_s,
        "" if v is None or v.predicted_low_img_per_s is None else v.predicted_low_img_per_s,
        v.predicted_by if v else "", c.steps, c.stopped_by, c.warmup_steps, c.batch_size, c.startup_s,
        sum(c.wait_s), sum(c.step_s), c.requested_bytes,
        "" if c.fetched.bytes is None else c.fetched.bytes, c.fetched.method,
        "" if c.fetched_mb_per_s() is None else c.fetched_mb_per_s(), c.requested_mb_per_s(),
        c.io.read_bytes, c.io.read_chars, c.cache.regime, c.cache.verified, c.cache.resident_fraction,
        "" if c.cache.resident_after is None else c.cache.resident_after,
        sum(util) / len(util) if util else "", "ok" if c.gpu.available else c.gpu.reason,
        *(parts.get(k, "") for k in ("data_stall", "host_overhead", "copy", "compute")),
        c.error,
    ]  # fmt: skip


def render_csv(result: SweepResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for c in result.cells:
        w.writerow(_row(c))
    return buf.getvalue()
