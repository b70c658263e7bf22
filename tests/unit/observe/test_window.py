"""A user's loader window, driven by hand: exact times, counters that count what a fake reader read.

Each test replays what the patched iterator sees (calls, returns, passes) with a clock the test
sets, so the arithmetic of units, segments, pauses and counters is checked exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ioprof.observe.window import LoaderWindow, Reading, gpu_units


class Counters:
    """Per-process byte counters that grow as the test says its processes read."""

    def __init__(self) -> None:
        self.by_pid: dict[int, int] = {}
        self.daemon = 0
        self.reads: list[tuple[Sequence[int], float]] = []
        self.unread: set[int] = set()  # processes a reading misses (gone, or not readable then)
        self.cpu_reads: list[float] = []  # when the CPU was read with them
        self.cpu_took_s = 0.0  # what reading the CPU costs
        self.bytes_took_s = 0.0  # what reading the bytes alone costs
        self.busy = 0.0  # the processes' CPU: each busy this share of the time

    def read(self, pids: Sequence[int], at: float, cpu: bool = True) -> Reading:
        self.reads.append((tuple(pids), at))
        procs = {p: (self.by_pid.get(p, 0), self.by_pid.get(p, 0)) for p in pids if p not in self.unread}
        if not cpu:
            return Reading(at, procs, None, (99, "sshfs", self.daemon), took_s=self.bytes_took_s)
        self.cpu_reads.append(at)
        return Reading(
            at,
            procs,
            None,
            (99, "sshfs", self.daemon),
            cpu={p: self.busy * at for p in procs},
            threads={p: {p: (self.busy * at, 0.0)} for p in procs},
            took_s=self.cpu_took_s,
        )

    def add(self, pid: int, n: int) -> None:
        self.by_pid[pid] = self.by_pid.get(pid, 0) + n
        self.daemon += n


def window(counters: Counters, **kw: object) -> LoaderWindow:
    args: dict[str, object] = {"steps": 100, "seconds": None, "warmup": 0, "workers": 1, "prefetch_depth": 2}
    args.update(kw)
    return LoaderWindow(read=counters.read, **args)  # type: ignore[arg-type]


def batch(w: LoaderWindow, t: float, wait: float, images: int = 8, opt: int = 0) -> float:
    """One batch: called at t, returned after ``wait``; returns the return time."""
    w.call(t, opt, 1)
    w.returned(t, t + wait, images)
    return t + wait


def test_units_are_wait_then_step_and_bytes_share_their_seconds() -> None:
    c = Counters()
    w = window(c)
    w.pass_started([11])
    t = batch(w, 0.0, 0.5)  # skipped: the worker's first batch (start-up)
    for i in range(6):  # batches called at 1, 2, …: 0.25 s wait, 0.75 s step; 100 bytes read per second
        start = 1.0 + i
        c.add(11, 100)
        t = batch(w, start, 0.25)
    w.call(7.0, 0, 1)  # completes the sixth unit
    w.pass_ended()
    assert w.waits == pytest.approx([0.25] * 6) and w.step_times == pytest.approx([0.75] * 6)
    assert w.busy_share == pytest.approx(0.75)  # the share of its time the loop did not wait
    assert w.totals.seconds == pytest.approx(6.0)  # the spans from the first call to the last
    assert w.totals.read_bytes == 500  # read during those spans: the reads at 2, 3, 4, 5, 6
    assert w.totals.daemon_bytes == 500
    assert t == pytest.approx(6.25)


def test_a_pause_is_left_out_of_steps_bytes_and_the_counters_pieces() -> None:
    c = Counters()
    w = window(c, prefetch_depth=3)
    w.pass_started([5])
    batch(w, 0.0, 0.1)  # start-up
    t = 1.0
    for _ in range(6):
        batch(w, t, 0.1)
        c.add(5, 10)
        t += 1.0
    # an evaluation pass of 100 s while the workers fill the queue and another loader reads 1 MB
    c.daemon += 1_000_000
    t += 100.0
    for _ in range(3):  # the queued batches come at once: skipped, not counted as zero waits
        batch(w, t, 0.0)
        t += 1.0
    for _ in range(4):
        batch(w, t, 0.4)
        c.add(5, 10)
        t += 1.0
    w.call(t, 0, 1)
    assert w.gaps == 1 and w.segments == 2
    assert len(w.waits) == 5 + 4  # the unit whose step was the pause is dropped
    assert min(w.waits) == pytest.approx(0.1)  # no queued batch's zero wait
    assert w.totals_now().daemon_bytes is not None and w.totals_now().daemon_bytes < 100
    assert w.totals_now().seconds == pytest.approx(5.0 + 4.0)
    # the pieces between the counters' readings (each half second or more) add up to the totals,
    # the pause in none of them: the fetched figure's interval rests on its very bytes and seconds
    # the pass ends a tenth of a second after the last reading: that short piece joins the one
    # before it (a batch's bytes over 0.1 s are no rate), and the pieces still add up
    c.add(5, 10)
    w.pass_ended(t + 0.1)
    now = w.totals
    assert now.seconds == pytest.approx(5.0 + 4.1)
    assert len(w.pieces) >= 4 and all(p.seconds >= 0.5 for p in w.pieces)
    assert sum(p.seconds for p in w.pieces) == pytest.approx(now.seconds)
    assert sum(p.read_bytes for p in w.pieces) == now.read_bytes
    assert sum(p.daemon_bytes or 0 for p in w.pieces) == now.daemon_bytes


def test_a_reading_that_misses_the_processes_keeps_the_hosts_counters_whole() -> None:
    """One reading misses the only worker (CI47: a WebDataset run's pieces fell 73 kB short of its
    interface's whole, and the fetched figure lost its interval): the span into it and the one out
    of it still count their seconds and the host's bytes, so those pieces add up to the whole; the
    worker's own bytes over those two spans are lost to the pieces alone."""
    c = Counters()
    w = window(c)
    w.pass_started([5])
    batch(w, 0.0, 0.1)  # start-up
    t = 1.0
    for i in range(8):
        c.unread = {5} if i == 4 else set()
        batch(w, t, 0.1)
        c.add(5, 10)
        t += 1.0
    c.unread = set()
    w.call(t, 0, 1)
    w.pass_ended(t)
    whole = w.totals
    assert whole.read_bytes == 80 and whole.daemon_bytes == 80
    assert sum(p.seconds for p in w.pieces) == pytest.approx(whole.seconds)
    assert sum(p.daemon_bytes or 0 for p in w.pieces) == whole.daemon_bytes
    assert sum(p.read_bytes for p in w.pieces) == whole.read_bytes - 20


def test_each_pass_reads_its_own_workers() -> None:
    c = Counters()
    w = window(c, workers=2, prefetch_depth=4)
    for epoch, pids in enumerate(([1, 2], [3, 4])):  # non-persistent workers: new pids each epoch
        w.pass_started(pids)
        t = 100.0 * epoch
        for _ in range(2):
            batch(w, t, 0.1)
        for _ in range(5):
            t += 1.0
            batch(w, t, 0.2)
            c.add(pids[0], 7)
            c.add(pids[1], 7)
        w.call(t + 1.0, 0, 1)
        w.pass_ended()
    assert w.totals.read_bytes == 2 * 5 * 2 * 7  # every pass counted, none read as 0
    assert {tuple(p) for p, _ in c.reads} == {(1, 2), (3, 4)}


def test_optimizer_steps_between_batches_make_training_and_between_passes_do_not() -> None:
    c = Counters()
    val = window(c)
    train = window(c)
    steps = 0
    for _ in range(2):
        train.pass_started([1])
        for i in range(6):
            train.call(float(i), steps, 1)
            train.returned(float(i), i + 0.1, 8)
            if i % 3 == 2:  # gradient accumulation: one step every three batches
                steps += 1
        train.pass_ended()
        val.pass_started([2])
        for i in range(4):
            val.call(float(i), steps, 1)
            val.returned(float(i), i + 0.1, 8)
        val.pass_ended()
        steps += 1  # a scheduler step or a checkpoint between epochs: not between val's batches
    assert train.optimizer_between > 0
    assert val.optimizer_between == 0 and val.intervals == 6


def test_the_window_ends_at_its_steps_and_the_counters_are_read_then() -> None:
    c = Counters()
    w = window(c, steps=3)
    w.pass_started([1])
    batch(w, 0.0, 0.1)
    done = [w.call(t, 0, 1) or w.returned(t, t + 0.1, 8) for t in (1.0, 2.0, 3.0)]
    assert not any(done)
    assert w.call(4.0, 0, 1) is True and w.done
    assert w.totals.seconds == pytest.approx(3.0) and c.reads[-1][1] == 4.0


class Gpu:
    """Events that complete on a fake GPU's clock: at the later of now and the end of queued work."""

    def __init__(self) -> None:
        self.now = 0.0
        self.free_at = 0.0

    def mark(self) -> float:
        return max(self.now, self.free_at)

    def settle(self, event: float) -> None:
        pass

    def seconds(self, start: float, end: float) -> float:
        return max(0.0, end - start)


def test_gpu_units_charge_the_wait_only_while_the_gpu_is_idle() -> None:
    gpu = Gpu()
    gpu.free_at = 0.05  # busy with earlier work
    units = []
    # the host enqueues 50 ms of GPU work and goes back to next(), where it blocks 30 ms: no stall
    for i in range(3):
        gpu.now = i * 0.05
        a = gpu.mark()
        gpu.now += 0.03
        b = gpu.mark()
        gpu.free_at = max(gpu.now, gpu.free_at) + 0.05
        units.append([a, b])
    # then the loader falls behind: 80 ms in next() for 10 ms of GPU work
    for _ in range(2):
        gpu.now = gpu.free_at + 0.001
        a = gpu.mark()
        gpu.now += 0.08
        b = gpu.mark()
        gpu.free_at = gpu.now + 0.01
        units.append([a, b])
    gpu.now = gpu.free_at
    ends = [u[0] for u in units[1:]] + [gpu.mark()]
    stalls, steps = gpu_units(gpu, [(a, b, e) for (a, b), e in zip(units, ends, strict=True)])
    assert stalls[:3] == pytest.approx([0.0, 0.0, 0.0])
    assert stalls[3:] == pytest.approx([0.08, 0.08])
    assert steps[3:] == pytest.approx([0.011, 0.010], abs=1e-9)  # up to the next call's event


def test_a_hiccup_shorter_than_a_unit_is_a_step_not_a_pause() -> None:
    """Steps of 0.2 ms while each batch takes 60 ms to come: a 4 ms step (a GC, the scheduler)
    is twenty times the median step but far shorter than a unit — no batch could have been made
    ahead during it, so it is a step, and the window keeps its units."""
    c = Counters()
    w = window(c)
    w.pass_started([5])
    t = batch(w, 0.0, 0.06)  # start-up
    for i in range(12):
        t = batch(w, t + (0.004 if i == 8 else 0.0002), 0.06)
    w.call(t + 0.0002, 0, 1)
    assert w.gaps == 0 and len(w.waits) == 12
    assert max(w.step_times) == pytest.approx(0.004)


def test_a_span_begun_before_the_interface_was_known_is_counted_on_it() -> None:
    """The workers' connections name their interface at the first batch, after the pass began: the
    reading at ``iter()`` holds every interface's count, so the span from it to the window's first
    reading counts what arrived on the one found — and nothing where it was not read then."""
    from ioprof.observe.window import Totals

    start = Reading(0.0, {}, rx={"lo": 1_000, "eth0": 50})
    found = Reading(2.0, {}, net_bytes=9_000, iface="lo")
    t = Totals()
    t.add(start, found)
    assert t.net_bytes == 8_000
    later = Reading(3.0, {}, net_bytes=9_500, iface="lo")
    t.add(found, later)
    assert t.net_bytes == 8_500
    blind = Totals()
    blind.add(Reading(0.0, {}), found)  # no count of it at the start: none over the span
    assert blind.net_bytes is None


def test_cpu_is_read_at_the_segments_ends_and_between_as_its_cost_allows() -> None:
    """Bytes every half second; the CPU (each thread of a training process: milliseconds) where a
    segment opens and closes, and between only as often as keeps its cost within its budget."""
    from ioprof.observe.window import CPU_READ_BUDGET

    c = Counters()
    c.cpu_took_s, c.busy = 3 * CPU_READ_BUDGET, 0.5  # a costly reading: at most one each 3 s
    w = window(c)
    w.pass_started([11])
    batch(w, 0.0, 0.1)  # start-up
    for i in range(10):
        batch(w, 1.0 + i, 0.25)  # a unit each second: the bytes read at each
    every_s = c.cpu_took_s / CPU_READ_BUDGET
    assert every_s == pytest.approx(3.0)
    w.call(11.0, 0, 1)  # completes the tenth unit
    # the pass runs out: the segment closes at its last reading, whose CPU was not read
    w.pass_ended()
    at = [a for _, a in c.reads[1:]]  # after the one before the window (on the host's clock)
    assert at == [1.0, *[2.0 + k for k in range(10)]]  # its start, then at each unit
    assert c.cpu_reads[1:] == [1.0, 4.0, 7.0, 10.0]  # the start, then each 3 s
    assert w.totals.seconds == pytest.approx(10.0)  # the bytes' span: to the last reading
    assert w.totals.cpu_window_s == pytest.approx(9.0)  # the CPU's: to its last reading
    assert w.totals.cpu_s == pytest.approx(0.5 * 9.0)
    assert w.totals.thread_cpu_s == {"11/11": pytest.approx(4.5)}
    # a window that fills reads its CPU at its end
    c2 = Counters()
    c2.cpu_took_s = 3 * CPU_READ_BUDGET
    w2 = window(c2, steps=4)
    w2.pass_started([11])
    batch(w2, 0.0, 0.1)
    for i in range(5):
        batch(w2, 1.0 + i, 0.25)
    assert w2.done and c2.cpu_reads[1:] == [1.0, 4.0, 5.0]
    assert w2.totals.cpu_window_s == pytest.approx(4.0)


def test_a_pass_s_workers_reaped_at_its_end_count_through_the_process_that_reaped_them() -> None:
    """A pass that runs out shuts its workers down before the loop sees its end: read then, they
    are gone, and each one's CPU to its end is in the children's time of the training process that
    reaped it. The span counts it, less what the worker had at the span's start: the training
    process 1 s of its own, the worker 3 s more of its life of 5. A worker gone but not reaped (a
    zombie, its CPU not yet moved), or reaped by a process not read (a fork server), leaves the span
    out; the threads' figures keep to spans whose every process was read at both ends (broken once
    — a process gone leaving every span out — the pass's end was lost: no CPU over 10 s)."""
    from ioprof.observe.window import Totals

    def at(t: float, cpu: dict[int, float], parents: dict[int, int], reaped: set[int]) -> Reading:
        threads = {p: {p: (c, 0.0)} for p, c in cpu.items()}
        return Reading(t, {}, cpu=cpu, threads=threads, parents=parents, reaped=reaped, wall_s=1000.0 + t)

    start = at(0.0, {100: 10.0, 11: 2.0}, {100: 1, 11: 100}, set())
    for parent, reaped, counted in ((100, {11}, 4.0), (100, set(), None), (50, {11}, None)):
        a = at(0.0, start.cpu, {100: 1, 11: parent}, set())
        t = Totals()
        t.add(a, at(10.0, {100: 10.0 + 1.0 + 5.0}, {100: 1}, reaped), at(10.0, {100: 16.0}, {100: 1}, reaped))
        if counted is None:
            assert t.cpu_window_s == 0.0 and t.cpu_s == 0.0, (parent, reaped)
        else:
            assert t.cpu_s == pytest.approx(counted) and t.cpu_window_s == pytest.approx(10.0)
            assert t.threads_window_s == 0.0 and t.cpu_spans_wall == [(1000.0, 1010.0)]
    whole = Totals()
    whole.add(
        start,
        at(10.0, {100: 11.0, 11: 5.0}, {100: 1, 11: 100}, set()),
        at(10.0, {100: 11.0, 11: 5.0}, {}, set()),
    )
    assert whole.cpu_s == pytest.approx(4.0) and whole.threads_window_s == pytest.approx(10.0)
    assert whole.thread_cpu_s == {"100/100": pytest.approx(1.0), "11/11": pytest.approx(3.0)}


def test_a_spans_cpu_is_timed_when_its_readings_read_it() -> None:
    """A reading of a training process's threads takes a millisecond, the first of a segment twice
    as long as its last: the span's seconds run between the moments the readings read the CPU
    (halfway through each), not between the events they were taken at."""
    from ioprof.observe.window import Totals

    a = Reading(0.0, {}, cpu={100: 5.0}, wall_s=1000.001, read_s=0.001)
    b = Reading(2.0, {}, cpu={100: 6.5}, wall_s=1002.0004, read_s=2.0004)
    t = Totals()
    t.add(a, b, b)
    assert t.cpu_s == pytest.approx(1.5) and t.cpu_window_s == pytest.approx(1.9994)
    assert t.cpu_spans_wall == [(1000.001, 1002.0004)]


def test_the_bytes_are_read_no_more_often_than_their_cost_allows() -> None:
    from ioprof.observe.window import CPU_READ_BUDGET, READ_BUDGET

    # a reading of the bytes alone that costs 1 % of 2 s, of the CPU 1 % of 5 s
    c3 = Counters()
    c3.bytes_took_s, c3.cpu_took_s = 2 * READ_BUDGET, 5 * CPU_READ_BUDGET
    w3 = window(c3)
    w3.pass_started([11])
    batch(w3, 0.0, 0.1)
    for i in range(12):
        c3.add(11, 100)
        batch(w3, 1.0 + i, 0.25)
    w3.call(13.0, 0, 1)
    w3.pass_ended()
    # 2 s apart once a reading of the bytes alone has shown its cost (the first at 2 s)
    assert [a for _, a in c3.reads[1:]] == [1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
    assert c3.cpu_reads[1:] == [1.0, 6.0, 12.0]  # the CPU's 5 s apart, with the bytes'
    assert w3.totals.read_bytes == 1100  # the bytes of the units between the first reading and the last
