"""``ioprof compare`` and ``ioprof.load``: runs side by side, and results in pandas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import cell, sweep_result

from ioprof.comparison import compare, compare_cells, match

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
SIM = [
    "--no-probe",
    "--loaders",
    "multiprocess",
    "--compute",
    "sim:5000",
    "--seconds",
    "3",
    "--batch-size",
    "8",
]


def ioprof(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ioprof", *args], capture_output=True, text=True, env=ENV, timeout=600
    )


def test_cells_are_matched_exactly_then_by_loader_in_worker_order() -> None:
    a = [cell("serial", 0), cell("multiprocess", 1)]
    b = [cell("serial", 0), cell("multiprocess", 2)]
    pairs, unmatched = match(a, b)
    assert [(x.setting.label, y.setting.label) for x, y in pairs] == [
        ("serial (in-process)", "serial (in-process)"), ("1 worker", "2 workers"),
    ]  # fmt: skip
    assert unmatched == []


def test_a_change_counts_only_beyond_both_intervals_and_the_minimum_effect() -> None:
    slow = cell(wait=0.05, step=0.05, jitter=0.002, steps=30)
    fast = cell(wait=0.0, step=0.05, jitter=0.0, steps=30)
    assert compare_cells(slow, fast).change == "faster" and compare_cells(fast, slow).change == "slower"
    nearly = cell(wait=0.048, step=0.05, jitter=0.002, steps=30)  # 2 % apart: not a change
    assert compare_cells(slow, nearly).change == "within-noise"
    c = compare([("a", sweep_result((slow,))), ("b", sweep_result((fast,)))])
    (run,) = c.runs
    assert run.settings == () and run.cells[0].ratio == pytest.approx(2.0, rel=0.02)


@pytest.mark.slow
def test_more_workers_win_beyond_noise_and_a_repeat_does_not(small_set: Path, tmp_path: Path) -> None:
    runs = {"one": "1", "again": "1", "two": "2"}
    for name, workers in runs.items():
        p = ioprof(
            "sweep", "--data", str(small_set), "--workers", workers, *SIM, "--out", str(tmp_path / name)
        )
        assert p.returncode == 0, p.stderr
    p = ioprof(
        "compare",
        str(tmp_path / "one"),
        str(tmp_path / "again"),
        str(tmp_path / "two"),
        "--out",
        str(tmp_path / "c"),
    )
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "c" / "comparison.json").read_text())
    again, two = data["runs"]
    assert again["settings"] == [] and [c["change"] for c in again["cells"]] == ["within-noise"]
    assert two["settings"] == [["workers", "[1]", "[2]"]]
    (c,) = two["cells"]
    assert (
        c["change"] == "faster"
        and c["ratio_low"] > 1
        and (c["setting_a"], c["setting_b"]) == ("1 worker", "2 workers")
    )
    report = (tmp_path / "c" / "report.md").read_text()
    assert (
        "1 worker → 2 workers" in report and "**faster**" in report and "a repeat of the same run" in report
    )
    assert (tmp_path / "c" / "compare.png").stat().st_size > 5_000
    assert p.stdout.splitlines()[0].endswith(
        "no cell changed beyond the noise of both runs (1 compared); the verdict is the same."
    )

    # another machine compares with a warning; another command is refused with one line
    other = json.loads((tmp_path / "two" / "results.json").read_text())
    other["machine"]["hostname"] = "elsewhere"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "results.json").write_text(json.dumps(other))
    p = ioprof("compare", str(tmp_path / "one"), str(tmp_path / "m"), "--out", str(tmp_path / "c2"))
    assert p.returncode == 0 and "**Other machine**" in (tmp_path / "c2" / "report.md").read_text()
    probe = tmp_path / "probe"
    assert (
        ioprof("probe", "storage", "--data", str(small_set), "--workers", "1", "--out", str(probe)).returncode
        == 0
    )
    p = ioprof("compare", str(tmp_path / "one"), str(probe))
    assert p.returncode == 1 and p.stderr.startswith("ioprof: error: these runs are of different commands")
    assert len(p.stderr.strip().splitlines()) == 1


def test_a_run_loads_into_pandas_with_units_in_the_column_names() -> None:
    import ioprof

    run = ioprof.load(REPO / "reports" / "examples" / "cpu-2core-sim-h100")
    assert run.kind == "sweep" and run.verdict.startswith("Verdict: highly input-bound")
    cells = run.cells
    assert len(cells) == 12 and {
        "img_per_s",
        "img_per_s_low",
        "img_per_s_high",
        "data_wait_share",
        "fetched_mb_per_s",
    } <= set(cells.columns)
    assert (cells["img_per_s_low"] <= cells["img_per_s"]).all() and (
        cells["img_per_s"] <= cells["img_per_s_high"]
    ).all()
    ceilings = run.ceilings
    assert set(ceilings["stage"]) == {"compute", "decode", "storage"}
    # results.csv is the same frame
    csv = (REPO / "reports" / "examples" / "cpu-2core-sim-h100" / "results.csv").read_text().splitlines()
    assert csv[0] == ",".join(cells.columns)


def test_schema_1_results_load_into_pandas_through_the_migration() -> None:
    import ioprof

    run = ioprof.load(Path(__file__).resolve().parent / "data" / "schema1_results.json")
    assert len(run.cells) == 4 and run.cells["fetched_method"].eq("block-io").all()


def test_repeats_of_the_reference_raise_the_noise_floor_to_their_spread() -> None:
    from dataclasses import replace

    ref = sweep_result((cell(wait=0.05, step=0.05, jitter=0.002, steps=30),))
    repeat = replace(
        ref, cells=(cell(wait=0.035, step=0.05, jitter=0.002, steps=30),)
    )  # 18 % faster, no setting changed
    changed = replace(
        ref,
        config={**ref.config, "workers": [2]},
        cells=(cell(wait=0.03, step=0.05, jitter=0.002, steps=30),),
    )
    c = compare([("a", ref), ("again", repeat), ("two", changed)])
    assert c.repeats == 1 and c.min_effect == pytest.approx(0.1 / 0.085 - 1, rel=0.01)
    # 25 % faster than the reference, but the repeat alone moved 18 %: still beyond that floor
    assert c.runs[1].cells[0].change == "faster"
    # the repeat's own move is the floor, not a change beyond it
    assert c.runs[0].cells[0].change == "within-noise"
    # without the repeat, the same run is judged against the default floor
    assert compare([("a", ref), ("two", changed)]).min_effect == 0.10
