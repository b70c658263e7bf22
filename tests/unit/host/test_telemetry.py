"""NVML sampling logic on recorded sequences, and the unavailable sampler's reason."""

from __future__ import annotations

import time

from ioprof.host.telemetry import GpuSample, ThreadSampler, UnavailableSampler, nvml_status, open_gpu_sampler

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
        return GpuSample(t, u, u / 2, 1e9, 1980.0, 350.0)

    return read


class _Buffer:
    """A driver buffer holding one old sample and one new one per read after ``start``."""

    def __init__(self) -> None:
        self.started = False

    def start(self) -> None:
        self.started = True

    def read(self) -> list[tuple[float, float]]:
        now = time.time()
        return [(now, 50.0)] if self.started else [(now - 20, 99.0), (now, 50.0)]


def test_sampler_keeps_the_recorded_sequence() -> None:
    s = ThreadSampler(_recorded_reader(), "Fake GPU", driver=_Buffer())
    s.start()
    s.stop()
    s = ThreadSampler(_recorded_reader(), "Fake GPU", driver=_Buffer())
    s._driver_buffer.start()  # type: ignore[union-attr]
    for _ in RECORDED:
        assert s.sample_once()
    t = s.stop()
    assert t.available and not t.partial and t.reason == ""
    assert t.gpu_util_pct == tuple(u for _, u in RECORDED)
    assert t.t_s == tuple(x for x, _ in RECORDED)
    assert t.driver_util_pct == (50.0,)  # the driver's buffer: read once in the first second
    assert t.device_name == "Fake GPU" and t.power_w[0] == 350.0


def test_the_driver_buffer_is_read_once_a_second_and_at_the_end() -> None:
    """Its read (nvmlDeviceGetSamples) cost 2.6 ms of CPU on an H100 — 40× the other readings: at
    every 0.1 s tick that was 2.5 % of a core. The buffer holds ~16 s of samples, so once a second
    loses none; the window's end drains it."""
    now = [0.0]

    def clock() -> float:
        return now[0]

    s = ThreadSampler(lambda t: GpuSample(t, 50, 0, 0, 0, 0), "Fake", clock=clock, driver=_Buffer())
    s._driver_buffer.start()  # type: ignore[union-attr]
    for _ in range(25):  # 2.5 s of 0.1 s ticks: reads at 0, 1.0 and 2.0 s
        assert s.sample_once()
        now[0] += 0.1
    assert len(s._driver) == 3 and len(s._samples) == 25
    assert s.sample_once(reading=False) and len(s._driver) == 4 and len(s._samples) == 25


def test_failure_mid_run_marks_telemetry_partial() -> None:
    s = ThreadSampler(_recorded_reader(fail_after=3), "Fake GPU")
    assert [s.sample_once() for _ in range(4)] == [True, True, True, False]
    t = s.stop()
    assert t.available and t.partial
    assert "GPU_IS_LOST" in t.reason and len(t.gpu_util_pct) == 3


def test_thread_samples_in_background() -> None:
    s = ThreadSampler(lambda t: GpuSample(t, 50, 0, 0, 0, 0), "Fake", interval_s=0.01)
    s.start()
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


def test_sampler_measures_its_own_cpu_cost() -> None:
    """Each read here burns 5 ms of CPU every 0.1 s: the sampler must report about 5 % of a core
    (its thread's own CPU time), not 0 — the real NVML reader's cost is measured the same way, on a GPU."""
    import time

    def busy_read(t_s: float) -> GpuSample:
        end = time.thread_time() + 0.005
        while time.thread_time() < end:
            pass
        return GpuSample(t_s, 50, 0, 0, 0, 0)

    s = ThreadSampler(busy_read, "Fake")  # default interval, 0.1 s
    s.start()
    time.sleep(1.0)
    t = s.stop()
    assert t.sampled_s >= 0.95
    assert 0.03 <= t.sampler_core_share <= 0.08


def test_the_driver_buffer_yields_only_samples_from_inside_the_window() -> None:
    from ioprof.host.telemetry import new_samples

    buffered = [(1_000, 97.0), (2_000, 12.0), (3_000, 88.0), (4_000, 5.0)]
    assert new_samples(buffered, 2_500) == ([(0.003, 88.0), (0.004, 5.0)], 4_000)  # opened at 2,500 µs
    assert new_samples(buffered, 4_000) == ([], 4_000)
    s = ThreadSampler(_recorded_reader(), "Fake GPU", driver=_Buffer())
    s.start()  # the window opens: the buffer is read from now on
    s._stop.set()
    t = s.stop()
    assert 99.0 not in t.driver_util_pct


def test_nvml_for_the_cpu_device_names_no_gpu_and_says_why() -> None:
    import torch

    from ioprof.host.telemetry import nvml_for_device

    name, status = nvml_for_device(torch.device("cpu"))
    assert name is None and status.handle is None and status.reason


def test_readings_keep_the_interval_however_long_a_reading_takes() -> None:
    """A reading that holds the thread 40 ms (as some NVML queries do) must not stretch a 0.1 s
    interval to 0.14 s: the samples' times are the figures' time axis and their count its weight."""
    import time

    def slow_read(t_s: float) -> GpuSample:
        time.sleep(0.04)
        return GpuSample(t_s, 50, 0, 0, 0, 0)

    s = ThreadSampler(slow_read, "Fake")  # default interval, 0.1 s
    s.start()
    time.sleep(1.05)
    t = s.stop()
    gaps = [b - a for a, b in zip(t.t_s[:-1], t.t_s[1:], strict=True)]
    assert len(gaps) >= 8 and sum(gaps) / len(gaps) < 0.115


def test_only_the_samples_within_a_windows_stretches_are_kept() -> None:
    """A window with a pause in it (evaluation, a checkpoint) and a script that runs on after it:
    the readings and the driver's samples taken meanwhile are no part of the window."""
    from ioprof.core.gpu import GpuTelemetry

    t = GpuTelemetry(
        True,
        "",
        t_s=(0.0, 0.1, 0.2, 0.3, 0.4, 0.5),
        gpu_util_pct=(90.0, 91.0, 0.0, 0.0, 92.0, 0.0),
        mem_util_pct=(1.0,) * 6,
        mem_used_bytes=(1.0,) * 6,
        sm_clock_mhz=(1.0,) * 6,
        power_w=(10.0, 11.0, 12.0, 13.0, 14.0, 15.0),
        driver_util_pct=(88.0, 0.0, 89.0, 0.0),
        driver_t_s=(0.05, 0.25, 0.45, 0.55),
    )
    kept = t.within([(0.0, 0.15), (0.35, 0.45)])
    assert kept.t_s == (0.0, 0.1, 0.4) and kept.gpu_util_pct == (90.0, 91.0, 92.0)
    assert kept.power_w == (10.0, 11.0, 14.0)
    assert kept.driver_util_pct == (88.0, 89.0) and kept.driver_t_s == (0.05, 0.45)
    none = t.within([(0.6, 0.7)])
    assert not none.available and "no NVML reading fell within" in none.reason
