from __future__ import annotations

import math

import pytest
from builders import cell, compute, dataset_info, decode, storage, sweep_result

from ioprof.analysis import (
    HIGHLY_INPUT_BOUND_SHARE,
    MODERATELY_INPUT_BOUND_SHARE,
    advise,
    analyze,
    cell_verdict,
    classify_input_bound,
    data_wait_share,
    predict,
    stage_rates,
)
from ioprof.results import DatasetCeilings


def test_data_wait_share_on_hand_built_numbers() -> None:
    assert data_wait_share([0.1, 0.3], [0.9, 0.7]) == pytest.approx(0.2)
    assert data_wait_share([], []) == 0.0
    assert data_wait_share([0.0, 0.0], [1.0, 1.0]) == 0.0


@pytest.mark.parametrize(
    "share, klass",
    [
        (0.0, "not"),
        (0.0499, "not"),
        (0.05, "moderately"),
        (0.1999, "moderately"),
        (0.20, "highly"),
        (0.9, "highly"),
    ],
)
def test_input_bound_classes_at_their_thresholds(share: float, klass: str) -> None:
    assert classify_input_bound(share) == klass


def test_thresholds_are_tensorflows() -> None:
    assert (HIGHLY_INPUT_BOUND_SHARE, MODERATELY_INPUT_BOUND_SHARE) == (0.20, 0.05)


def test_multiprocess_prediction_is_the_slowest_stage() -> None:
    assert predict("multiprocess", {"compute": 1000.0, "decode": 400.0, "storage": 900.0}) == (
        400.0,
        "decode",
    )


def test_serial_prediction_adds_stage_times() -> None:
    rate, by = predict("serial", {"compute": 100.0, "decode": 100.0})
    assert rate == pytest.approx(50.0)
    assert by == "compute+decode in series"


def test_storage_counts_only_for_bytes_fetched_from_storage() -> None:
    c = cell(read_bytes=250_000, read_chars=1_000_000)  # 75 % page-cache hits
    rates = stage_rates(
        c, compute(1000.0), [decode("multiprocess", 4, 900.0)], [storage(4, 100.0)], [], False
    )
    assert rates["storage"] == pytest.approx(400.0)  # 100 img/s of misses feed 400 img/s
    all_hits = cell(read_bytes=0, read_chars=1_000_000)
    rates = stage_rates(all_hits, compute(1000.0), [], [storage(4, 100.0)], [], False)
    assert math.isinf(rates["storage"])


def test_verdict_storage_when_storage_is_the_lowest_input_ceiling() -> None:
    c = cell(wait=0.05, step=0.05)  # 50 % wait, 80 img/s
    v = cell_verdict(c, {"compute": 1000.0, "decode": 900.0, "storage": 80.0})
    assert (v.bottleneck, v.input_bound) == ("storage", "highly")
    assert v.predicted_img_per_s == 80.0 and v.predicted_by == "storage"
    assert v.residual == pytest.approx(0.0)
    assert not v.residual_unexplained
    assert "storage ceiling 80.0 img/s" in v.evidence


def test_verdict_decode_and_compute() -> None:
    v = cell_verdict(cell(wait=0.01, step=0.09), {"compute": 100.0, "decode": 80.0, "storage": 5000.0})
    assert (v.bottleneck, v.input_bound) == ("decode", "moderately")
    v = cell_verdict(cell(wait=0.001, step=0.1), {"compute": 80.0, "decode": 900.0, "storage": 5000.0})
    assert (v.bottleneck, v.input_bound) == ("compute", "not")


def test_unexplained_residual_is_flagged() -> None:
    v = cell_verdict(cell(wait=0.0, step=0.1), {"compute": 200.0, "decode": 900.0})  # measured 80 vs 200
    assert v.residual == pytest.approx(-0.6)
    assert v.residual_unexplained


def test_advice_reads_workers_off_the_curve() -> None:
    ceilings = DatasetCeilings(
        "500x375",
        decode=(
            decode("multiprocess", 1, 250.0),
            decode("multiprocess", 4, 900.0),
            decode("multiprocess", 8, 1700.0),
        ),
        storage=(storage(8, 5000.0),),
    )
    a = advise(dataset_info(mean_bytes=100_000.0), [], compute(800.0), ceilings, cores_usable=8)
    assert a.workers_needed == 4
    assert a.workers_estimated == pytest.approx(3.2)
    assert a.storage_mb_per_s_needed == pytest.approx(80.0)
    assert a.storage_suffices is True


