"""Worker memory growth: when it goes on (a leak, copy-on-read) and when it settles (an allocator's
high-water mark) — from hand-built readings of (samples produced, USS)."""

from __future__ import annotations

import pytest

from ioprof.core.stats import pooled_slope
from ioprof.measure.growth import GrowthFit, goes_on

KB = 1024


def _fits(per_worker: list[list[tuple[float, float]]]) -> list[GrowthFit]:
    return [GrowthFit(points, int(points[-1][0] - points[0][0]), False) for points in per_worker]


def test_a_leak_read_at_few_points_goes_on() -> None:
    """A 14 s window gave each of 2 workers 4 readings after the warm-up: 64 kB kept a sample,
    with 2 MB of the allocator's jitter. The later half's interval (one degree of freedom) reaches
    below zero, yet its rate is the whole's: it goes on (CI once called it 'not steady')."""
    jitter = [0.0, 2e6, -2e6, 2e6]
    leak = [
        [(x, 300e6 + 64 * KB * x + jitter[i]) for i, x in enumerate((100, 250, 400, 550))],
        [(x, 310e6 + 64 * KB * x - jitter[i]) for i, x in enumerate((120, 270, 420, 570))],
    ]
    fits = _fits(leak)
    growth = pooled_slope([f.points for f in fits])
    later = pooled_slope([f.points[2:] for f in fits])
    assert growth.value == pytest.approx(64 * KB, rel=0.1) and later.low < 0  # the old rule's miss
    assert goes_on(fits, growth)


def test_an_allocator_settling_does_not_go_on() -> None:
    """40 MB written after the warm-up, then flat: the whole window's slope is above the noise,
    but its later half stands still."""
    settle = [
        [(x, 300e6 + min(x, 300) * 133_000 + (x % 7) * 1e4) for x in (100, 200, 300, 400, 500, 600)],
        [(x, 305e6 + min(x, 320) * 133_000 - (x % 5) * 1e4) for x in (110, 210, 310, 410, 510, 610)],
    ]
    fits = _fits(settle)
    growth = pooled_slope([f.points for f in fits])
    assert growth.low * 1000 > 1e6  # the whole would be reported
    assert not goes_on(fits, growth)


def test_a_growth_that_slows_to_a_fifth_is_not_called_steady_from_few_points() -> None:
    """Growth at 100 kB a sample, then at 20 kB — as a heap slows while it settles — read at 4
    points a worker with 2 MB of jitter: the later half's interval is too wide to show the slowing,
    its rate does (below ``GROWTH_LATER_SHARE`` of the whole's)."""
    jitter = [0.0, 2e6, -2e6, 2e6]

    def uss(x: float) -> float:
        return 100 * KB * min(x, 300) + 20 * KB * max(0.0, x - 300)

    slowing = [
        [(x, 300e6 + uss(x) + jitter[i]) for i, x in enumerate((100, 300, 500, 700))],
        [(x, 301e6 + uss(x) - jitter[i]) for i, x in enumerate((120, 320, 520, 720))],
    ]
    fits = _fits(slowing)
    growth = pooled_slope([f.points for f in fits])
    later = pooled_slope([f.points[2:] for f in fits])
    assert later.high > growth.low and growth.low * 1000 > 1e6  # the intervals would not show it
    assert not goes_on(fits, growth)


def test_a_leak_a_little_slower_in_its_later_half_still_goes_on() -> None:
    """Readings of the suite's leaking dataset (2 workers, 64 kB kept a sample): the later half
    grew at 65.9 kB a sample against 66.9 kB over the whole — 1.5 % apart, beyond both tight
    intervals. A leak that keeps its rate within a few percent goes on."""
    leak = [
        [(480, 44.9), (920, 75.1), (1360, 104.8), (1880, 139.7), (2352, 171.3), (2840, 203.4), (3352, 237.4), (3536, 249.1)],
        [(448, 42.9), (856, 70.8), (1256, 98.2), (1736, 130.5), (2176, 159.9), (2624, 189.5), (3096, 221.0), (3264, 231.5)],
    ]  # fmt: skip
    fits = _fits([[(x, mb * 1e6) for x, mb in points] for points in leak])
    growth = pooled_slope([f.points for f in fits])
    later = pooled_slope([f.points[4:] for f in fits])
    assert later.high < growth.low  # a difference the intervals call real
    assert goes_on(fits, growth)


