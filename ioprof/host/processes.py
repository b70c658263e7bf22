"""What the kernel says about a loader's processes: their memory (USS, PSS), their threads' CPU
time, the cores they may use, and the shared-memory filesystem batches travel through (/dev/shm).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import multiprocessing
import multiprocessing.util
import os
import shutil
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import psutil

from ioprof.host import procstat
from ioprof.host.libc import LIBC

SHM_DIR = "/dev/shm"
# A thread counts as running when it was on a CPU at least this share of the window.
BUSY_THREAD_SHARE = 0.10


@dataclass(frozen=True)
class ProcessReading:
    """One process at one moment: memory only it holds and no file holds for it (USS, ``memory_of``),
    its proportional share of every page it maps (PSS), its
    CPU seconds (all its threads and the children it reaped), and each living thread's CPU and
    run-queue seconds so far."""

    pid: int
    at_s: float  # time.perf_counter() (CLOCK_MONOTONIC: one clock for every process on the host)
    uss_bytes: int
    pss_bytes: int
    thread_cpu_s: dict[int, float]
    cpu_s: float = 0.0
    thread_runq_s: dict[int, float] | None = None
    rss_bytes: int = 0  # every page it maps that is resident, shared or not


def read_process(pid: int, at_s: float, *, memory: bool = True) -> ProcessReading | None:
    """USS, PSS, CPU and thread times of ``pid`` (None when it is gone or cannot be read).

    Memory comes from ``/proc/PID/smaps_rollup`` (``memory_of``; psutil parses the whole
    ``smaps`` in Python, holding the interpreter lock for tens of ms in a large process); CPU and
    run-queue times from ``/proc`` directly (``procstat``). ``memory=False``: CPU only (cheap)."""
    got = procstat.sample(pid, own=False)
    if got is None:
        return None
    try:
        uss, pss, rss = (memory_of(pid) or _full_info(psutil.Process(pid))) if memory else (0, 0, 0)
    except (psutil.Error, OSError):
        return None
    return ProcessReading(
        pid,
        at_s,
        uss,
        pss,
        {tid: t.cpu_s for tid, t in got.threads.items()},
        got.cpu_s + got.children_cpu_s,
        {tid: t.runq_s for tid, t in got.threads.items()},
        rss,
    )


def memory_of(pid: int) -> tuple[int, int, int] | None:
    """(USS, PSS, RSS) of ``pid`` from ``/proc/PID/smaps_rollup``, the kernel's own sums (None:
    gone). Its full ``smaps`` would tell each mapping apart, but reading it is counted among the
    process's reads (``rchar``: hundreds of kB a time), where the loader's bytes are counted.

    USS here is the private pages no file holds for the process: its dirty ones (and huge), less
    its share of a tmpfs file's pages (``Pss_Shmem``: a dataset in /dev/shm, the batches in flight,
    which are counted apart). The clean pages a process alone maps are a file's (a memory-mapped
    Arrow table, a numpy memmap, a library's code): page cache, which the file holds and the kernel
    drops when RAM runs short, though it counts them among that process's private pages. A disk
    file's dirty pages (written and not yet written back) cannot be told apart there, and count."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    kb: dict[str, int] = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        value = rest.split()
        if value and value[0].isdigit():
            kb[name] = int(value[0])
    uss = max(0, kb.get("Private_Dirty", 0) + kb.get("Private_Hugetlb", 0) - kb.get("Pss_Shmem", 0))
    return uss * 1024, kb.get("Pss", 0) * 1024, kb.get("Rss", 0) * 1024


def _full_info(proc: psutil.Process) -> tuple[int, int, int]:
    mem = proc.memory_full_info()
    return int(mem.uss), int(getattr(mem, "pss", mem.uss)), int(mem.rss)


def busy_threads(before: ProcessReading, after: ProcessReading) -> tuple[int, float]:
    """(threads on a CPU at least ``BUSY_THREAD_SHARE`` of the span, CPU seconds of all threads)."""
    span = after.at_s - before.at_s
    if span <= 0:
        return 0, 0.0
    busy, cpu = 0, 0.0
    for tid, t in after.thread_cpu_s.items():
        used = max(0.0, t - before.thread_cpu_s.get(tid, 0.0))
        cpu += used
        busy += used >= BUSY_THREAD_SHARE * span
    return busy, cpu