def test_advice_says_when_cores_cannot_get_there() -> None:
    ceilings = DatasetCeilings(
        "500x375", decode=(decode("multiprocess", 1, 300.0), decode("multiprocess", 2, 550.0)), storage=()
    )
    a = advise(dataset_info(), [], compute(2800.0), ceilings, cores_usable=2)
    assert a.workers_needed is None
    assert not a.cores_suffice
    assert a.decode_shortfall == pytest.approx(550.0 / 2800.0)
    assert any("decode_jpeg" in t for t in a.text)


def test_analyze_whole_run() -> None:
    cells = (
        cell("serial", 0, wait=0.03, step=0.01),  # 75 % wait
        cell("multiprocess", 1, wait=0.02, step=0.01),
        cell("multiprocess", 4, wait=0.0, step=0.01),  # 800 img/s, not input-bound
    )
    r = analyze(sweep_result(cells, compute_rate=1000.0))
    assert r.analysis is not None
    serial, _one, four = r.cells
    assert serial.verdict and serial.verdict.bottleneck == "decode" and serial.verdict.input_bound == "highly"
    assert four.verdict and four.verdict.bottleneck == "compute"
    assert r.analysis.overall_bottleneck == "compute"
    assert any("4.00× the serial loader" in line for line in r.analysis.headline)
    assert r.analysis.advice[0].serial_suffices is False


def test_many_unexplained_cells_are_summarized_with_a_computed_hint() -> None:
    # worker counts without decode or storage ceilings: the compute ceiling alone predicts them
    cells = tuple(cell("multiprocess", w, wait=0.0, step=0.01) for w in (2, 3, 5, 6))  # 800 img/s each
    r = analyze(sweep_result(cells, compute_rate=300.0))  # a compute ceiling measured far too low
    assert r.analysis is not None
    off = [w for w in r.analysis.warnings if "differ from their prediction" in w]
    assert len(off) == 1
    assert off[0].startswith(
        "4 of 4 cells differ from their prediction beyond the measurement's spread (+167% to +167%)"
    )
    assert "was the machine busy while it was measured?" in off[0]


def test_few_unexplained_cells_are_listed() -> None:
    r = analyze(sweep_result((cell("multiprocess", 4, wait=0.0, step=0.01),), compute_rate=300.0))
    assert r.analysis is not None
    assert any(
        w.startswith("500x375 4 workers: measured 800.0 img/s vs predicted 300.0 (+167%)")
        for w in r.analysis.warnings
    )


@pytest.mark.parametrize(
    "name, preset",
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A100-PCIE-40GB", None),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA GeForce RTX 4090", None),
        (None, None),
    ],
)
def test_gpu_names_match_only_the_parts_a_figure_was_published_for(
    name: str | None, preset: str | None
) -> None:
    from ioprof.presets import published_preset

    p = published_preset(name)
    assert (p.name if p else None) == preset


def test_compute_ceiling_is_held_against_the_published_figure() -> None:
    from builders import cuda_result

    cells = (cell("multiprocess", 8, wait=0.0, step=0.1),)
    tuned = analyze(cuda_result(cells, 2650.0, "NVIDIA H100 80GB HBM3")).analysis
    assert tuned is not None
    assert "2,650 img/s, is 95% of the published ResNet-50 figure for NVIDIA H100 80GB HBM3 (2,800" in (
        tuned.compute_reference
    )
    assert not any("published" in w for w in tuned.warnings)

    slow = analyze(cuda_result(cells, 1400.0, "NVIDIA H100 80GB HBM3")).analysis
    assert slow is not None
    assert any("is 50% of the published" in w and "Below 90%" in w for w in slow.warnings)

    fp32 = analyze(cuda_result(cells, 900.0, "NVIDIA H100 80GB HBM3", precision="fp32")).analysis
    assert fp32 is not None and "not compared" in fp32.compute_reference
    assert not any("published" in w for w in fp32.warnings)

    other = analyze(cuda_result(cells, 900.0, "NVIDIA GeForce RTX 4090")).analysis
    assert other is not None and other.compute_reference.startswith("No published ResNet-50 figure")

    cpu = analyze(sweep_result(cells)).analysis
    assert cpu is not None and cpu.compute_reference == ""
