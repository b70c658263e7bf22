"""Reports are pure: the same result gives the same text; results.csv and results.json round-trip."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import paths
import pytest
from builders import cell, sweep_result

from ioprof.conclude.sweep import conclude
from ioprof.core import resultfile
from ioprof.core.errors import IoprofError
from ioprof.core.results import SweepResult
from ioprof.render.kinds import write as write_report
from ioprof.render.results_csv import COLUMNS, render_csv
from ioprof.render.sweep import render_markdown


@pytest.fixture()
def analyzed() -> SweepResult:
    return conclude(
        sweep_result(
            (
                cell("serial", 0, wait=0.03, step=0.01),
                cell("multiprocess", 1, wait=0.02, step=0.01, jitter=0.005),
                cell("multiprocess", 4, wait=0.0, step=0.01),
            )
        )
    )


def test_results_json_round_trip_recomputes_the_conclusions(tmp_path: Path, analyzed: SweepResult) -> None:
    path = tmp_path / "results.json"
    resultfile.save(analyzed, path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == 2
    first = data["cells"][0]
    for key in (
        *"loader workers img_per_s img_per_s_low data_wait_share data_wait_share_high io gpu verdict fetched".split(),
    ):
        assert key in first
    assert first["verdict"]["bottleneck"] == "decode" and first["verdict"]["input_bound"] == "highly"
    assert first["fetched"] == {"bytes": 1_000_000, "method": "block-io", "source": "", "cross_checks": []}
    assert first["fetched_mb_per_s"] == pytest.approx(1.0 / 0.4)
    assert data["analysis"]["findings"][0]["kind"] == "datasets-fit-in-ram"
    loaded = resultfile.load(path)
    assert loaded.analysis is None and all(c.verdict is None for c in loaded.cells)  # measurements only
    assert conclude(loaded) == analyzed  # the conclusions are recomputed, identically


def test_a_host_that_pages_out_idle_memory_weakens_the_fits_in_ram_claim(analyzed: SweepResult) -> None:
    """Where the host runs DAMON's pageout, "later epochs come from the page cache" is said with
    what may undo it: the idle age it pages out at, and the epoch's length at the best pace."""
    plain = render_markdown(analyzed)
    assert "pages out memory" not in plain
    machine = replace(analyzed.machine, reclaim="DAMON's pageout scheme in kdamond 0", reclaim_idle_s=60.0)
    reclaimed = conclude(replace(analyzed, machine=machine, analysis=None))
    (fit,) = [x for x in reclaimed.analysis.findings if x.kind == "datasets-fit-in-ram"]  # type: ignore[union-attr]
    best = max(c.img_per_s for c in reclaimed.cells)
    assert fit.epoch_s == pytest.approx(reclaimed.datasets[0].epoch_samples / best)  # type: ignore[attr-defined]
    text = render_markdown(reclaimed)
    assert (
        "But this host pages out memory it finds idle for 60 s on its own (DAMON's pageout scheme in kdamond 0), "
        "read pages included: later epochs may still be read from storage, in part or whole; an epoch here takes "
        f"about {fit.epoch_s:,.0f} s at the best pace measured, shorter than that age"  # type: ignore[attr-defined]
    ) in text
    shorter = replace(machine, reclaim_idle_s=fit.epoch_s / 2)  # type: ignore[attr-defined]
    text = render_markdown(conclude(replace(analyzed, machine=shorter, analysis=None)))
    assert "at the best pace measured, so each file idles that long between its reads." in text


