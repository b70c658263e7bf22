"""What a look inside the loader concludes, on hand-built results: the costliest stage in the
verdict, workers that fit in RAM and /dev/shm, memory that grows, threads beyond the cores."""

from __future__ import annotations

from dataclasses import replace

import builders
import pytest

from ioprof.conclude import inside
from ioprof.conclude.sweep import conclude
from ioprof.core.findings import CoresOversubscribed, ShmTooSmall, WorkerMemoryGrows, WorkersDoNotFit
from ioprof.core.inside import (
    WAITING_FOR_A_CORE,
    CoreUse,
    LoaderInside,
    LoaderStages,
    StageTime,
    WorkerMemory,
)
from ioprof.core.results_run import ScriptInfo
from ioprof.render import sweep as report
from ioprof.render import words
from ioprof.render.findings import finding

MB = 1_000_000


def memory(**kw: object) -> WorkerMemory:
    base = dict(
        main_uss_bytes=400 * MB,
        main_pss_bytes=500 * MB,
        worker_uss_bytes=100 * MB,
        worker_pss_bytes=200 * MB,
        growth_bytes_per_1000_samples=None,
        growth_low=None,
        growth_high=None,
        readings=10,
        batch_bytes=20 * MB,
        prefetch_factor=2,
        workers=4,
        shm_total_bytes=64 * 2**20,
        shm_free_bytes=64 * 2**20,
        ram_available_bytes=2_000 * MB,
        ram_source="the host's available memory",
        samples_per_epoch=100_000,
    )
    return WorkerMemory(**{**base, **kw})  # type: ignore[arg-type]


def stages(lead: str = "GaussianBlur") -> LoaderStages:
    return LoaderStages(
        worker=(
            StageTime(lead, "worker", 0.007, 0.006, 0.008, 0.7, 0.66, 0.74),
            StageTime("decode", "worker", 0.002, 0.0018, 0.0022, 0.2, 0.18, 0.22),
            StageTime("rest of __getitem__", "worker", 0.001, 0.0009, 0.0011, 0.1, 0.09, 0.11),
        ),
        main=(StageTime("wait for the batch", "main", 0.05, 0.04, 0.06),),
        worker_s_per_sample=0.010,
        worker_low_s=0.009,
        worker_high_s=0.011,
        samples=800,
        batches=100,
        processes=4,
        seen="stages",
        timing_cost_s_per_sample=4e-6,
    )


def cores(busy: int, cpu: float, mask: int = 1) -> CoreUse:
    return CoreUse(mask, 1, 1, True, 4, 1, busy, cpu, 30.0)


def test_workers_that_fit_in_ram_and_in_dev_shm() -> None:
    m = memory()
    # /dev/shm: 64 MiB free before the first batch ÷ (20 MB × prefetch 2) per worker
    assert inside.max_workers_shm(m) == 64 * 2**20 // (40 * MB) == 1
    # RAM: 2,000 MB available + 4 × 100 MB held + 160 MB in flight; each worker 100 MB + 40 MB of batches
    assert inside.max_workers_ram(m) == (2_000 + 400 + 160) // 140
    # growth of 1 MB per sample over an epoch of 100,000 samples split among w workers: 100 GB whatever w
    grows = memory(growth_bytes_per_1000_samples=1_000 * MB, growth_low=900 * MB, growth_high=1_100 * MB)
    assert inside.max_workers_ram(grows) == 0
    # noise (an interval down to zero) is not growth
    noise = memory(growth_bytes_per_1000_samples=1_000 * MB, growth_low=-5 * MB, growth_high=2_000 * MB)
    assert inside.max_workers_ram(noise) == inside.max_workers_ram(m)


def test_cores_shared_are_called_the_limit_only_where_the_loop_waits_for_them() -> None:
    """Oversubscribed cores limit the loop where it is input-bound for certain and waits for its
    workers, not for its storage; a loop whose wait may be under the first class's line (borderline
    not/moderately: an evaluation pass of 16 batches, 3.6-7.6 %) is not said to be held back by
    them, nor to lose nothing by fewer threads (broken once — "borderline" counted as waiting — it
    was told "This is what limits it")."""
    cell = builders.cell(workers=8, wait=0.3, step=0.1, jitter=0.01)
    cell = replace(cell, inside=LoaderInside(stages(), memory(workers=8), cores(busy=6, cpu=0.97)))
    (cell,) = conclude(builders.sweep_result((cell,))).cells
    v = cell.verdict
    assert v is not None
    said = {}
    for name, verdict in (
        ("moderately, decode", replace(v, input_bound="moderately", bottleneck="decode")),
        (
            "borderline moderately/highly",
            replace(v, input_bound="borderline", input_bound_range=("moderately", "highly")),
        ),
        (
            "borderline not/moderately",
            replace(v, input_bound="borderline", input_bound_range=("not", "moderately")),
        ),
        ("highly, storage", replace(v, input_bound="highly", bottleneck="storage")),
        ("not", replace(v, input_bound="not", bottleneck="compute")),
    ):
        (over,) = inside._cores(replace(cell, verdict=verdict))
        said[name] = over.the_limit
        text = finding(over)
        assert ("This is what limits it" in text) == bool(over.the_limit), text
        assert ("not decided" in text) == (over.the_limit is None), text
    assert said == {
        "moderately, decode": True,
        "borderline moderately/highly": True,
        "borderline not/moderately": None,
        "highly, storage": None,
        "not": False,
    }