def shm_space(path: str = SHM_DIR) -> tuple[int, int] | None:
    """(total, free) bytes of /dev/shm, or None where there is none."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return int(usage.total), int(usage.free)


def quick_exit(code: int | str | None) -> NoReturn:
    """End this process as ``sys.exit(code)`` would, less the teardown of torch's native libraries
    (1.2-1.5 s on the project's 2-core machine, after every process that imported torch): once the
    other threads have ended, the exit handlers have run and the output is flushed, nothing is
    left to do."""
    if code is None:
        rc = 0
    elif isinstance(code, int):
        rc = code
    else:
        print(code, file=sys.stderr)
        rc = 1
    for t in threading.enumerate():  # what the interpreter's own shutdown waits for first
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (| head): nothing more to say
            stream.flush()
    os._exit(rc)


def release_free_heap() -> None:
    """Hand the C heap's free memory back to the kernel (glibc's ``malloc_trim``; elsewhere
    nothing), before this process forks loader workers.

    After a fork every page this process writes while a worker lives is copied first, and a
    training step writes far more than its live tensors: the allocator reuses memory it freed
    earlier. Freed memory handed back costs no copy (the step gets fresh pages instead): see
    benchmarks/bench_fork_warmup.py. The window starts after that step."""
    trim = getattr(LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)


def end_loader_workers(iterator: object) -> list[str]:
    """Shut a DataLoader iterator's workers down at once, whatever batch each is making.

    torch's own shutdown lets each worker finish the batch in hand: after a measurement that is
    work nobody measures, and with batches of 256 it costs a turn of the workers (seconds at 8
    workers) before the next measurement can start. Every batch a worker finished is in its rows
    already (``stages`` writes one line per batch), so nothing measured is lost. The workers' pids
    are taken off torch's watch first, which would otherwise take the signal for a worker that
    failed; they are frozen (SIGSTOP: none opens another file), ended, and the iterator's own
    shutdown joins them. Returns the files they had open, their reads cut short: a caller does
    with them what a worker would have done with a file once read (the cold regime drops its
    pages). An iterator without workers (or not torch's) is left to its own end."""
    workers = getattr(iterator, "_workers", None)
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if not workers or shutdown is None or getattr(iterator, "_shutdown", True):
        return []
    if getattr(iterator, "_worker_pids_set", False):
        from torch.utils.data._utils import signal_handling

        signal_handling._remove_worker_pids(id(iterator))
        iterator._worker_pids_set = False  # type: ignore[attr-defined]
    pids = [w.pid for w in workers if w.pid and w.is_alive()]
    for pid in pids:
        with contextlib.suppress(OSError):  # one already gone
            os.kill(pid, signal.SIGSTOP)
    open_now: list[str] = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            open_now += [f.path for f in psutil.Process(pid).open_files()]
    folders = _their_temp_folders(pids)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    # A worker looks at its done event between samples, holding the event's lock for the look:
    # one ended inside it holds that lock for good, and the shutdown sets the event, which would
    # wait forever. Its workers gone, nobody else shares it: the shutdown is given one of its own.
    cast(Any, iterator)._workers_done_event = multiprocessing.get_context().Event()
    shutdown()
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    _remove_their_shm(pids)
    return open_now


def _remove_their_shm(pids: list[int]) -> None:
    """The names in /dev/shm of batches these workers were making when they were ended. torch
    names a batch's shared memory after the worker that makes it (``torch_PID_…``) and removes the
    name as soon as the memory is mapped; a worker ended between the two leaves it, holding the
    batch's whole size of /dev/shm for good (a simulated GPU's batches of 256: 154 MB each). A
    process that mapped one keeps its pages; only the name goes."""
    for pid in pids:
        for path in glob.glob(os.path.join(SHM_DIR, f"torch_{pid}_*")):
            with contextlib.suppress(OSError):
                os.unlink(path)


def _their_temp_folders(pids: list[int]) -> set[str]:
    """The temporary folders multiprocessing made for these processes alone, which each removes as
    it exits and none ended by a signal does: a worker that hands a batch's shared memory over
    listens for the main process on a socket in a ``pymp-`` folder of its own, and a sweep ended
    that way left one behind in /tmp for every worker of every cell. Found by the sockets they
    listen on; a folder this process shares with them (a worker forked after it made its own uses
    it) stays."""
    found: set[str] = set()
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            for conn in psutil.Process(pid).net_connections(kind="unix"):
                folder = os.path.dirname(conn.laddr) if isinstance(conn.laddr, str) else ""
                if os.path.basename(folder).startswith("pymp-"):
                    found.add(folder)
    if found:
        found.discard(multiprocessing.util.get_temp_dir())
    return found