def test_results_json_is_readable_by_the_group_as_the_umask_allows(
    tmp_path: Path, analyzed: SweepResult
) -> None:
    old = os.umask(0o022)
    try:
        resultfile.save(analyzed, tmp_path / "results.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "results.json").stat().st_mode) == 0o644


def test_load_migrates_schema_1_and_refuses_newer_and_garbage(tmp_path: Path, analyzed: SweepResult) -> None:
    path = tmp_path / "results.json"
    resultfile.save(analyzed, path)
    data = json.loads(path.read_text())
    data["schema_version"] = 999
    path.write_text(json.dumps(data))
    with pytest.raises(IoprofError, match="schema_version 999 is newer"):
        resultfile.load(path)
    path.write_text("{not json")
    with pytest.raises(IoprofError, match=r"not a readable results\.json"):
        resultfile.load(path)
    with pytest.raises(IoprofError, match="no such file"):
        resultfile.load(tmp_path / "missing.json")


def test_a_schema_1_example_report_loads_through_the_migration() -> None:
    old = paths.DATA / "schema1_results.json"
    loaded = resultfile.load(old)
    assert isinstance(loaded, SweepResult) and loaded.schema_version == 2
    cell0 = loaded.cells[0]
    assert cell0.fetched.method == "block-io" and len(cell0.images_per_step) == cell0.steps
    assert conclude(loaded).analysis is not None


def test_markdown_opens_with_the_answer_and_has_the_exact_tables(analyzed: SweepResult) -> None:
    md = render_markdown(analyzed)
    lines = md.splitlines()
    assert lines[0] == "# ioprof sweep — 2026-11-22"
    assert lines[2] == (
        "**Verdict: compute-bound** — at the best loader setting of every dataset, input is not what limits training."
    )
    assert md.index("## The answer") < md.index("## Every cell") < md.index("![") < md.index("## How this")
    assert (
        "| 500x375 | serial (in-process) | 200 ± 0.0 % | 75.0 % | 25.0 % | highly | decode "
        "| 207–231 (compute+decode in series) | 2.50 / 2.50 (block-io) | cold, verified | 0.25 s | 10 (steps) |"
    ) in lines
    assert "| 500x375 | 200 ± 0.0 % | 800 ± 0.0 % (4 workers) | 4.00× |" in lines
    # MLPerf Storage's accelerator utilization at the best setting, against its bar, in the answer
    busy = (
        "**Accelerator busy** (MLPerf Storage's AU: the share of the loop's time not spent waiting for data; its "
        "bar is 90 %) at the best setting: 500x375 (4 workers) 100.0 %, meets it."
    )
    assert busy in lines and md.index(busy) < md.index("## Every cell")
    assert "No GPU telemetry: the compute device is the CPU; there is no GPU to sample." in lines
    assert render_markdown(analyzed) == md  # pure


def test_every_cell_figure_carries_its_interval(analyzed: SweepResult) -> None:
    one = analyzed.cells[1]
    thr, share = one.throughput(), one.wait_share()
    assert thr.known and share.known and thr.low < thr.value < thr.high
    row = next(
        line for line in render_markdown(analyzed).splitlines() if line.startswith("| 500x375 | 1 worker |")
    )
    assert f"{share.low * 100:.1f}–{share.high * 100:.1f}]" in row and " ± " in row


def test_a_share_whose_interval_is_narrower_than_its_digits_is_shown_alone() -> None:
    """A first pass's share measured once, exactly, read "94 % [94–94]": ends that round to the
    same say nothing the figure does not."""
    from ioprof.core.stats import Interval
    from ioprof.render.fmt import share_ci

    assert share_ci(Interval(0.9402, 0.9398, 0.9406, 2), 0) == "94 %"
    assert share_ci(Interval(0.9402, 0.9398, 0.9406, 2), 2) == "94.02 % [93.98–94.06]"
    assert share_ci(Interval(0.31, 0.284, 0.337, 10)) == "31.0 % [28.4–33.7]"
    assert share_ci(Interval(0.0, 0.0, 0.0004, 10)) == "0.0 %"


def test_a_rate_keeps_three_figures_where_it_rounds_up_to_the_next_digit() -> None:
    """A storage that needed 9.998 MB/s read "10.00 MB/s" (four figures, and a report check for
    "0.00 MB/s" found it there): the digits follow the value as printed."""
    from ioprof.render.fmt import rate

    assert [rate(x) for x in (9.994, 9.998, 10.04, 99.94, 99.96, 1234.5)] == [
        "9.99",
        "10.0",
        "10.0",
        "99.9",
        "100",
        "1,234",
    ]


def test_a_range_of_rates_whose_ends_print_the_same_is_one_figure() -> None:
    """A serial cell's prediction, compute and decode in series at their best and worst, read
    "3.56–3.56" in the sweep's table on a CPU, where decoding is a hundredth of the step: a
    range that shows no width is its one figure."""
    from ioprof.render.fmt import rate_span

    assert rate_span(3.5612, 3.5649) == "3.56"
    assert rate_span(3.441, 3.452) == "3.44–3.45"
    assert rate_span(1_820.4, 1_983.0) == "1,820–1,983"


def _sample_times(loop: tuple[float, float, float]) -> Any:
    from ioprof.core.handover import SlowWait
    from ioprof.core.inside import SampleTimes
    from ioprof.core.stats import Interval

    slow = SlowWait(
        fence_s=0.020, median_s=0.0136, slow=1, samples=20, batches=5, measured_wait_s=0.146,
        replayed_wait_s=0.152, without_s=0.149 if loop[2] < 0.005 else 0.05,
        wait=Interval(loop[0] * 20, loop[1] * 20, loop[2] * 20, 5), loop=Interval(*loop, 5),
        unordered_s=0.0150, on_cpu=Interval(0.0, 0.0, 0.001, 5), loop_s=6.8,
    )  # fmt: skip
    return SampleTimes(20, 0.0136, 0.0155, 0.0174, 0.0174, 0.06, ((43, 0.0174, "img_000172.jpg"),), slow)


def test_slow_samples_that_cost_the_loop_nothing_are_said_in_one_sentence() -> None:
    """The quick start's 1024x768 cell on a CPU: one sample beyond the fence, which cost the loop
    "0 % of the loop's time, 0 % of its wait", then three more sentences qualifying that saving
    (its work on a CPU, in_order=False, the cores it waited for). A saving whose whole interval
    prints as 0 % is said as what it is, with the replay it rests on, and nothing qualifies it."""
    from ioprof.render.inside import per_sample_line

    none = per_sample_line(_sample_times((0.0001, 0.0, 0.003)), queued=0.4)
    assert "cost the loop under 0.5 % of its time, at the high end of its interval" in none
    assert "waits 0.15 s over 5 batches, with them 0.15 s (the loop measured 0.15 s)" in none
    assert "in_order=False" not in none and "waited for a core" not in none and "Of that" not in none
    some = per_sample_line(_sample_times((0.03, 0.01, 0.05)), queued=0.4)
    assert "3 % [1–5] of the loop's time" in some and "in_order=False" in some and "waited for a core" in some


def test_a_size_a_duration_and_a_half_width_take_the_unit_their_value_prints_in() -> None:
    """The twins of the rate above: a value just under a unit's step rounded up to it printed
    "1,000 kB", "60.0 s", "1,000 ms" and "± 1.0 %"; each now reads in the next unit, as the same
    value a little larger does."""
    from ioprof.core.stats import Interval
    from ioprof.render.fmt import duration, plus_minus, size

    assert [size(x) for x in (999_400, 999_700, 1_000_000, 999_940_000, 999_960_000, 1e9)] == [
        "999 kB",
        "1.0 MB",
        "1.0 MB",
        "999.9 MB",
        "1.00 GB",
        "1.00 GB",
    ]
    assert [duration(x) for x in (0.9994, 0.9996, 59.94, 59.97, 3596.0, 3598.0, 3600.0)] == [
        "999 ms",
        "1.0 s",
        "59.9 s",
        "1.0 min",
        "59.9 min",
        "1.0 h",
        "1.0 h",
    ]
    half_widths = (0.94, 0.998, 1.0, 2.4)
    assert [plus_minus(Interval(100.0, 100 - h, 100 + h, 10)) for h in half_widths] == [
        " ± 0.9 %",
        " ± 1 %",
        " ± 1 %",
        " ± 2 %",
    ]


def test_fetched_mb_per_s_carries_its_interval_from_the_windows_segments(analyzed: SweepResult) -> None:
    """Hand-built: a window of 2.5 MB fetched over 1 s, cut where the counters were read into
    segments of 0.25 s: 0.5, 0.7, 0.6, 0.7 MB (2.0, 2.8, 2.4, 2.8 MB/s). The interval is the batch
    means' (t with 3 degrees of freedom, held to the stopping rule's 6 looks), around the window's
    2.5 MB/s; it is in the table, results.csv and results.json; a cell whose window was not cut
    (a file from before, ``run``'s cells) shows the figure alone, as before."""
    import statistics

    from ioprof.core.counts import Fetched
    from ioprof.core.stats import LOOKS, looks_level, t_quantile

    base = analyzed.cells[0]
    rates = [2.0, 2.8, 2.4, 2.8]
    cut = replace(
        base,
        elapsed_s=1.0,
        fetched=Fetched(2_500_000, "block-io"),
        looks=LOOKS,
        fetched_segments=tuple((0.25, int(r * 0.25 * 1e6)) for r in rates),
    )
    bw = cut.fetched_bandwidth()
    assert bw is not None and bw.value == pytest.approx(2.5) and bw.batches == 4
    t = t_quantile(1 - (1 - looks_level(LOOKS)) / 2, 3)
    half = t * statistics.stdev(rates) / 2
    assert (bw.low, bw.high) == (pytest.approx(2.5 - half), pytest.approx(2.5 + half))
    result = replace(analyzed, cells=(cut, *analyzed.cells[1:]))
    row = next(line for line in render_markdown(result).splitlines() if line.startswith("| 500x375 | serial"))
    assert f"| 2.50 ± {half / 2.5 * 100:.0f} % / " in row, row
    first = next(csv.DictReader(io.StringIO(render_csv(result))))
    assert float(first["fetched_mb_per_s_low"]) == pytest.approx(2.5 - half)
    assert resultfile.to_jsonable(cut)["fetched_mb_per_s_high"] == pytest.approx(2.5 + half)
    assert base.fetched_bandwidth() is None and first.keys() == set(COLUMNS)
    uncut = next(
        line for line in render_markdown(analyzed).splitlines() if line.startswith("| 500x375 | serial")
    )
    assert "| 2.50 / 2.50 (block-io) |" in uncut


def test_a_storage_bound_report_says_what_to_do_about_storage() -> None:
    from builders import storage

    slow = cell("multiprocess", 4, wait=0.09, step=0.01)  # 80 img/s, 90 % waiting
    base = sweep_result((slow,), compute_rate=2800.0)
    ceilings = (replace(base.ceilings[0], storage=(storage(1, 80.0), storage(4, 82.0))),)
    md = render_markdown(conclude(replace(base, ceilings=ceilings)))
    assert (
        "**Verdict: highly input-bound — the bottleneck is storage**: 500x375 waits for data 90 % of step time"
        in md
    )
    assert "More loader workers will not help" in md and "ioprof place --data PATH" in md
    assert "takes about" not in md  # no worker-count advice when storage limits


def test_a_storage_ceiling_says_which_first_reads_its_rate_left_out() -> None:
    """Hand-built: 100 reads at 80 files/s, the first 10 of them counted as a start-up burst. The
    storage table's MB/s is the rate of the other 90 (80 files/s, the burst's not in), and a note
    says what was left out at which readers; a ceiling with nothing cut gets no note."""
    from builders import storage

    base = sweep_result((cell("multiprocess", 4, wait=0.09, step=0.01),), compute_rate=2800.0)
    steady, burst = storage(1, 80.0), replace(storage(2, 80.0), warmup=10)
    burst = replace(
        burst, completed_s=tuple(t - 9 / 80.0 if i >= 9 else 0.0 for i, t in enumerate(burst.completed_s))
    )
    assert burst.bandwidth().value == pytest.approx(8.0) and burst.file_rate().value == pytest.approx(80.0)
    ceilings = (replace(base.ceilings[0], storage=(steady, burst)),)
    md = render_markdown(conclude(replace(base, ceilings=ceilings)))
    assert "| 2 | 8.00 ± 0.0 % | 80.0 ± 0.0 % |" in md, md
    assert "as a start-up transient" in md and "10 of 100 files at 2 readers" in md
    assert "at 1 reader" not in md  # the steady one cut nothing
    md = render_markdown(conclude(replace(base, ceilings=(replace(base.ceilings[0], storage=(steady,)),))))
    assert "start-up transient" not in md


def test_csv_has_one_row_per_cell_with_intervals(analyzed: SweepResult) -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(analyzed))))
    assert len(rows) == 3 and tuple(rows[0].keys()) == COLUMNS
    assert rows[2]["loader"] == "multiprocess" and rows[2]["workers"] == "4"
    assert float(rows[2]["img_per_s"]) == pytest.approx(800.0)
    assert float(rows[1]["img_per_s_low"]) < float(rows[1]["img_per_s"]) < float(rows[1]["img_per_s_high"])
    assert rows[0]["fetched_method"] == "block-io" and rows[0]["cache_verified"] == "True"
    # a cell's window in seconds since the epoch, to be joined with series taken elsewhere
    timed = replace(analyzed.cells[0], window_wall_s=(1795714126.5, 1795714131.25))
    rows = list(
        csv.DictReader(io.StringIO(render_csv(replace(analyzed, cells=(timed, *analyzed.cells[1:])))))
    )
    assert (rows[0]["window_start_unix_s"], rows[0]["window_end_unix_s"]) == ("1795714126.5", "1795714131.25")
    assert rows[1]["window_start_unix_s"] == ""  # a cell without one (a file from before)