def test_findings_name_what_would_fail_before_it_does() -> None:
    cell = builders.cell(workers=8, wait=0.3, step=0.1, jitter=0.01)
    grows = memory(
        workers=8,
        growth_bytes_per_1000_samples=20 * MB,
        growth_low=15 * MB,
        growth_high=25 * MB,
        samples_per_epoch=50_000,
        growth_cause="copy-on-read",
    )
    cell = replace(cell, inside=LoaderInside(stages(), grows, cores(busy=6, cpu=0.97)))
    r = conclude(builders.sweep_result((cell,)))
    found = {type(f): f for f in r.analysis.findings}
    over = found[CoresOversubscribed]
    assert isinstance(over, CoresOversubscribed) and over.the_limit and over.threads_busy == 6
    grow = found[WorkerMemoryGrows]
    assert isinstance(grow, WorkerMemoryGrows) and grow.epoch_cost_bytes == pytest.approx(20 * 50 * MB)
    fit = found[WorkersDoNotFit]
    assert isinstance(fit, WorkersDoNotFit) and fit.max_workers_shm == 1 and fit.workers == 8
    text = " ".join(finding(f) for f in r.analysis.findings)
    assert "oversubscribed — 6 threads ran" in text and "This is what limits it" in text
    assert "at most 1 worker fit" in text and "--shm-size" in text and "copy-on-read" in text


def test_within_the_cores_and_memory_nothing_is_said() -> None:
    cell = replace(
        builders.cell(workers=2),
        inside=LoaderInside(stages(), memory(workers=2, shm_free_bytes=2**30), cores(2, 1.5, mask=2)),
    )
    r = conclude(builders.sweep_result((cell,)))
    kinds = {f.kind for f in r.analysis.findings}
    assert not kinds & {"cores-oversubscribed", "workers-do-not-fit", "worker-memory-grows"}


def test_a_decode_verdict_points_to_the_costliest_stage() -> None:
    slow = replace(builders.cell(workers=4, wait=0.3, step=0.1, jitter=0.01), inside=LoaderInside(stages()))
    r = conclude(builders.sweep_result((slow,), compute_rate=1000.0))
    line = words.verdict_line(r.analysis)
    assert r.analysis.overall_bottleneck == "decode"
    assert (
        "Costliest stage in the loader: **GaussianBlur**, 70 % [66–74] of the workers' time per sample (see"
        in line
    )
    v = r.analysis.datasets[0]
    assert v.leading_stage == "GaussianBlur" and v.leading_share == pytest.approx(0.7)
    md = report.render_markdown(r)
    assert "## Inside the loader" in md and "| GaussianBlur | 7.00 [6.00–8.00] | 70 % [66–74] |" in md


def test_a_leading_stage_on_a_busy_host_says_how_much_of_the_time_was_the_wait_for_a_core() -> None:
    """On 2 cores with 8 workers, decode led at 9 % of the workers' time: 74 % was their wait for a
    core, no stage's own work. The share alone read as if decode mattered little."""
    waited = StageTime(WAITING_FOR_A_CORE, "worker", 0.030, 0.028, 0.032, 0.75, 0.74, 0.76)
    s = stages()
    s = replace(
        s,
        worker=(waited, *(replace(t, share=(t.share or 0) / 4) for t in s.worker)),
        worker_s_per_sample=0.04,
    )
    slow = replace(builders.cell(workers=4, wait=0.3, step=0.1, jitter=0.01), inside=LoaderInside(s))
    r = conclude(builders.sweep_result((slow,), compute_rate=1000.0))
    v = r.analysis.datasets[0]
    assert v.leading_stage == "GaussianBlur" and v.waited_for_core_share == pytest.approx(0.75)
    assert (
        "time per sample (75 % of it they waited for a core; see *Inside the loader*)"
        in words.verdict_line(r.analysis)
    )


