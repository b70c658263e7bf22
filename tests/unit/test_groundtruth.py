"""The ground truths the live tests check ioprof against must count what they say they count."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from groundtruth import CpuGroup, Smaps

SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass"


def test_a_runs_cgroup_counts_its_processes_cpu_and_nothing_beside_it() -> None:
    """A process and the child it starts spin in the cgroup while another spins outside it: the
    cgroup's count is what the kernel's rusage says the two used, none of the other's."""
    group = CpuGroup.make()
    if group is None:
        pytest.skip("no cgroup can be made here (cgroup v1 cpuacct or v2 cpu.stat, as root)")
    try:
        outside = subprocess.Popen([sys.executable, "-c", SPIN.format(s=1.0)])
        before = group.cpu_s()
        inside = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {SPIN.format(s=0.4)!r}])\n"
                + SPIN.format(s=0.4),
            ],
            preexec_fn=partial(group.procs.write_text, "0"),
        )
        _, status, usage = os.wait4(inside.pid, 0)
        inside.returncode = os.waitstatus_to_exitcode(status)  # reaped here, for its rusage
        counted = group.cpu_s() - before
        outside.wait()
    finally:
        group.remove()
    # wait4's rusage holds the process and the children it waited for: the kernel's own figure
    used = usage.ru_utime + usage.ru_stime
    assert inside.returncode == 0
    assert used > 0.8  # both spun 0.4 s of CPU, on top of their start-up
    assert counted == pytest.approx(used, rel=0.05), (counted, used)


def test_workers_are_put_in_the_order_they_were_started_across_the_pid_wrap() -> None:
    """Six workers forked as the kernel's pids wrapped (``pid_max`` here): the last four got the
    lowest pids, yet come after the first two. Sorted by pid alone they would be taken for the first
    four, and each worker's samples compared with another's batches."""
    top = int(Path("/proc/sys/kernel/pid_max").read_text())
    smaps = Smaps(None)
    started = [top - 9, top - 4, 300, 301, 305, 306]
    smaps.readings = {pid: [] for pid in started}
    assert smaps.in_fork_order() == started
    smaps.readings = {pid: [] for pid in (1000, 1002, 1003)}
    assert smaps.in_fork_order() == [1000, 1002, 1003]