def test_write_report_makes_every_file(tmp_path: Path, analyzed: SweepResult) -> None:
    report = write_report(analyzed, tmp_path)
    assert report.read_text().startswith("# ioprof sweep")
    png = (tmp_path / "throughput.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert (tmp_path / "results.csv").exists()
    assert not (tmp_path / "gpu_utilization.png").exists()  # no GPU samples, no empty plot


def test_interrupted_run_says_so(analyzed: SweepResult) -> None:
    md = render_markdown(replace(analyzed, run=replace(analyzed.run, interrupted=True)))
    assert "**This run was interrupted.**" in md


def test_the_warm_up_is_said_as_the_cells_ran_it(analyzed: SweepResult) -> None:
    """Each cell records its warm-up: the base, and on the CPU one batch a worker."""
    base = analyzed.run.warmup_steps
    cells = tuple(replace(c, warmup_steps=base + c.workers) for c in analyzed.cells)
    md = render_markdown(replace(analyzed, cells=cells))
    assert f"warm-up of {base} step(s) plus one per loader worker (their first batches arrive together" in md
    # as cells run it now: rounded up to whole turns of the workers
    turns = tuple(
        replace(c, warmup_steps=-(-(base + c.workers) // max(1, c.workers)) * c.workers)
        for c in analyzed.cells
    )
    md = render_markdown(replace(analyzed, cells=turns))
    assert "rounded up to whole turns of the workers" in md


def test_a_virtual_machine_gets_the_host_cache_caveat(analyzed: SweepResult) -> None:
    caveat = "This machine is a virtual machine: its host may cache the virtual disk"
    assert caveat not in render_markdown(analyzed)
    vm = replace(analyzed, machine=replace(analyzed.machine, virtual_machine=True))
    assert caveat in render_markdown(vm)
    # objects read over the network from a store: no virtual disk was read, no caveat
    store = replace(
        vm,
        ceilings=tuple(
            replace(
                dc,
                storage=tuple(replace(st, latency_kind="first byte", where="the store") for st in dc.storage),
            )
            for dc in vm.ceilings
        ),
    )
    assert caveat not in render_markdown(store)


def test_a_cuda_run_shows_where_each_steps_gpu_time_went() -> None:
    from builders import cuda_result, with_cuda_steps

    cells = (
        with_cuda_steps(cell("serial", 0, wait=0.06, step=0.1), 0.060, 0.002, 0.008, 0.090),
        with_cuda_steps(cell("multiprocess", 8, wait=0.0, step=0.1), 0.0, 0.002, 0.008, 0.090),
    )
    # the warm-up as the cells ran it: 3 steps, and on a GPU two a worker (every batch it prefetches)
    cells = tuple(replace(c, warmup_steps=3 + 2 * c.workers) for c in cells)
    result = conclude(cuda_result(cells, 2650.0, "NVIDIA H100 80GB HBM3"))
    result = replace(result, run=replace(result.run, warmup_steps=3))
    text = render_markdown(result)
    assert "warm-up of 3 step(s) plus 2 per loader worker (every batch they prefetched" in text
    assert "## Where each step's GPU time went (CUDA events)" in text
    # serial: 60 ms of its 160 ms step the GPU starved for data
    row = "| 500x375 | serial (in-process) | 60.00 ms (38 %) | 2.00 ms (1 %) | 8.00 ms (5 %) | 90.00 ms (56 %) | 70.00 ms |"
    assert row in text
    assert "nothing synchronizes inside the measured window" in text
    assert "pinned host memory, non-blocking copies" in text
    assert "is 95 % of the published ResNet-50 figure" in text
    rows = list(csv.DictReader(io.StringIO(render_csv(result))))
    assert float(rows[0]["gpu_data_stall_s_mean"]) == pytest.approx(0.060)
    assert float(rows[1]["gpu_compute_s_mean"]) == pytest.approx(0.090)
    # and none of it on the CPU
    assert "CUDA events" not in render_markdown(conclude(sweep_result((cell("serial", 0),))))


def test_an_unknown_interval_saved_as_null_loads_back_unknown_and_renders(tmp_path: Path) -> None:
    """±inf (an interval with too few groups) is written as null; reading it back must not make
    the renderers fail (as a DDP run's rank files did) but say the interval is unknown."""
    import math

    from ioprof.core.inside import StageTime
    from ioprof.core.stats import Interval
    from ioprof.render.inside import _ms_range

    unknown = Interval.unknown(0.004)
    stage = StageTime("wait for the batch", "main", unknown.value, unknown.low, unknown.high)
    path = tmp_path / "stage.json"
    path.write_text(json.dumps(resultfile.to_jsonable(stage)))
    loaded = resultfile.from_jsonable(StageTime, json.loads(path.read_text()))
    assert math.isnan(loaded.low_s) and math.isnan(loaded.high_s) and loaded.s_per_sample == 0.004
    assert _ms_range(loaded.low_s, loaded.high_s) == "[± ?]"
    assert _ms_range(0.001, 0.002) == "[1.00–2.00]"


def test_the_bandwidth_at_the_steps_pace_is_said_as_a_need_not_as_a_reading() -> None:
    """Advice's demand is the compute ceiling, not what the loader ran at: an evaluation loader
    measured at 26 img/s on a 1 MB/s link was said to 'draw 21.5 MB/s' at 544 img/s."""
    from ioprof.core.findings import Advice
    from ioprof.render.words import advice

    a = Advice(
        dataset="loader 2",
        fix_first="unknown",
        demand_img_per_s=544.0,
        per_worker_img_per_s=None,
        workers_needed=None,
        workers_estimated=None,
        best_decode_workers=None,
        best_decode_img_per_s=None,
        cores_usable=2,
        cores_suffice=True,
        decode_shortfall=None,
        mean_file_bytes=40e3,
        storage_mb_per_s_needed=21.5,
        storage_mb_per_s_measured=None,
        storage_img_per_s_best=None,
        storage_best_readers=None,
        storage_suffices=None,
        storage_scales_with_readers=None,
        network_storage=True,
        serial_suffices=None,
        serial_wait_share=None,
        consumer="evaluation",
    )
    (line,) = advice(a)
    assert line.startswith("Evaluation at 544 img/s (the pace its step allows) would draw 21.5 MB/s"), line
    assert "draws" not in line
    # storage limiting a loader whose storage was never read alone (a zip that names no files):
    # said as not measured, never as "— MB/s at None reader(s)"
    first = advice(replace(a, fix_first="storage", consumer="training"))[0]
    assert first.startswith(
        "Storage limits it: what the storage delivers alone was not measured (see *Not measured*), "
        "and training at 544 img/s needs 21.5 MB/s (40 kB an image)."
    ), first
    # a loader that fetched part of the bytes its samples hold (rows faulted in from a mapped file,
    # some already resident): the storage's rate over that share, as its verdict used it, beside the
    # probe's rate of whole samples — one storage, never two unexplained rates
    measured = replace(
        a,
        fix_first="storage",
        consumer="training",
        storage_mb_per_s_measured=1.08,
        storage_img_per_s_best=27.0,
        storage_best_readers=2,
        storage_fetched_share=0.5,
        storage_img_per_s_fetched=54.0,
    )
    first = advice(measured)[0]
    assert first.startswith(
        "Storage limits it: the storage delivers 1.08 MB/s (27.0 img/s at 2 reader(s) reading whole "
        "samples; 54.0 img/s to this loader, which fetched 50 % of the bytes its samples hold), and "
        "training at 544 img/s needs 21.5 MB/s (40 kB an image; 10.8 MB/s at the share it fetched)."
    ), first


def _in_turns(turns: int, produced: bool) -> SweepResult:
    """A GPU-like cell of 8 workers at 60 img/s each (a turn of batches of 256 every 4.3 s) whose loop
    waits once a turn and steps 54 ms a batch: ``turns`` whole turns, with or without the workers'
    own cycles (5 % apart)."""
    steps = 8 * turns
    waits = tuple(256 / 60 - 8 * 0.054 if i % 8 == 0 else 0.0 for i in range(steps))
    elapsed = sum(waits) + 0.054 * steps
    made = tuple((256 / 60 * (1 + 0.05 * (i % 3 - 1)), 256 / 60 * 0.98, 256) for i in range(steps))
    c = replace(
        cell("multiprocess", 8, step=0.054, steps=steps, batch=256),
        wait_s=waits,
        elapsed_s=elapsed,
        img_per_s=256 * steps / elapsed,
        data_wait_share=sum(waits) / elapsed,
        produced=made if produced else (),
    )
    return conclude(sweep_result((c,)))


def test_a_cell_of_few_turns_says_it_cannot_decide_instead_of_printing_0_to_100() -> None:
    """Three turns of 8 workers and nothing from the workers: the loop's batch means cannot decide,
    and the row says so in words with the window that would; with the workers' cycles the same cell
    has its interval, marked (W), and no interval of either reaches above the step's own rate."""
    report = render_markdown(_in_turns(3, produced=False))
    (row,) = [line for line in report.splitlines() if "| 8 workers |" in line and "(steps)" in line]
    assert "too few batches to decide: 3.0 turns of 8 workers; a window of about" in row
    assert "to tell: 0–" not in report and "[0–" not in report and "100.0]" not in report
    told = render_markdown(_in_turns(3, produced=True))
    (row,) = [line for line in told.splitlines() if "| 8 workers |" in line and "(steps)" in line]
    assert "(W)" in row and "too few" not in row and "[0–" not in row
    c = _in_turns(3, produced=True).cells[0]
    assert c.rates().method == "workers" and c.throughput().high < 256 / 0.054
    assert c.verdict is not None and c.verdict.input_bound == "highly"


def test_a_ceiling_pooled_with_the_serial_cells_says_how_many_steps_of_each() -> None:
    from builders import compute

    from ioprof.runners.sweep import over_the_sweep

    serial = cell("serial", 0, wait=0.03, step=0.25)
    result = sweep_result((serial, cell("multiprocess", 4, step=0.25)))
    result = replace(result, compute=over_the_sweep(compute(40.0, simulated=False), result.cells))
    text = render_markdown(conclude(result))
    assert (
        "3 steps on synthetic batches already on the device and the serial cells' 10 (the same step" in text
    )
    alone = render_markdown(conclude(replace(result, compute=compute(40.0, simulated=False))))
    assert "synthetic batches already on the device, 3 steps." in alone


def test_the_kernels_split_says_why_it_made_no_call() -> None:
    """No call from the kernel's split has two reasons the report must not mix up: too few waits
    read, or a loop not clearly input-bound (its waits, however many, are not judged)."""
    from ioprof.core.results import WaitSplit
    from ioprof.core.thresholds import KERNEL_SPLIT_MIN_UNITS
    from ioprof.render.findings import wait_split

    def split(n: int) -> WaitSplit:
        return WaitSplit((0.01,) * n, (0.005,) * n, (0.0,) * n, (0.0,) * n, "worker", n)

    many, few = KERNEL_SPLIT_MIN_UNITS * 3, KERNEL_SPLIT_MIN_UNITS - 1
    assert f"not judged: the loop is not clearly input-bound; {many} of {many} waits" in wait_split(
        split(many), ""
    )
    assert f"too few waits to judge; {few} of {few} waits" in wait_split(split(few), "")


@pytest.mark.parametrize(
    ("left", "said"),
    [
        (0, "7.9 MB were read back in 30 ms, so your training finds the cache as it left it."),
        (2_000_000, "and 2.0 MB were not (the read-back stops after as long as the read itself took)"),
    ],
)
def test_a_run_says_what_its_probe_evicted_and_read_back_and_stopped(
    tmp_path: Path, left: int, said: str
) -> None:
    """The pages of the user's files the probe's cold read evicted, read back: said where the pause
    is, with what had no time to be read back; kept in results.json and read back from it."""
    from ioprof.core.counts import ReadBack
    from ioprof.core.results_run import ScriptInfo
    from ioprof.render.run import render_run_markdown

    back = ReadBack(files=200, bytes=7_900_000, left_bytes=left, seconds=0.03)
    stopped = left == 0  # and the fork server ioprof started for the probe stopped, or not
    script = ScriptInfo(
        "python train.py", 0, "finished", 1, 40, 5, 30, None, False, True, 2.5,
        probe_read_back=back, probe_fork_server_stopped=stopped,
    )  # fmt: skip
    r = replace(sweep_result((cell(),)), script=script)
    resultfile.save(r, tmp_path / "results.json")
    loaded = resultfile.load(tmp_path)
    assert (
        isinstance(loaded, SweepResult)
        and loaded.script is not None
        and loaded.script.probe_read_back == back
    )
    line = next(x for x in render_run_markdown(loaded).splitlines() if "measured alone" in x)
    assert "evicted the pages the page cache held of 200 of them" in line and said in line, line
    assert (
        "The fork server ioprof started for its workers was stopped once they were done" in line
    ) is stopped


@pytest.mark.parametrize(
    ("name", "left", "read", "said"),
    [
        ("compare/one", 0, 7_900_000, "7.9 MB were read back in 30 ms, so your training finds the cache as it left it."),
        ("place/fast-and-slow", 2_000_000, 7_900_000, "and 2.0 MB were not (the read-back stops after as long as the "
         "measurements took, and an interrupted run reads none back): your training reads those from storage again."),
        ("whatif/compute-bound", 7_900_000, 0, "none of their 7.9 MB were read back (the read-back stops after as long as the measurements"),
    ],
)  # fmt: skip
def test_a_command_says_what_its_cold_reads_evicted_of_your_cache_and_read_back(
    tmp_path: Path, name: str, left: int, read: int, said: str
) -> None:
    """A sweep's, a placement's and a what-if's report: what their cold reads of the user's files
    evicted while the page cache held them, what was read back and what was not (the time allowed
    ran out, or the run was interrupted); kept in results.json and read back from it."""
    from replay import replay

    from ioprof.core.counts import ReadBack

    result, _ = replay(name)
    back = ReadBack(files=200, bytes=read, left_bytes=left, seconds=0.03)
    result = replace(result, run=replace(result.run, read_back=back))
    resultfile.save(result, tmp_path / "results.json")
    assert resultfile.load(tmp_path).run.read_back == back
    write_report(result, tmp_path)
    report = (tmp_path / "report.md").read_text()
    (line,) = [x for x in report.splitlines() if x.startswith("- Page cache: ")]
    assert "Reading your files cold evicted the pages the page cache held of 200 of them; " in line, line
    assert said in line, line
    write_report(replace(result, run=replace(result.run, read_back=None)), tmp_path)
    assert "- Page cache: " not in (tmp_path / "report.md").read_text()


def test_the_wait_for_the_batch_takes_the_interval_of_its_cells_data_wait(tmp_path: Path) -> None:
    """The loop's wait per batch in the look inside the loader: on the host's clock, said with the
    interval of its cell's data wait (``rates.wait_per_batch``), not with the waits' own batch means;
    on CUDA, where the cell's waits are the GPU's stalls and not the loop's, as it was measured."""
    from replay import replay

    from ioprof.core.rates import wait_per_batch
    from ioprof.render.inside import _cell, _ms_range

    (c,) = [c for c in replay("compare/one")[0].cells if c.inside is not None and c.workers]
    w = wait_per_batch(c.wait_share(), c.step_s)
    (line,) = [x for x in _cell(c) if x.startswith("In the training process, per batch:")]
    assert (
        f"wait for the batch {w.value * 1e3:,.2f} ms {_ms_range(w.low, w.high)} (its interval the data wait's)"
        in line
    )
    (gpu,) = [c for c in replay("gpu-imagenet/one-epoch")[0].cells if c.inside is not None and c.workers]
    (line,) = [x for x in _cell(gpu) if x.startswith("In the training process, per batch:")]
    assert "wait for the batch" in line and "the data wait's" not in line


def test_a_run_too_short_for_a_window_is_told_the_change_that_gives_one() -> None:
    """Where the warm-up alone stands between a pass and a window, leaving it out is the fix; where
    a pass is shorter than a window needs even without it, only a longer run is, and its length."""
    from ioprof.core.findings import TrainingNotMeasured
    from ioprof.render.findings import finding

    near = finding(TrainingNotMeasured((("loader 1", "training", 8, 11),), warmup_steps=5))
    assert "run with --warmup-steps 0 (a window then needs 6)" in near, near
    short = finding(
        TrainingNotMeasured((("loader 1", "training", 2, 11), ("loader 2", "evaluation", 1, 11)), 5)
    )
    assert "--warmup-steps 0 (a window" not in short and "a pass of 6 batches or more" in short, short
