from __future__ import annotations

import pytest

from ioprof.telemetry import GpuSample, ThreadSampler, UnavailableSampler, nvml_status, open_gpu_sampler

RECORDED = [  # utilization as an input-starved GPU shows it: bursts of work between waits
    (0.0, 95.0),
    (0.1, 97.0),
    (0.2, 12.0),
    (0.3, 0.0),
    (0.4, 88.0),
    (0.5, 99.0),
    (0.6, 5.0),
    (0.7, 91.0),
]


def _recorded_reader(fail_after: int | None = None):  # type: ignore[no-untyped-def]
    it = iter(RECORDED)

    def read(t_s: float) -> GpuSample:
        nonlocal fail_after
        if fail_after is not None:
            if fail_after == 0:
                raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
            fail_after -= 1
        t, u = next(it)
        return GpuSample(t, u, u / 2, 1e9, 1980.0, 350.0, 1000.0, 10.0)

    return read


def test_sampler_keeps_the_recorded_sequence() -> None:
    s = ThreadSampler(_recorded_reader(), "Fake GPU", driver_samples=lambda: [50.0])
    for _ in RECORDED:
        assert s.sample_once()
    t = s.stop()
    assert t.available and not t.partial and t.reason == ""
    assert t.gpu_util_pct == tuple(u for _, u in RECORDED)
    assert t.t_s == tuple(x for x, _ in RECORDED)
    assert t.driver_util_pct == (50.0,) * len(RECORDED)
    assert t.device_name == "Fake GPU" and t.power_w[0] == 350.0


def test_failure_mid_run_marks_telemetry_partial() -> None:
    s = ThreadSampler(_recorded_reader(fail_after=3), "Fake GPU")
    assert [s.sample_once() for _ in range(4)] == [True, True, True, False]
    t = s.stop()
    assert t.available and t.partial
    assert "GPU_IS_LOST" in t.reason and len(t.gpu_util_pct) == 3


def test_thread_samples_in_background() -> None:
    s = ThreadSampler(lambda t: GpuSample(t, 50, 0, 0, 0, 0, 0, 0), "Fake", interval_s=0.01)
    s.start()
    import time

    time.sleep(0.15)
    t = s.stop()
    assert len(t.gpu_util_pct) >= 5


def test_unavailable_sampler_carries_its_reason() -> None:
    t = UnavailableSampler("no NVIDIA driver").stop()
    assert not t.available and t.reason == "no NVIDIA driver"


def test_nvml_status_says_why_in_words() -> None:
    status = nvml_status(None)
    assert status.reason  # no GPU handle asked for: there is always a reason
    sampler = open_gpu_sampler(status)
    assert isinstance(sampler, UnavailableSampler)
    assert sampler.stop().reason == status.reason


@pytest.mark.gpu
def test_nvml_samples_the_cuda_device() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from ioprof.telemetry import nvml_for_device

    name, status = nvml_for_device(torch.device("cuda:0"))
    assert status.reason == "", status.reason
    assert name == torch.cuda.get_device_name(0)
    s = open_gpu_sampler(status, interval_s=0.02)
    s.start()
    x = torch.randn(4096, 4096, device="cuda")
    for _ in range(50):
        x = x @ x / 4096
    torch.cuda.synchronize()
    t = s.stop()
    assert t.available and len(t.gpu_util_pct) > 3


def test_sampler_measures_its_own_cost_under_one_percent_of_a_core() -> None:
    import time

    s = ThreadSampler(lambda t: GpuSample(t, 50, 0, 0, 0, 0, 0, 0), "Fake")  # default interval
    s.start()
    time.sleep(0.6)
    t = s.stop()
    assert t.sampled_s >= 0.55
    assert 0 <= t.sampler_core_share < 0.01


def test_nvml_for_the_cpu_device_names_no_gpu_and_says_why() -> None:
    import torch

    from ioprof.telemetry import nvml_for_device

    name, status = nvml_for_device(torch.device("cpu"))
    assert name is None and status.handle is None and status.reason