def test_rest_of_getitem_leads_only_when_nothing_else_was_timed() -> None:
    s = replace(
        stages(),
        worker=(
            StageTime("rest of __getitem__", "worker", 0.009, 0.008, 0.01, 0.9, 0.8, 1.0),
            *stages().worker[:1],
        ),
    )
    assert s.leading().name == "GaussianBlur"  # type: ignore[union-attr]


def test_a_run_that_ran_out_of_dev_shm_says_so_in_one_line() -> None:
    r = builders.sweep_result((builders.cell(),))
    script = ScriptInfo(
        "python train.py",
        1,
        "failed",
        1,
        0,
        5,
        100,
        60.0,
        False,
        False,
        0.0,
        shm_failure="a DataLoader worker ran out of shared memory: x",
    )
    found = inside.findings(replace(r, script=script), ())
    assert found == (ShmTooSmall("a DataLoader worker ran out of shared memory: x", failed=True),)
    assert finding(found[0]).startswith(
        "Your script failed because a DataLoader worker ran out of shared memory"
    )


def test_a_growth_whose_interval_reaches_into_the_noise_is_not_a_finding() -> None:
    """The ImageNet-like script on local disk (2 workers, 120 samples after the warm-up): 5.2 MB per
    1,000 samples [0.18-10.2] — 0.6 MB over the window, an interval down into the allocator's noise.
    The measurement's own checks (8 MB over the window, going on) apply only above that floor; the
    conclusion and the report must hold the same line: no finding, "no growth beyond the noise"."""
    from ioprof.render.inside import memory_line

    noisy = memory(
        workers=2, growth_bytes_per_1000_samples=5.2 * MB, growth_low=0.18 * MB, growth_high=10.2 * MB
    )
    cell = replace(builders.cell(workers=2), inside=LoaderInside(stages(), noisy, cores(2, 1.5, mask=2)))
    r = conclude(builders.sweep_result((cell,)))
    assert "worker-memory-grows" not in {f.kind for f in r.analysis.findings}
    assert "no growth beyond the noise (5.2 MB per 1,000 samples" in memory_line(noisy)


def test_a_serial_loaders_stages_are_said_to_run_in_the_training_process() -> None:
    """num_workers=0 has no workers: its stages ran in the training process, and the table says so."""
    from ioprof.render.inside import stages_table

    serial = "\n".join(stages_table(stages("RandomResizedCrop"), in_workers=False))
    assert "| stage (in the training process) |" in serial and "The training process took 10.00 ms" in serial
    assert "worker" not in serial.replace("wait for the batch", "")
    pooled = "\n".join(stages_table(stages("RandomResizedCrop")))
    assert "| stage (in the workers) |" in pooled and "measured in each worker" in pooled


def test_workers_forked_each_epoch_have_a_peak_not_a_growth_finding() -> None:
    """The PyTorch examples' ImageNet script and a zip dataset on sshfs fork their workers again
    every epoch: a worker that lives one epoch cannot carry anything into the next. What it grows
    by inside its life is its peak, said in the memory line and weighed against the RAM there is."""
    from ioprof.render.inside import memory_line

    grows = dict(
        growth_bytes_per_1000_samples=80 * MB,
        growth_low=47 * MB,
        growth_high=115 * MB,
        shm_free_bytes=2**30,
        shm_total_bytes=2**31,
    )
    once = memory(workers=2, samples_per_epoch=400, **grows)  # 200 samples a worker: 16 MB more each
    cell = replace(builders.cell(workers=2), inside=LoaderInside(stages(), once, cores(2, 1.5, mask=2)))
    r = conclude(builders.sweep_result((cell,)))
    assert not {"worker-memory-grows", "workers-do-not-fit"} & {f.kind for f in r.analysis.findings}
    assert inside.worker_peak_bytes(once, 2) == pytest.approx(100 * MB + 200 * 80_000)
    assert "each worker reaches about 116.0 MB at its epoch's end (200 samples), then exits" in memory_line(
        once
    )
    # workers that live on are judged from epoch to epoch: a slope inside one window is not enough
    one_epoch = replace(once, persistent_workers=True, epochs_seen=1)
    r = conclude(
        builders.sweep_result(
            (replace(cell, inside=LoaderInside(stages(), one_epoch, cores(2, 1.5, mask=2))),)
        )
    )
    assert "worker-memory-grows" not in {f.kind for f in r.analysis.findings}
    assert (
        "needs two epochs of the same workers (their readings after their warm-up covered 1 epoch)"
        in memory_line(one_epoch)
    )
    # and what they hold more at the same point of each epoch is said, with the epochs RAM lasts
    kept = replace(
        one_epoch, epochs_seen=3, epoch_growth_bytes=16e6, epoch_growth_low=12e6, epoch_growth_high=20e6
    )
    r = conclude(
        builders.sweep_result((replace(cell, inside=LoaderInside(stages(), kept, cores(2, 1.5, mask=2))),))
    )
    (said,) = [f for f in r.analysis.findings if isinstance(f, WorkerMemoryGrows)]
    assert said.epochs_until_full == pytest.approx(2_000 * MB / (16e6 * 2))
    assert "16.0 MB [12.0 MB–20.0 MB] more at the same point of each epoch" in finding(said)
    assert "reaches about" not in memory_line(kept)
    # a loader that will not run out gets no warning: RAM that lasts beyond the longest training
    # even at the growth's low end (12 MB × 2 workers an epoch in 20 GB: 833 epochs); the look
    # inside still says what they keep, and for how long the RAM lasts at that rate
    plenty = replace(kept, ram_available_bytes=20_000 * MB)
    r = conclude(
        builders.sweep_result((replace(cell, inside=LoaderInside(stages(), plenty, cores(2, 1.5, mask=2))),))
    )
    assert "worker-memory-grows" not in {f.kind for f in r.analysis.findings}
    assert (
        "16.0 MB [12.0 MB–20.0 MB] more each (3 epochs); at that rate the 20.00 GB of RAM available last "
        "about 625 epochs" in memory_line(plenty)
    )
    # and a peak that would not fit in RAM is said, forked each epoch or not
    big = memory(workers=2, samples_per_epoch=100_000, **grows)  # 50,000 samples a worker: 4 GB each
    r = conclude(
        builders.sweep_result((replace(cell, inside=LoaderInside(stages(), big, cores(2, 1.5, mask=2))),))
    )
    assert {f.kind for f in r.analysis.findings} & {"worker-memory-grows", "workers-do-not-fit"} == {
        "workers-do-not-fit"
    }