def _epochs(uss, epochs: int, per_epoch: int = 100, every: int = 10, ends: int = 1, noise: float = 1.5e5):  # type: ignore[no-untyped-def]
    """Two persistent workers read every ``every`` samples over ``epochs`` epochs of
    ``per_epoch`` samples each, and ``ends`` times at each epoch's end (where a worker idles
    between epochs): (samples produced, uss(epoch, point in it) with a reading's own noise, drawn
    from a seeded generator), and where each epoch began in their own count."""
    import random

    rng = random.Random(7)
    series = {
        pid: [
            (float(e * per_epoch + k), uss(e, k / per_epoch) + pid * 1e6 + rng.gauss(0.0, noise))
            for e in range(epochs)
            for k in [*range(every, per_epoch, every), *[per_epoch] * ends]
        ]
        for pid in (1, 2)
    }
    starts = {pid: [float(e * per_epoch) for e in range(epochs)] for pid in (1, 2)}
    return series, starts


def test_growth_across_epochs_is_what_a_worker_keeps_not_what_it_gives_back() -> None:
    from ioprof.measure.growth import across_epochs

    # keeps 64 kB of every sample: 6.4 MB more at each point of each epoch than of the last
    kept = across_epochs(*_epochs(lambda e, k: 300e6 + 64_000 * 100 * (e + k), epochs=3))
    assert kept.epochs == 3 and kept.per_epoch.value == pytest.approx(6.4e6, rel=0.05)
    assert kept.per_epoch.low > 1e6
    # takes 40 MB on through each epoch and gives it back at its end: a slope inside a window sees
    # 40 MB an epoch, the same point of consecutive epochs sees nothing
    breathes = across_epochs(*_epochs(lambda e, k: 300e6 + 40e6 * k, epochs=3))
    assert abs(breathes.per_epoch.value) < 1e6 and breathes.per_epoch.low < 0 < breathes.per_epoch.high
    # keeps 2 MB over its second epoch and 0.2 MB over each later one: 0.8 MB an epoch from the
    # first epoch's end to the last's, each pair of epochs one epoch's growth however many points
    # they are matched at (pooled, the later pairs' 18 readings outweighed the first's one: 0.3)
    slows = across_epochs(*_epochs(lambda e, k: 300e6 + [0.0, 2e6, 2.2e6, 2.4e6][e], epochs=4))
    assert slows.epochs == 4 and slows.per_epoch.value == pytest.approx(0.8e6, abs=1.5e5), slows
    # one epoch: nothing to compare
    once = across_epochs(*_epochs(lambda e, k: 300e6 + 40e6 * k, epochs=1))
    assert once.epochs == 1 and not once.per_epoch.known


def test_a_workers_first_epoch_is_compared_at_its_end_only() -> None:
    """timm's train.py (2 workers, 2 epochs, mobilenetv3 at 96 px), its workers as ioprof read
    them here after their warm-up (samples produced, USS in MB): each rose 0.6 MB over the last
    quarter of its first epoch, jumped at its second's first batch, then stayed flat. Matched at
    points inside the first epoch (still warming up: meeting its samples for the first time) the
    growth read 1.42 MB [1.09–1.74] an epoch; what each kept from end to end was 1.20 and 1.34."""
    from ioprof.measure.growth import across_epochs

    series = {
        7904: [(40.0, 18.230), (56.0, 18.636), (56.0, 18.816), (56.0, 18.816), (56.0, 18.841), (56.0, 18.841),
               (64.0, 19.545), (85.808, 19.930), (104.0, 19.946), (112.0, 19.987)],
        7903: [(48.0, 18.304), (56.0, 18.370), (64.0, 18.587), (64.0, 18.587), (64.0, 18.603), (64.0, 18.603),
               (72.0, 19.099), (96.0, 19.373), (120.0, 19.926), (128.0, 19.938)],
    }  # fmt: skip
    starts = {7904: [0.0, 56.0], 7903: [0.0, 64.0]}
    g = across_epochs({pid: [(x, mb * 1e6) for x, mb in pts] for pid, pts in series.items()}, starts)
    end_to_end = [19.987e6 - sum([18.636e6, 18.816e6, 18.816e6, 18.841e6, 18.841e6]) / 5, 19.938e6 - 18.595e6]
    assert g.epochs == 2 and g.per_epoch.value == pytest.approx(sum(end_to_end) / 2, rel=1e-6), g
    assert g.per_epoch.low < min(end_to_end) and max(end_to_end) < g.per_epoch.high


