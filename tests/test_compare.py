"""``ioprof compare`` and ``ioprof.load``: runs side by side, and results in pandas."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import cell, sweep_result

from ioprof.conclude.compare import compare, compare_cells, match

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
# 2 workers on 2 cores decode the 1024x768 set at about 200 img/s, on one core at about 100: a
# simulated step of 140 img/s keeps the two-core runs compute-bound (steady: a repeat stays within
# the noise) and makes the one-core run wait for data.
SIM = [
    "--no-probe",
    "--loaders",
    "multiprocess",
    "--compute",
    "sim:140",
    "--seconds",
    "3",
    "--batch-size",
    "4",
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
        ("serial (in-process)", "serial (in-process)"),
        ("1 worker", "2 workers"),
    ]
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


def _sweep(data: Path, out: Path, workers: str, *, cores: str | None = None) -> None:
    cmd = [
        sys.executable,
        "-m",
        "ioprof",
        "sweep",
        "--data",
        str(data),
        "--workers",
        workers,
        *SIM,
        "--out",
        str(out),
    ]
    if cores is not None:  # the same command on fewer cores: only the environment changed
        cmd = ["taskset", "-c", cores, *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)
    assert p.returncode == 0, p.stderr


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2, reason="needs taskset, 2 cores"
)
def test_one_core_instead_of_two_is_slower_and_a_repeat_is_not(large_set: Path, tmp_path: Path) -> None:
    """The same sweep (2 workers, sim:600) three times: again, and under ``taskset -c 0``. The
    options are equal in all three; only a declared repeat may set the noise floor."""
    _sweep(large_set, tmp_path / "two", "2")
    _sweep(large_set, tmp_path / "again", "2")
    _sweep(large_set, tmp_path / "onecore", "2", cores="0")
    _sweep(large_set, tmp_path / "one", "1")
    p = ioprof(
        "compare",
        *(str(tmp_path / n) for n in ("two", "again", "onecore", "one")),
        "--out",
        str(tmp_path / "c"),
    )
    assert p.returncode == 4, p.stdout + p.stderr  # slower beyond the noise: the CI gate
    data = json.loads((tmp_path / "c" / "comparison.json").read_text())
    again, onecore, one = data["runs"]
    assert data["repeats"] == 0 and data["min_effect"] == pytest.approx(0.10)
    assert again["settings"] == [] and [c["change"] for c in again["cells"]] == ["within-noise"]
    assert onecore["settings"] == [] and [c["change"] for c in onecore["cells"]] == ["slower"]
    assert ["usable cores", "2", "1"] in onecore["environment"]
    (c,) = one["cells"]
    assert one["settings"] == [["workers", "[2]", "[1]"]] and (c["setting_a"], c["setting_b"]) == (
        "2 workers",
        "1 worker",
    )
    assert f"slower beyond the noise: `{tmp_path / 'onecore'}`" in p.stdout
    report = (tmp_path / "c" / "report.md").read_text()
    assert "What else differs (the environment" in report and "| usable cores | 2 | 1 |" in report
    assert "Outcome (exit code 4)" in report and "@" not in report.split("Verdict:")[1].splitlines()[0]
    assert (tmp_path / "c" / "compare.png").stat().st_size > 5_000
    # the repeat declared: it sets the floor where it spread wider than 10 %, and is not compared as a run
    p = ioprof(
        "compare",
        str(tmp_path / "two"),
        str(tmp_path / "onecore"),
        "--repeat",
        str(tmp_path / "again"),
        "--out",
        str(tmp_path / "c2"),
    )
    data = json.loads((tmp_path / "c2" / "comparison.json").read_text())
    assert data["repeats"] == 1 and len(data["runs"]) == 1 and p.returncode == 4
    # the repeat alone against the reference: nothing slower, exit 0
    p = ioprof("compare", str(tmp_path / "two"), str(tmp_path / "again"), "--out", str(tmp_path / "c3"))
    assert p.returncode == 0 and "no cell slower beyond the noise" in p.stdout

    # another machine compares with a warning; another command is refused with one line
    other = json.loads((tmp_path / "again" / "results.json").read_text())
    other["machine"]["hostname"] = "elsewhere"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "results.json").write_text(json.dumps(other))
    p = ioprof("compare", str(tmp_path / "two"), str(tmp_path / "m"), "--out", str(tmp_path / "c4"))
    assert p.returncode == 0 and "**Other machine**" in (tmp_path / "c4" / "report.md").read_text()
    probe = tmp_path / "probe"
    assert (
        ioprof("probe", "storage", "--data", str(large_set), "--workers", "1", "--out", str(probe)).returncode
        == 0
    )
    p = ioprof("compare", str(tmp_path / "two"), str(probe))
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


def test_only_declared_repeats_raise_the_noise_floor() -> None:
    from dataclasses import replace

    ref = sweep_result((cell(wait=0.05, step=0.05, jitter=0.002, steps=30),))
    repeat = replace(ref, cells=(cell(wait=0.035, step=0.05, jitter=0.002, steps=30),))  # 18 % faster
    changed = replace(
        ref,
        config={**ref.config, "workers": [2]},
        cells=(cell(wait=0.03, step=0.05, jitter=0.002, steps=30),),
    )
    c = compare([("a", ref), ("two", changed)], repeats=[("again", repeat)])
    assert c.repeats == 1 and c.min_effect == pytest.approx(0.1 / 0.085 - 1, rel=0.01)
    # 25 % faster than the reference, but the repeat alone moved 18 %: still beyond that floor
    assert c.runs[0].cells[0].change == "faster" and c.outcome == "same"
    # a run with the same options is not a repeat unless declared: it is compared, and it is faster
    c = compare([("a", ref), ("again", repeat), ("two", changed)])
    assert c.repeats == 0 and c.min_effect == 0.10
    assert [r.cells[0].change for r in c.runs] == ["faster", "faster"]


def test_slower_beyond_the_noise_and_inconclusive_are_outcomes() -> None:
    from dataclasses import replace

    ref = sweep_result((cell(wait=0.0, step=0.05, jitter=0.002, steps=30),))
    slower = replace(ref, cells=(cell(wait=0.05, step=0.05, jitter=0.002, steps=30),))
    assert compare([("a", ref), ("b", slower)]).outcome == "slower"
    assert compare([("a", ref), ("b", ref)]).outcome == "same"
    nothing = replace(ref, cells=(cell(wait=0.0, step=0.05, jitter=0.002, steps=1),))  # no interval
    assert compare([("a", ref), ("b", nothing)]).outcome == "inconclusive"