def test_a_kept_worker_may_touch_the_whole_dataset_a_forked_one_its_share_of_a_pass() -> None:
    """On one of two ranks a pass is half the dataset: a worker forked each epoch touches its
    share of that half; a worker kept across epochs, reshuffled each, all of the dataset."""
    grows = dict(growth_bytes_per_1000_samples=80 * MB, growth_low=47 * MB, growth_high=115 * MB)
    rank = memory(workers=2, samples_per_epoch=400, dataset_samples=800, **grows)
    assert inside.worker_peak_bytes(rank, 2) == pytest.approx(100 * MB + 200 * 80_000)
    kept = replace(rank, persistent_workers=True)
    assert inside.worker_peak_bytes(kept, 2) == pytest.approx(100 * MB + 800 * 80_000)
    # results written before the dataset's samples were kept: the pass stands for it
    assert inside.worker_peak_bytes(replace(kept, dataset_samples=None), 2) == pytest.approx(
        100 * MB + 400 * 80_000
    )


def test_the_storages_headroom_is_what_bounds_a_slow_samples_wait() -> None:
    """What a storage at its ceiling would have saved the loop: nothing where the cell fetched at
    the ceiling measured at its readers, half where it fetched at half of it; unknown without a
    ceiling; unbounded where the loader was seen reading from no storage at all, or drew no byte
    from it."""
    from ioprof.core.counts import NO_SOURCE_FOUND, Fetched
    from ioprof.core.results import DatasetCeilings

    c = builders.cell(workers=4, wait=0.2, step=0.1, read_bytes=3_000_000)  # 3 MB over 3 s: 1 MB/s
    mb_s = c.fetched_mb_per_s()
    assert mb_s == pytest.approx(1.0)
    at = builders.storage(4, img_per_s=10.0)  # 100 kB files: 1 MB/s at 4 readers
    twice = builders.storage(4, img_per_s=20.0)
    elsewhere = builders.storage(1, img_per_s=10.0)  # measured at another number of readers
    ceilings = [DatasetCeilings(c.dataset, (), (s,)) for s in (at, twice, elsewhere)]
    assert inside.storage_headroom(c, ceilings[0]) == pytest.approx(0.0)
    assert inside.storage_headroom(c, ceilings[1]) == pytest.approx(0.5)
    assert inside.storage_headroom(c, ceilings[2]) is None and inside.storage_headroom(c, None) is None
    nothing = replace(c, fetched=Fetched(None, "unknown", NO_SOURCE_FOUND))
    assert inside.storage_headroom(nothing, None) == float("inf")
    assert inside.storage_headroom(replace(c, fetched=Fetched(0, "block-io")), None) == float("inf")
    assert inside.storage_headroom(replace(c, fetched=Fetched(None, "unknown", "elsewhere")), None) is None
