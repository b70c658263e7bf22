"""``results.csv``: one row per cell, raw values with units in the column names."""

from __future__ import annotations

import csv
import io

from ioprof.results import SweepResult

COLUMNS = (
    "dataset",
    "loader",
    "workers",
    "status",
    "img_per_s",
    "data_wait_share",
    "input_bound",
    "bottleneck",
    "predicted_img_per_s",
    "predicted_by",
    "steps",
    "warmup_steps",
    "batch_size",
    "startup_s",
    "wait_s_total",
    "step_s_total",
    "storage_read_bytes",
    "read_chars",
    "storage_mb_per_s",
    "requested_mb_per_s",
    "cache_hit_ratio",
    "cache_regime",
    "resident_fraction_before",
    "gpu_util_mean_pct",
    "gpu_telemetry",
    "gpu_data_stall_s_mean",
    "gpu_host_overhead_s_mean",
    "gpu_copy_s_mean",
    "gpu_compute_s_mean",
    "error",
)


def render_csv(result: SweepResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for c in result.cells:
        v = c.verdict
        util = c.gpu.gpu_util_pct
        parts = c.cuda.mean_s() if c.cuda is not None else {}
        w.writerow(
            [
                c.dataset,
                c.loader,
                c.workers,
                c.status,
                c.img_per_s,
                c.data_wait_share,
                v.input_bound if v else "",
                v.bottleneck if v else "",
                v.predicted_img_per_s if v and v.predicted_img_per_s is not None else "",
                v.predicted_by if v else "",
                c.steps,
                c.warmup_steps,
                c.batch_size,
                c.startup_s,
                sum(c.wait_s),
                sum(c.step_s),
                c.io.read_bytes,
                c.io.read_chars,
                c.io.storage_mb_per_s,
                c.io.requested_mb_per_s,
                "" if c.io.cache_hit_ratio is None else c.io.cache_hit_ratio,
                c.cache.regime,
                c.cache.resident_fraction,
                sum(util) / len(util) if util else "",
                "ok" if c.gpu.available else c.gpu.reason,
                *(parts.get(k, "") for k in ("data_stall", "host_overhead", "copy", "compute")),
                c.error,
            ]
        )
    return buf.getvalue()
