"""The kernel counters the observer reads at batch boundaries, checked against what this test did:
a process's own threads' ``rchar`` counts a child's piped bytes once (the process total counts
them twice once the child is reaped), plain ``recv()`` is in neither, and the loopback interface
counts what crossed it."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ioprof.host import netdev, procstat

MB = 1_000_000


def _reads_sampled(pid: int) -> tuple[int, int, int]:
    got = procstat.sample(pid)
    assert got is not None
    return got.rchar, got.read_bytes, got.own_rchar


def _reads_alone(pid: int) -> tuple[int, int, int]:
    got = procstat.reads(pid)  # the reads alone: what a window reads every half second
    assert got is not None
    return got


@pytest.mark.parametrize("read", [_reads_sampled, _reads_alone])
def test_own_threads_count_a_childs_piped_bytes_once(read, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blob = tmp_path / "blob"
    blob.write_bytes(b"x" * (5 * MB))
    before = read(os.getpid())
    with subprocess.Popen(["cat", str(blob)], stdout=subprocess.PIPE) as child:
        assert child.stdout is not None
        got = len(child.stdout.read())
    after = read(os.getpid())
    assert got == 5 * MB
    own = after[2] - before[2]
    total = after[0] - before[0]
    assert 5 * MB <= own < 5.2 * MB  # the pipe's bytes, read by this process: once
    assert total >= 10 * MB  # …and the reaped child's reads of the file on top


def test_a_sample_reads_only_what_is_asked() -> None:
    full = procstat.sample(os.getpid())
    bare = procstat.sample(os.getpid(), threads=False, own=False)
    assert full is not None and bare is not None
    assert full.threads and full.own_rchar > 0 and full.children_cpu_s <= bare.children_cpu_s
    assert not bare.threads and bare.own_rchar == 0


def test_plain_recv_is_not_in_rchar_but_the_interface_counts_it() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def send() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"y" * (4 * MB))

    t = threading.Thread(target=send)
    t.start()
    assert netdev.interface_for("127.0.0.1") == "lo"
    rx0 = netdev.rx_bytes("lo")
    me = os.getpid()
    before = procstat.sample(me)
    with socket.create_connection(("127.0.0.1", port)) as c:
        got = 0
        while got < 4 * MB:
            data = c.recv(1 << 16)
            if not data:
                break
            got += len(data)
    t.join()
    server.close()
    after = procstat.sample(me)
    rx1 = netdev.rx_bytes("lo")
    assert before is not None and after is not None and rx0 is not None and rx1 is not None
    assert after.own_rchar - before.own_rchar < 0.1 * MB  # recv() is not a read() to the kernel's rchar
    assert rx1 - rx0 >= 4 * MB  # what crossed the interface, headers and all


def test_a_thread_that_spins_and_one_that_sleeps_are_told_apart() -> None:
    # read until the spinning thread has had 0.1 s of a core, however busy the host (CI runs two
    # tests side by side on two cores): the sleeping one must have had none of it meanwhile
    ids: dict[str, int] = {}
    stop = threading.Event()

    def spin() -> None:
        ids["spin"] = threading.get_native_id()
        while not stop.is_set():
            pass

    def nap() -> None:
        ids["nap"] = threading.get_native_id()
        stop.wait()

    threads = [threading.Thread(target=spin), threading.Thread(target=nap)]
    for th in threads:
        th.start()
    while len(ids) < 2:
        time.sleep(0.01)
    pid = os.getpid()
    clocks = {k: procstat.ThreadClock(pid, tid) for k, tid in ids.items()}
    first = {k: c.read() for k, c in clocks.items()}
    deadline = time.perf_counter() + 30
    while True:
        time.sleep(0.05)
        last = {k: c.read() for k, c in clocks.items()}
        if last["spin"][0].cpu_s - first["spin"][0].cpu_s >= 0.1 or time.perf_counter() > deadline:  # type: ignore[index]
            break
    stop.set()
    for th in threads:
        th.join()
    for c in clocks.values():
        c.close()
    on_cpu = {k: last[k][0].cpu_s - first[k][0].cpu_s for k in clocks}  # type: ignore[index]
    assert on_cpu["spin"] >= 0.1 and on_cpu["nap"] < 0.01, on_cpu


_WORKS_IN_BURSTS = """
import threading, time
threading.Thread(target=threading.Event().wait, daemon=True).start()  # a thread that never runs
print(flush=True)
while True:
    end = time.thread_time() + 0.003
    while time.thread_time() < end:
        pass
    time.sleep(0.002)
"""


def _others_over_short_waits() -> tuple[list[float], float]:
    """The child's other threads' CPU over 80 waits of 4 ms, and its working thread's in all."""
    child = subprocess.Popen(["python", "-c", _WORKS_IN_BURSTS], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"\n"
        clock = procstat.ThreadClock(child.pid)
        others, own = [], 0.0
        before = clock.read()
        for _ in range(80):
            time.sleep(0.004)
            after = clock.read()
            assert before is not None and after is not None
            thread = after[0].cpu_s - before[0].cpu_s
            others.append((after[1] - before[1]) - thread)
            own += thread
            before = after
        clock.close()
    finally:
        child.kill()
        child.wait()
        child.stdout.close()  # type: ignore[union-attr]
    assert own > 0.05, f"the child ran {own:.3f} s on a CPU: too little to test"
    return others, own


def test_a_producers_other_threads_read_nothing_over_a_wait_shorter_than_a_tick() -> None:
    """A wait is split into the producing thread's CPU and its process's other threads' (the
    process's CPU less the thread's). Over waits of a few ms — a fast loop's — the process's CPU
    must be as fine as the thread's: counted in clock ticks (10 ms) its other threads read -10 to
    +10 ms in a wait where they did nothing, and a split clipped at 0 counts the positive ones."""
    others, _ = _others_over_short_waits()
    worst = max(others, key=abs)
    assert abs(worst) < 0.0005, f"its idle thread read {worst * 1e3:+.1f} ms in a wait of 4 ms"


def test_a_reader_put_off_its_core_between_the_thread_and_its_process_gives_them_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reader loses its core between reading the thread and its process at every other
    read (a busy host does that now and then): the thread's last bursts are in its process's CPU
    by then, and must not be read as its other threads'."""
    real, calls = procstat.process_cpu_s, [0]

    def put_off(pid: int) -> float | None:
        calls[0] += 1
        if calls[0] % 2:
            time.sleep(0.006)  # longer than a burst of the child's: its total moves meanwhile
        return real(pid)

    monkeypatch.setattr(procstat, "process_cpu_s", put_off)
    others, _ = _others_over_short_waits()
    worst = max(others, key=abs)
    assert abs(worst) < 0.0005, f"its idle thread read {worst * 1e3:+.1f} ms in a wait of 4 ms"
