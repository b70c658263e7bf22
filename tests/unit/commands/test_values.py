"""Option values, parsed and checked while the command line is parsed, and the configs they make."""

from __future__ import annotations

import pytest

from ioprof.cli import main
from ioprof.commands.values import (
    parse_compute,
    parse_positive_int_list,
    parse_resolutions,
    parse_storage_profile,
)
from ioprof.core.config import (
    CPU_RUN_LENGTH,
    CPU_SIM_RUN_LENGTH,
    CUDA_RUN_LENGTH,
    LoaderSetting,
    PlaceConfig,
    SweepConfig,
)
from ioprof.core.presets import GPU_PRESETS, STORAGE_PROFILES


def test_worker_lists() -> None:
    assert parse_positive_int_list("1,4,8") == (1, 4, 8)
    assert parse_positive_int_list(" 2 , 3 ") == (2, 3)
    for bad in ("a,b", "", "1,,4", "-1", "0", "1,1", "1.5"):
        with pytest.raises(ValueError):
            parse_positive_int_list(bad)


def test_compute_spec() -> None:
    assert parse_compute("real").kind == "real"
    sim = parse_compute("sim:1500")
    assert (sim.kind, sim.sim_img_per_s, sim.preset) == ("sim", 1500.0, None)
    h100 = parse_compute("sim:H100")
    assert h100.sim_img_per_s == GPU_PRESETS["h100"].img_per_s and h100.source
    for bad in ("sim:", "sim:-3", "sim:0", "sim:tpu", "gpu", "sim:inf"):
        with pytest.raises(ValueError):
            parse_compute(bad)


def test_presets_ioprof_measured_take_its_step_with_the_published_figure_beside() -> None:
    """sim:h100 and sim:h200 simulate what ioprof's own step measured on the real devices (bf16,
    channels-last, batch 256), not the published 2,800 img/s; the published figure stays beside."""
    h100, h200, a100 = GPU_PRESETS["h100"], GPU_PRESETS["h200"], GPU_PRESETS["a100"]
    assert (h100.kind, h100.img_per_s, h100.published_img_per_s) == ("measured", 3972.0, 2800.0)
    assert (h200.kind, h200.img_per_s) == ("measured", 4703.0)
    assert "bf16, channels-last, batch 256" in h200.source and "2,800 img/s published" in h200.source
    assert (a100.kind, a100.img_per_s) == ("published", a100.published_img_per_s)
    assert parse_compute("sim:h200").sim_img_per_s == 4703.0


def test_presets_have_sources() -> None:
    for name in ("a100", "h100", "h200"):
        assert GPU_PRESETS[name].source and GPU_PRESETS[name].img_per_s > 0
    for name in ("nvme", "sata-ssd", "hdd", "nfs-1g", "nfs-10g", "object-storage"):
        assert STORAGE_PROFILES[name].source and STORAGE_PROFILES[name].read_mb_per_s > 0


def test_storage_profiles() -> None:
    assert parse_storage_profile("HDD").serial_latency
    c = parse_storage_profile("custom:50:2")
    assert (c.read_mb_per_s, c.latency_ms) == (50.0, 2.0)
    for bad in ("floppy", "custom:", "custom:0", "custom:x"):
        with pytest.raises(ValueError):
            parse_storage_profile(bad)


def test_resolutions() -> None:
    assert parse_resolutions("500x375,64X48") == ((500, 375), (64, 48))
    for bad in ("", "500", "500x", "4x4", "1x1,1x1", "500x375,500x375"):
        with pytest.raises(ValueError):
            parse_resolutions(bad)


def test_the_warm_up_leaves_out_the_start_up_burst_every_batch_a_gpu_step_takes_at_once() -> None:
    from ioprof.core.config import run_length_for

    serial, eight = LoaderSetting.serial(), LoaderSetting.multiprocess(8)
    # on the CPU a step outlasts a worker's batch: one ready batch a worker is the burst (1 + 8),
    # rounded up to whole turns of the workers (16), all but the base's one step drained
    assert (CPU_RUN_LENGTH.warmup_for(serial), CPU_RUN_LENGTH.warmup_for(eight)) == (1, 16)
    assert (CPU_RUN_LENGTH.drained_for(serial), CPU_RUN_LENGTH.drained_for(eight)) == (0, 15)
    # a millisecond step (a GPU's, a simulated one) takes every warm-up batch: none drained
    assert CUDA_RUN_LENGTH.drained_for(eight) == 0 == CPU_SIM_RUN_LENGTH.drained_for(eight)
    # a GPU step takes both prefetched rounds as fast as the first: 2 a worker (3 + 16 → 24)
    assert (CUDA_RUN_LENGTH.warmup_for(serial), CUDA_RUN_LENGTH.warmup_for(eight)) == (3, 24)
    assert CUDA_RUN_LENGTH.warmup_for(LoaderSetting.multiprocess(3)) == 9  # 3 + 6, whole turns already
    # and so whatever the user caps or sets
    capped = run_length_for("cuda", parse_compute("real"), seconds=12.0, warmup_steps=0)
    assert capped.warmup_for(eight) == 16


