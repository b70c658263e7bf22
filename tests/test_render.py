from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from builders import cell, sweep_result

from ioprof import results
from ioprof.analysis import analyze
from ioprof.errors import IoprofError
from ioprof.render import write_report
from ioprof.render.markdown import render_markdown
from ioprof.render.table import COLUMNS, render_csv


@pytest.fixture()
def analyzed() -> results.SweepResult:
    return analyze(
        sweep_result(
            (
                cell("serial", 0, wait=0.03, step=0.01),
                cell("multiprocess", 1, wait=0.02, step=0.01),
                cell("multiprocess", 4, wait=0.0, step=0.01),
            )
        )
    )


def test_results_json_round_trip(tmp_path: Path, analyzed: results.SweepResult) -> None:
    path = tmp_path / "results.json"
    results.save(analyzed, path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == results.SCHEMA_VERSION
    first = data["cells"][0]
    for key in ("loader", "workers", "img_per_s", "data_wait_share", "io", "gpu", "verdict"):
        assert key in first
    assert first["verdict"]["bottleneck"] == "decode" and first["verdict"]["input_bound"] == "highly"
    assert first["io"]["storage_mb_per_s"] == pytest.approx(1.0 / 0.4)
    assert first["gpu"]["available"] is False and first["gpu"]["reason"]
    assert results.load(path) == analyzed


def test_load_refuses_other_schema_and_garbage(tmp_path: Path, analyzed: results.SweepResult) -> None:
    path = tmp_path / "results.json"
    results.save(analyzed, path)
    data = json.loads(path.read_text())
    data["schema_version"] = 999
    path.write_text(json.dumps(data))
    with pytest.raises(IoprofError, match="schema_version 999"):
        results.load(path)
    path.write_text("{not json")
    with pytest.raises(IoprofError, match=r"not a readable results\.json"):
        results.load(path)
    with pytest.raises(IoprofError, match="no such file"):
        results.load(tmp_path / "missing.json")


def test_markdown_opens_with_the_answer_and_has_the_exact_tables(analyzed: results.SweepResult) -> None:
    md = render_markdown(analyzed)
    lines = md.splitlines()
    assert lines[0] == "# ioprof sweep — 2026-11-22"
    assert lines[2] == (
        "**Verdict: compute-bound** — at the best loader setting, input is not what limits training."
    )
    assert md.index("## The answer") < md.index("## Every cell") < md.index("![") < md.index("## How this")
    assert (
        "| 500x375 | serial (in-process) | 200 | 75.0 % | highly | decode | 207 (compute+decode+storage in series) "
        "| 2.5 / 2.5 | 0 % | 0.25 s | 10 (steps) |"
    ) in lines
    assert "| 500x375 | 200 | 800 (4 workers) | 4.00× |" in lines
    assert "No GPU telemetry: the compute device is the CPU; there is no GPU to sample." in lines
    assert render_markdown(analyzed) == md  # pure


def test_csv_has_one_row_per_cell(analyzed: results.SweepResult) -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(analyzed))))
    assert len(rows) == 3
    assert tuple(rows[0].keys()) == COLUMNS
    assert rows[2]["loader"] == "multiprocess" and rows[2]["workers"] == "4"
    assert float(rows[2]["img_per_s"]) == pytest.approx(800.0)


def test_write_report_makes_every_file(tmp_path: Path, analyzed: results.SweepResult) -> None:
    report = write_report(analyzed, tmp_path)
    assert report.read_text().startswith("# ioprof sweep")
    png = (tmp_path / "throughput.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert (tmp_path / "results.csv").exists()
    assert not (tmp_path / "gpu_utilization.png").exists()  # no GPU samples, no empty plot


def test_interrupted_run_says_so(analyzed: results.SweepResult) -> None:
    from dataclasses import replace

    md = render_markdown(replace(analyzed, run=replace(analyzed.run, interrupted=True)))
    assert "**This run was interrupted.**" in md


def test_a_virtual_machine_gets_the_host_cache_caveat(analyzed: results.SweepResult) -> None:
    from dataclasses import replace

    caveat = "This machine is a virtual machine: its host may cache the virtual disk"
    assert caveat not in render_markdown(analyzed)
    vm = replace(analyzed, machine=replace(analyzed.machine, virtual_machine=True))
    assert caveat in render_markdown(vm)


def test_a_cuda_run_shows_where_each_steps_gpu_time_went() -> None:
    from builders import cuda_result, with_cuda_steps

    cells = (
        with_cuda_steps(cell("serial", 0, wait=0.06, step=0.1), 0.060, 0.002, 0.008, 0.090),
        with_cuda_steps(cell("multiprocess", 8, wait=0.0, step=0.1), 0.0, 0.002, 0.008, 0.090),
    )
    result = analyze(cuda_result(cells, 2650.0, "NVIDIA H100 80GB HBM3"))
    text = render_markdown(result)
    assert "## Where each step's GPU time went (CUDA events)" in text
    # serial: 60 ms of its 160 ms step the GPU starved for data
    row = "| serial (in-process) | 60.00 ms (38 %) | 2.00 ms (1 %) | 8.00 ms (5 %) | 90.00 ms (56 %) | 70.00 ms |"
    assert row in text
    assert "nothing synchronizes inside the measured window" in text
    assert "pinned host memory, non-blocking copies" in text
    assert "is 95% of the published ResNet-50 figure" in text
    rows = list(csv.DictReader(io.StringIO(render_csv(result))))
    assert float(rows[0]["gpu_data_stall_s_mean"]) == pytest.approx(0.060)
    assert float(rows[1]["gpu_compute_s_mean"]) == pytest.approx(0.090)
    # and none of it on the CPU
    assert "CUDA events" not in render_markdown(analyze(sweep_result((cell("serial", 0),))))