def test_workers_that_keep_different_amounts_leave_the_growth_undecided() -> None:
    """The readings of one worker are no independent observations of a growth the workers share:
    they rise in its allocator's steps, and workers differ. One that keeps 2 MB an epoch beside
    one that keeps none: a growth of about 1 MB that the two workers cannot tell from none."""
    from ioprof.core.thresholds import GROWTH_NOISE_BYTES
    from ioprof.measure.growth import across_epochs

    series, starts = _epochs(lambda e, k: 300e6, epochs=2)
    series = {
        pid: [(x, y + (2e6 * ((x - 1) // 100) if pid == 2 else 0.0)) for x, y in pts]
        for pid, pts in series.items()
    }
    g = across_epochs(series, starts).per_epoch
    assert g.value == pytest.approx(1e6, abs=3e5)
    assert g.low < GROWTH_NOISE_BYTES and g.high > 2e6, g
    # alike, the two are one growth, told as narrowly as their readings allow (each read 4 times
    # at each epoch's end)
    alike = {
        pid: [(x, y + 3e6 * ((x - 1) // 100)) for x, y in pts]
        for pid, pts in _epochs(lambda e, k: 300e6, 2, ends=4, noise=5e4)[0].items()
    }
    one = across_epochs(alike, starts).per_epoch
    assert 2e6 < one.low < one.high < 4e6, one


def test_a_worker_reads_its_own_memory_at_a_batchs_end_within_its_budget(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Each worker of a user's loader reads its own smaps at the end of a batch — the count
    of its samples then exact — at most every MEMORY_EVERY_MIN_S and within its budget; the
    readings join the recorder's, in order of the samples."""
    import os

    from ioprof.host.processes import memory_of
    from ioprof.measure import stage_rows, stages
    from ioprof.measure.growth import samples_vs_uss

    clock = stages.StageClock(str(tmp_path), 0, "stages", memory=True)
    for i in range(3):  # three batches at once: one reading, the next held back
        clock.batch(4, 0.01, 0.001, float(i))
    clock.flush()
    rows = stage_rows.read_rows(tmp_path)
    own = [r for r in rows if "uss" in r]
    assert len(rows) == 3 and len(own) == 1 and own[0] is rows[0]
    uss, _, _ = memory_of(os.getpid()) or (0, 0, 0)
    assert own[0]["uss"] == pytest.approx(uss, rel=0.2) and own[0]["pss"] > 0
    assert samples_vs_uss([], rows) == [(4.0, float(own[0]["uss"]))]
    # without ``memory`` (a sweep's own workers) no reading is taken
    quiet = stages.StageClock(str(tmp_path / "q"), 0, "stages")
    os.makedirs(tmp_path / "q")
    quiet.batch(4, 0.01, 0.001, 0.0)
    quiet.flush()
    assert all("uss" not in r for r in stage_rows.read_rows(tmp_path / "q"))


def test_a_forked_workers_life_is_never_carried_above_what_it_maps() -> None:
    """A worker of one epoch whose USS rose 150 MB over its first 20 samples — pages it was handed
    at the fork becoming its alone as the training process wrote its own copies — while its RSS
    stayed at 1.1 GB: carried to its share of 200 samples at that slope it would hold 1.84 GB, more
    than it maps. Its peak is what it maps, carried at what it allocated itself."""
    from ioprof.measure.growth import one_life_peak

    mb = 1e6
    uss = [(0.0, 340 * mb), (10.0, 415 * mb), (20.0, 490 * mb)]
    rss = [(0.0, 1100 * mb), (10.0, 1100.5 * mb), (20.0, 1101 * mb)]
    peak, slope = one_life_peak([uss], 200.0) or (0.0, 0.0)
    assert peak == pytest.approx(1840 * mb) and slope == pytest.approx(7.5 * mb)
    capped, carried = one_life_peak([uss], 200.0, [rss]) or (0.0, 0.0)
    assert capped == pytest.approx(1110 * mb)  # 1,101 MB mapped, and 0.05 MB a sample of its own
    assert carried == pytest.approx(0.05 * mb)  # and at that slope to another count's share
    # a worker whose own memory stays far below what it maps is carried at its own slope, unchanged
    small = [(0.0, 20 * mb), (20.0, 22 * mb)]
    assert one_life_peak([small], 200.0, [rss]) == one_life_peak([small], 200.0)


def test_a_forked_workers_step_at_its_start_is_not_carried_as_a_rate() -> None:
    """Workers of a first pass that write 100 MB they inherited in their first sample, 40 samples a
    life in batches of 8, read from outside every 0.5 s: one reading fell mid-way through a first
    batch (30 MB), the rest after it. Fitted to every reading, the step was carried on as a rate
    to each life's end — 149 MB said of workers that held 116 at the most, read each 0.1 s from
    outside. Fitted to the readings after each life's warm-up (its first 2 batches), the peak is
    what they held."""
    from ioprof.measure.growth import one_life_peak, warm_from

    mb = 1e6
    lives = [
        [(2.0, 30 * mb), (8.0, 113.1 * mb), (30.7, 113.9 * mb), (32.0, 113.9 * mb)],
        [(32.0, 114.0 * mb), (34.6, 114.0 * mb)],
    ]
    warm = [warm_from(life, [], 8) for life in lives]
    assert warm == [16.0, 16.0]
    stepped, _ = one_life_peak(lives, 40.0) or (0.0, 0.0)
    peak, slope = one_life_peak(lives, 40.0, warm=warm) or (0.0, 0.0)
    assert stepped > 1.1 * 114 * mb  # the step carried as a rate
    assert peak == pytest.approx(114.0 * mb, rel=0.005) and slope < 0.1 * mb, (peak, slope)
    # a life whose readings all fall in its warm-up is said as read: its slope past it is not known
    early = [[(2.0, 20 * mb), (6.0, 24 * mb)]]
    assert one_life_peak(early, 40.0, warm=[16.0]) == (24 * mb, None)


def test_a_life_read_only_in_its_warm_up_is_said_as_read_not_carried() -> None:
    """A default sweep's 1-worker cell at 1024x768 (batch 4, a cell of about 40 samples): its
    worker was read at 94 MB, then past a step of inherited pages written at its first full
    collection, its readings all within its warm-up. Fitted to them, that step was carried as a
    rate to an epoch's share of 200 samples: 1.01 GB. A worker that made the whole 200 (the same
    cell, 50 steps), read from outside every 0.2 s, held 360 MB 4 s into its life and 385 MB at
    the most. Said as read, the peak is what the short life held; and moved to another worker
    count's share, it stays as read."""
    from ioprof.core.inside import WorkerMemory
    from ioprof.measure.growth import one_life_peak

    mb = 1e6
    life = [[(3.0, 94 * mb), (16.0, 362 * mb), (28.0, 367 * mb)]]
    stepped, _ = one_life_peak(life, 200.0) or (0.0, 0.0)
    assert stepped > 2 * 385 * mb  # the step carried as a rate: far beyond what a whole life held
    peak, slope = one_life_peak(life, 200.0, warm=[32.0]) or (0.0, 0.0)
    assert (peak, slope) == (367 * mb, None)

    from ioprof.conclude.inside import worker_peak_bytes
    from ioprof.render.inside import _life_peaks

    m = WorkerMemory(
        main_uss_bytes=725 * 10**6, main_pss_bytes=1_270 * 10**6, worker_uss_bytes=367 * 10**6,
        worker_pss_bytes=598 * 10**6, growth_bytes_per_1000_samples=None, growth_low=None,
        growth_high=None, readings=3, batch_bytes=2_408_480, prefetch_factor=2, workers=1,
        shm_total_bytes=None, shm_free_bytes=None, ram_available_bytes=23 * 10**9,
        ram_source="the host's available memory", samples_per_epoch=200, persistent_workers=False,
        life_peak_bytes=peak, life_growth_per_sample=slope,
    )  # fmt: skip
    assert worker_peak_bytes(m, 1) == worker_peak_bytes(m, 4) == 367 * mb
    said = _life_peaks(m, 200)
    assert "reached 367.0 MB as read" in said and "was not read" in said and "reaches about" not in said


def test_a_cells_round_of_readings_longer_than_their_reach_still_counts_every_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Seen in a default sweep: 8 workers' cell read before its warm-up, one process after another
    (0.34 s for nine), the training process first, 2.13 s before the window; the workers read last
    were within 2 s, so no reading opened the window — and the training process, its CPU the most,
    was left out: "0.05 cores busy". A cell's readings span its window from the last before it."""
    import os

    from ioprof.host.processes import ProcessReading
    from ioprof.measure.inside import InsideRecorder

    rec = InsideRecorder(
        folder=str(tmp_path),
        tag=1,
        workers=2,
        prefetch_factor=2,
        pin_memory=False,
        persistent_workers=False,
        dataset_items=None,
        pauses=False,
    )
    start, end = 100.0, 108.0
    main, workers = os.getpid(), (1_000_001, 1_000_002)

    def read(pid: int, at: float, cpu: float) -> ProcessReading:
        return ProcessReading(pid, at, 0, 0, {pid: cpu}, cpu_s=cpu, thread_runq_s={pid: 0.0})

    # the training process busy on 1.8 cores, each worker on 0.1, from the warm-up on
    rec.readings[main] = [read(main, start - 2.13, 50.0), read(main, end + 0.1, 50.0 + 1.8 * 10.23)]
    for k, pid in enumerate(workers):
        at = start - 1.95 + 0.05 * k
        rec.readings[pid] = [read(pid, at, 1.0), read(pid, end + 0.1, 1.0 + 0.1 * (end + 0.1 - at))]
    cpu = rec._cpu(start, end)
    assert cpu.cpu_s == pytest.approx(1.8 * 10.23 + 0.1 * (10.05 + 10.0))
    assert cpu.window_s == pytest.approx(10.23)


def test_a_datasets_items_are_counted_in_the_samples_its_rows_count() -> None:
    """Rows count a batch's images (``n``); a dataset's length counts its own items: one sample each
    where the loader batches, a batch each where the dataset makes them (``items`` per row)."""
    from ioprof.measure.inside import samples_counted

    batched = [{"n": 8}] * 3
    assert samples_counted(batched, 100, 13) == (100, 104)  # 13 batches of 8 (the last one short)
    whole = [{"n": 8, "items": 1}] * 3  # each item a batch of 8 images
    assert samples_counted(whole, 12, 12) == (96, 96)
    lists = [{"n": 8}] * 3  # batch_size=None, the sampler handing lists of 8 indices: items are samples
    assert samples_counted(lists, 96, 12) == (96, 96)
    assert samples_counted([], 96, 12) == (96, 96)  # no rows yet: the dataset's own count
    assert samples_counted(batched, None, None) == (None, None)


def test_a_reading_taken_while_a_batch_is_made_counts_what_of_it_was_made() -> None:
    """A recorder's reading of a worker falls anywhere in a batch: the worker holds the samples of
    the batch in progress it has made, so the reading counts them (its fetch's share by then), not
    only the batches done."""
    from ioprof.host.processes import ProcessReading
    from ioprof.measure.growth import samples_vs_uss

    # batches of 8, each fetched over 0.8 s and collated in 0.2 s, ending at t = 1, 2, 3
    rows = [{"pid": 7, "t": float(k), "n": 8, "fetch_s": 0.8, "collate_s": 0.2} for k in (1, 2, 3)]

    def at(t: float) -> float:
        ((x, _),) = samples_vs_uss([ProcessReading(7, t, 100, 100, {})], rows)
        return x

    assert at(1.0) == 8.0  # at a batch's end: the batches done
    assert at(1.4) == pytest.approx(8 + 8 * 0.4 / 0.8)  # the next fetched from 1.0: half of it made
    assert at(1.9) == 16.0  # fetched, collating
    assert at(9.0) == 24.0  # after the last


def test_cores_busy_is_never_more_than_the_cores_the_processes_may_run_on() -> None:
    """Three processes that held both cores of the mask for a second, read in the kernel's ticks:
    a tick more for each at the end reads 2.03 cores, which no process can be busy on two; a tick
    less stays as read."""
    from ioprof.host.processes import ProcessReading
    from ioprof.measure.inside import CpuTotals, core_use

    def totals(extra_s: float) -> CpuTotals:
        cpu = CpuTotals()
        for pid, share in ((1, 1.0), (2, 0.5), (3, 0.5)):  # the training process and two workers
            a = ProcessReading(pid, 10.0, 0, 0, {pid: 0.0}, cpu_s=0.0)
            b = ProcessReading(pid, 11.0, 0, 0, {pid: share + extra_s}, cpu_s=share + extra_s)
            cpu.add(pid, a, b, main=pid == 1)
        return cpu

    def busy(cpu: CpuTotals, ranks: int = 1) -> float | None:
        use = core_use(
            cpu, affinity_cores=2, intra_op_threads=1, ranks_on_host=ranks, pin_memory_thread=False, workers=2
        )
        return use.cpu_busy_cores

    assert busy(totals(0.01)) == 2.0  # 2.03 read: two cores at most
    assert busy(totals(-0.01)) == pytest.approx(1.97)
    assert busy(totals(0.01), ranks=2) == 4.0  # two ranks' processes on the host: each its mask


_HELD: list[bytes] = []  # what a worker of the test below keeps from its last batch on


class _GrowsAtTheEnd:
    """16 samples; those of each worker's last batch (indices 12 and 14: batches of 2, two workers
    in turn) write 48 MB the worker keeps."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> int:
        if index in (12, 14):
            _HELD.append(b"\x01" * (48 << 20))
        return index


def test_a_forked_workers_life_is_read_at_its_end_where_it_rose_after_its_last_reading(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Seen from outside on the ImageNet example over sshfs: a worker forked in the second pass held
    29.2 MB at the most, 6 MB more than ioprof's last reading of it, which fell before its last
    batches; said 23.3 MB. Each worker reads its own memory at most every MEMORY_EVERY_MIN_S, so one
    whose batches are quick is read at its first only; what its last batch keeps (48 MB written
    here) is read as the worker exits."""
    import os
    import time

    from torch.utils.data import DataLoader

    from ioprof.measure import stage_rows, stages
    from ioprof.measure.inside import InsideRecorder

    rec = InsideRecorder(
        folder=str(tmp_path), tag=0, workers=2, prefetch_factor=2, pin_memory=False,
        persistent_workers=False, dataset_items=16, pauses=False,
    )  # fmt: skip
    start = time.perf_counter()
    rec.read([])
    loader = DataLoader(
        _GrowsAtTheEnd(),
        batch_size=2,
        num_workers=2,
        worker_init_fn=stages.WorkerStages(str(tmp_path), 0, None, True),
    )
    assert sum(len(b) for b in loader) == 16
    del loader
    rec.read([])
    rows = stage_rows.read_rows(tmp_path, 0)
    ends = stage_rows.read_rows(tmp_path, 0, ends=True)
    workers = {r["pid"] for r in rows} - {os.getpid()}
    assert len(workers) == 2 and {r["pid"] for r in ends} == workers, (rows, ends)
    first = {r["pid"]: r["uss"] for r in rows if "uss" in r}
    assert all(e["uss"] - first[e["pid"]] > 40 << 20 for e in ends), (first, ends)
    m = rec.memory(start, time.perf_counter())
    assert m is not None and m.life_peak_bytes is not None
    # the most a life reached: what a worker held at its first batch, and the 48 MB it kept
    assert max(first.values()) + (40 << 20) < m.life_peak_bytes < max(first.values()) + (64 << 20)