def test_run_length_defaults_by_device() -> None:
    cfg = SweepConfig()
    assert cfg.run_length("cpu") == CPU_RUN_LENGTH
    assert cfg.run_length("cuda") == CUDA_RUN_LENGTH
    assert SweepConfig(compute=parse_compute("sim:h100")).run_length("cpu") == CPU_SIM_RUN_LENGTH
    mine = SweepConfig(batch_size=3, steps=7, warmup_steps=0, seconds=2.5).run_length("cpu")
    assert (
        mine.batch_size,
        mine.min_steps,
        mine.max_steps,
        mine.warmup_steps,
        mine.max_seconds,
        mine.fixed,
    ) == (
        3,
        7,
        7,
        0,
        2.5,
        True,
    )
    # --steps alone: exactly that many steps, no time cap; the default: until the interval or the cap
    assert SweepConfig(steps=4).run_length("cpu").max_seconds is None
    assert not cfg.run_length("cpu").fixed and cfg.run_length("cpu").target_rel_half_width == 0.05


def test_a_loader_setting_has_one_key_and_one_label() -> None:
    assert (LoaderSetting.serial().key, LoaderSetting.serial().label) == ("serial", "serial (in-process)")
    four = LoaderSetting.multiprocess(4)
    assert (four.key, four.label, four.concurrency) == ("4w", "4 workers", 4)
    assert LoaderSetting.multiprocess(1).label == "1 worker"
    for bad in (("serial", 2), ("multiprocess", 0), ("threads", 0), ("fibers", 4)):
        with pytest.raises(ValueError):
            LoaderSetting(*bad)
    assert SweepConfig(loaders=("multiprocess", "serial"), workers=(2, 1)).settings() == (
        LoaderSetting.serial(),
        LoaderSetting.multiprocess(2),
        LoaderSetting.multiprocess(1),
    )


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["sweep", "--workers", "a,b"], "positive integers"),
        (["sweep", "--workers", "-2"], "positive integers"),
        (["sweep", "--workers", ""], "positive integers"),
        (["sweep", "--frobnicate"], "unrecognized arguments"),
        (["sweep", "--compute", "sim:tpu"], "sim:PRESET"),
        (["sweep", "--device", "gpu"], "auto, cpu, cuda"),
        (["sweep", "--steps", "0"], "at least 1"),
        (["sweep", "--data", "x", "--resolutions", "64x48"], "not allowed with"),
        (["frob"], "invalid choice"),
    ],
)
def test_usage_errors_exit_2_with_what_is_allowed(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert needle in capsys.readouterr().err


def test_generated_sets_hold_about_what_a_cell_reads() -> None:
    assert SweepConfig().dataset_images("cpu") == 200  # (1 + 8 + 5 + 2 * 8) * 4 = 120, at least 200
    assert SweepConfig(compute=parse_compute("sim:h100")).dataset_images("cpu") == (0 + 8 + 5 + 16) * 8
    assert SweepConfig().dataset_images("cuda") == 2000  # capped
    assert SweepConfig(images_per_dataset=37).dataset_images("cuda") == 37


def test_auto_tuning_is_a_tuned_trainer_on_cuda_and_fp32_channels_last_on_the_cpu() -> None:
    import torch

    from ioprof.measure.compute import resolve_tuning, tune

    assert resolve_tuning("auto", None, torch.device("cpu")) == ("fp32", True)
    assert resolve_tuning("auto", False, torch.device("cpu")) == ("fp32", False)  # --no-channels-last
    place = tune(PlaceConfig(), torch.device("cpu"))
    assert (place.precision, place.channels_last) == ("fp32", True)
    sweep = tune(SweepConfig(), torch.device("cpu"))
    assert (sweep.precision, sweep.channels_last, sweep.pin_memory, sweep.non_blocking) == (
        "fp32",
        True,
        False,
        False,
    )
    assert resolve_tuning("bf16", True, torch.device("cpu")) == ("bf16", True)
    auto = SweepConfig()
    assert auto.tuned("bf16", True, cuda=True).pin_memory is True
    assert auto.tuned("bf16", True, cuda=True).non_blocking is True
    assert auto.tuned("fp32", False, cuda=False).pin_memory is False
    assert auto.tuned("fp32", False, cuda=False).non_blocking is False
    # what the user said stands
    unpinned = SweepConfig(pin_memory=False).tuned("bf16", True, cuda=True)
    assert (unpinned.pin_memory, unpinned.non_blocking) == (False, False)
    mixed = SweepConfig(pin_memory=True, non_blocking=False).tuned("bf16", True, cuda=True)
    assert (mixed.pin_memory, mixed.non_blocking) == (True, False)
