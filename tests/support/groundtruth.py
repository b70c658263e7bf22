"""Ground truth taken outside ioprof: the busy CPU of the cores this test may use from
``/proc/stat`` (the machine's, or under ``--core-each`` its worker's one), sampled on a thread with
wall-clock times, so that a figure ioprof gives for a window can be checked against the kernel's
own total over the same seconds — less what the test's own rig used meanwhile (the sshfs daemon,
ssh and sshd carrying the link, the HTTP server, this test process), read from their
``/proc/PID/stat``: those cores run nothing else."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

RIG_COMMANDS = ("sshfs", "ssh", "sshd")  # what carries the test rig's link


def _rig_pids(cores: set[int]) -> list[int]:
    """This process and the rig's: the sshfs daemon, ssh, sshd and the HTTP server in the namespace —
    those that run only on ``cores`` (under ``--core-each``, another worker's rig runs on another)."""
    out = [os.getpid()]
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/comm", encoding="utf-8") as f:
                comm = f.read().strip()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            ours = os.sched_getaffinity(int(name)) <= cores
        except OSError:
            continue
        if ours and (comm in RIG_COMMANDS or b"http.server" in cmd):
            out.append(int(name))
    return out


def _cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, USER_HZ
    return total


def _busy_s(cores: set[int]) -> tuple[float, float]:
    """The busy CPU seconds so far of ``cores`` (their lines in ``/proc/stat``), and apart their
    steal: time the hypervisor ran something else while a vCPU was ready: no process of this
    machine ran then, so no run's cores figure can hold it. Printed beside each truth, to tell a
    noisy host from ioprof."""
    busy = steal = 0
    with open("/proc/stat", encoding="ascii") as f:
        for line in f:
            name, *values = line.split()
            if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cores:
                continue
            fields = [int(x) for x in values]
            user, nice, system, _idle, _iowait, irq, softirq, stolen = (fields + [0] * 8)[:8]
            busy += user + nice + system + irq + softirq
            steal += stolen
    return busy / 100.0, steal / 100.0  # USER_HZ: 100 on Linux


def _at(samples: list[tuple[float, float]], t: float) -> float:
    """A sampled counter's value at wall-clock time ``t``, between the two samples around it."""
    before = max((s for s in samples if s[0] <= t), default=samples[0])
    after = min((s for s in samples if s[0] >= t), default=samples[-1])
    if after[0] <= before[0]:
        return before[1]
    return before[1] + (after[1] - before[1]) * (t - before[0]) / (after[0] - before[0])


def _per_s_over(samples: list[tuple[float, float]], spans: list[tuple[float, float]]) -> float:
    """A sampled counter's growth over these wall-clock spans together, per second of them."""
    return sum(_at(samples, b) - _at(samples, a) for a, b in spans) / sum(b - a for a, b in spans)


class CpuGroup:
    """A cgroup of its own for a run under test (pass ``procs`` to ``cli.ioprof``'s
    ``cgroup_procs``): the CPU time the kernel charged to that run's processes alone — ioprof,
    the script, its workers and whatever they start, even those gone before it is read — and to
    nothing else on the machine: not another test's run, not the interrupts a core serves for the
    whole machine. cgroup v1's ``cpuacct``, or v2's ``cpu.stat``; ``None`` from ``make`` where
    neither can be made (not root)."""

    def __init__(self, folder: Path, v2: bool) -> None:
        self.folder = folder
        self.v2 = v2
        self.procs = folder / "cgroup.procs"

    @classmethod
    def make(cls) -> CpuGroup | None:
        name = f"ioprof-test-{uuid.uuid4().hex[:8]}"
        for root, v2 in ((Path("/sys/fs/cgroup/cpuacct"), False), (Path("/sys/fs/cgroup"), True)):
            usage = "cpu.stat" if v2 else "cpuacct.usage"
            if not (root / usage).exists() and not (root / "cgroup.procs").exists():
                continue
            try:
                (root / name).mkdir()
            except OSError:
                continue
            if (root / name / usage).exists():
                return cls(root / name, v2)
            (root / name).rmdir()
        return None

    def cpu_s(self) -> float:
        if self.v2:
            for line in (self.folder / "cpu.stat").read_text().splitlines():
                key, value = line.split()
                if key == "usage_usec":
                    return int(value) / 1e6
            raise OSError(f"no usage_usec in {self.folder / 'cpu.stat'}")
        return int((self.folder / "cpuacct.usage").read_text()) / 1e9

    @contextlib.contextmanager
    def holding_this_process(self) -> Iterator[CpuGroup]:
        """This process in the group meanwhile (and what it forks: a loader's workers), then back
        in the one it came from, the group removed: for a figure ioprof reads in this process."""
        home = self._home()
        self.procs.write_text(str(os.getpid()))
        try:
            yield self
        finally:
            (home / "cgroup.procs").write_text(str(os.getpid()))
            self.remove()

    def _home(self) -> Path:
        """The cgroup this process is in, of the hierarchy this group is made in."""
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if (self.v2 and not controllers) or (not self.v2 and "cpuacct" in controllers.split(",")):
                return self.folder.parent / path.lstrip("/")
        raise OSError(f"this process is in no cgroup of {self.folder.parent}")

    def remove(self) -> None:
        """The cgroup removed once its processes are gone (a run's last worker may still be exiting)."""
        for _ in range(50):
            try:
                self.folder.rmdir()
                return
            except OSError:
                time.sleep(0.1)


class ProcStat:
    """/proc/stat's busy CPU seconds, sampled every 20 ms while in its ``with`` block; ``rig``:
    less the rig's processes and this one (the run under test is another process); ``group``:
    instead, the CPU seconds of the run's own cgroup (``CpuGroup``); ``link``: a reader of the
    bytes the rig's link has carried, sampled with them."""

    def __init__(
        self, *, rig: bool = False, link: Callable[[], int] | None = None, group: CpuGroup | None = None
    ) -> None:
        self.rig = rig
        self.link = link
        self.group = group  # where given, the busy CPU is its processes' alone, not the cores'
        self.cores = os.sched_getaffinity(0)  # the machine's, or under ``--core-each`` this worker's one
        self.samples: list[tuple[float, float]] = []
        self.steal_samples: list[tuple[float, float]] = []
        self.link_samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rig = self.rig and self.group is None
        others = _rig_pids(self.cores) if rig else []
        while not self._stop.wait(0.02):
            if rig and len(self.samples) % 50 == 0:
                others = _rig_pids(self.cores)  # sshd forks per connection
            # the cores' busy CPU less the rig's and this process's: what the run under test used
            now = time.time()
            busy, steal = _busy_s(self.cores)
            self.samples.append((now, self.group.cpu_s() if self.group else busy - _cpu_s(others)))
            self.steal_samples.append((now, steal))
            if self.link is not None:
                self.link_samples.append((now, float(self.link())))

    def __enter__(self) -> ProcStat:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def source(self) -> str:
        """Where the busy CPU came from, as a figure's line says it."""
        return "its cgroup's CPU time" if self.group else "/proc/stat"

    def link_mb_per_s_over(self, spans: list[tuple[float, float]]) -> float:
        """MB/s the link carried over these wall-clock spans together."""
        return _per_s_over(self.link_samples, spans) / 1e6

    def busy_cores_over(self, spans: list[tuple[float, float]]) -> float:
        """Cores kept busy (of those this test may use) over these wall-clock spans together."""
        return _per_s_over(self.samples, spans)

    def steal_cores_over(self, spans: list[tuple[float, float]]) -> float:
        """Cores the hypervisor took (steal) over these wall-clock spans together: left out above."""
        return _per_s_over(self.steal_samples, spans)

    def busy_cores(self, start: float, end: float) -> float:
        """Cores kept busy (of those this test may use) between two wall-clock times."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        (t0, b0), (t1, b1) = inside[0], inside[-1]
        return (b1 - b0) / (t1 - t0)


def no_figure(report: str) -> list[str]:
    """Where a report prints nothing as a figure: "0 kB", "0.00 MB/s" (not the end of "10.00")."""
    return re.findall(r"(?<![\d.,])(?:0 kB|0\.00 MB/s)", report)


def stock_truths(
    result: dict[str, Any],
    report: str,
    observed: list[dict[str, Any]],
    stat: ProcStat,
    say: Callable[[str], None],
    name: str,
) -> None:
    """What no stock training script may get from ``ioprof run`` — a memory-growth finding, a
    page-cache claim where pages are dropped, "0 kB" or "0.00 MB/s" — and its cores figure against
    the kernel's count (``stat``: its cgroup's, or ``/proc/stat``'s) over the very spans ioprof read
    (its cgroup's: within 5 %, the run's own ``ioprof`` process in it too, 0-2 % under here; the machine's
    ``/proc/stat``, which samples busy ticks: within 10 %)."""
    findings = result["analysis"]["findings"]
    assert not [f for f in findings if f["kind"] in ("worker-memory-grows", "slow-samples")], findings
    if not all(d.get("keeps_pages") is True for d in result["datasets"]):  # sshfs, HTTP, unknown
        assert "datasets-fit-in-ram" not in {f["kind"] for f in findings}  # no page-cache claim
    assert not no_figure(report)
    key = next(lo["key"] for lo in result["loaders"] if lo["role"] == "training")
    cell = next(c for c in result["cells"] if c["dataset"] == key)
    cores = cell["inside"]["cores"]
    seen = next(lo for o in observed for lo in o["loaders"] if lo["role"] == "training")
    truth = stat.busy_cores_over(seen["cpu"]["spans_wall"])
    steal = stat.steal_cores_over(seen["cpu"]["spans_wall"])
    say(
        f"run {name}: cores busy {cores['cpu_busy_cores']:.3f}, {stat.source} over the same spans {truth:.3f} "
        f"(steal {steal:.2f} left out)"
    )
    within = 0.05 if stat.group is not None else 0.10
    assert abs(cores["cpu_busy_cores"] - truth) <= within * truth, (cores, truth)
    # the in-order hand-over replayed from the workers' own batch times and each batch's own costs
    # gives back the wait the loop measured, but for what no recorded time shows: the replay the
    # slow samples' share rests on holds on the script. Its figures are
    # shares of the loop's time, so its error is weighed there (a wait of 0.07 s over 30 batches
    # that reads 0.08 moves no share of the loop's time, though it is 14 % of the wait)
    slow = ((cell["inside"].get("stages") or {}).get("per_sample") or {}).get("slow")
    if slow is not None and slow["measured_wait_s"] > 0:
        loop_s = slow["measured_wait_s"] + sum(cell["step_s"][-slow["batches"] :])
        off = abs(slow["replayed_wait_s"] - slow["measured_wait_s"])
        say(
            f"run {name}: the hand-over replayed {slow['replayed_wait_s']:.3f} s of wait over {slow['batches']} "
            f"batches, the loop measured {slow['measured_wait_s']:.3f} s ({off / loop_s:.2%} of its {loop_s:.1f} s)"
        )
        assert off <= 0.02 * loop_s, (slow, loop_s)


def resident_pages(paths: Sequence[str | Path]) -> dict[str, int]:
    """Each file's pages in the page cache as util-linux's ``fincore`` counts them (outside ioprof)."""
    fincore = shutil.which("fincore")
    if fincore is None:
        pytest.skip("fincore (util-linux) is not installed")
    out = subprocess.run(
        [fincore, "-n", "-r", "-o", "PAGES,FILE", *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
    )
    return {line.split(" ", 1)[1]: int(line.split(" ", 1)[0]) for line in out.stdout.splitlines()}


def no_more_than_chance(
    lost: int, pages: int, control_lost: int, control_pages: int, alpha: float = 1e-3
) -> bool:
    """Whether ``lost`` of ``pages`` is no more than the loss ``control_lost`` of ``control_pages``
    makes likely by chance: given the losses of both, each lost page falls on the first set with
    the first set's share of the pages, and ``lost`` or more there has probability above ``alpha``
    (an exact binomial tail)."""
    k, p = lost + control_lost, pages / (pages + control_pages)
    if lost <= 0 or k == 0:
        return True
    tail = sum(
        math.exp(
            math.lgamma(k + 1)
            - math.lgamma(i + 1)
            - math.lgamma(k - i + 1)
            + i * math.log(p)
            + (k - i) * math.log1p(-p)
        )
        for i in range(lost, k + 1)
    )
    return tail > alpha


class CachedBeside:
    """A generated dataset under ``root/data``, cached whole as a host that trains on it holds it,
    beside as many untouched files under ``root/untouched`` cached at the same moment: the host's
    own reclaim takes pages from both, and only files gone whole from the data more often than
    from those by chance are what a command left out of the cache (``no_more_than_chance``)."""

    def __init__(self, root: Path, width: int, height: int, images: int, seed: int) -> None:
        from ioprof.datasets.synth import DatasetSpec, generate
        from ioprof.host.pagecache import filesystem_of

        self.data, untouched = root / "data", root / "untouched"
        generate(DatasetSpec(width, height, images, seed=seed), self.data)
        generate(DatasetSpec(width, height, images, seed=seed + 1), untouched)
        if filesystem_of(self.data).ram_backed:
            pytest.skip("the test folder is RAM-backed: nothing there can be evicted")
        self.files, self.others = (sorted(str(f) for f in d.rglob("*.jpg")) for d in (self.data, untouched))
        for f in self.files + self.others:
            Path(f).read_bytes()
        self.cached = resident_pages(self.files + self.others)

    def gone_whole(self) -> tuple[int, int]:
        """Files of the data, and of the untouched ones, cached before and out of the cache whole now."""
        after = resident_pages(self.files + self.others)
        gone, others = (
            sum(self.cached[f] > 0 and after[f] == 0 for f in g) for g in (self.files, self.others)
        )
        return gone, others

    def as_found(self) -> bool:
        """Whether the data's files are cached as they were, but for what reclaim takes by chance."""
        gone, others = self.gone_whole()
        return no_more_than_chance(gone, len(self.files), others, len(self.others))


def private_pages(pid: int) -> tuple[int, int]:
    """(its own, a file's) private pages of ``pid``, in bytes, mapping by mapping of
    ``/proc/PID/smaps`` (its own parser, not ioprof's): pages of its anonymous mappings and the
    copies written over in a file's; and the pages of files that only it maps (page cache)."""
    own = files = 0
    with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="replace") as f:
        blocks = re.split(r"^(?=[0-9a-f]+-[0-9a-f]+ )", f.read(), flags=re.M)
    for block in filter(None, blocks):
        head, _, body = block.partition("\n")
        fields = head.split(maxsplit=5)
        kb = {k: int(v.split()[0]) for k, v in re.findall(r"^(\w+):\s+(\d+ kB)$", body, flags=re.M)}
        private = kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0) + kb.get("Private_Hugetlb", 0)
        if fields[4] == "0" or fields[-1].startswith("/dev/zero"):
            own += private
        else:
            copied = min(kb.get("Anonymous", 0), kb.get("Private_Dirty", 0))
            own += copied
            files += private - copied
    return own * 1024, files * 1024


def _worked(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether a process worked between two (wall time, CPU s) readings: on a CPU at least 1 % of
    the interval."""
    return b[1] - a[1] >= 0.01 * (b[0] - a[0])


class Smaps:
    """Each process whose command line holds ``match`` (a training script's path: its DataLoader
    workers are forked from it and keep its command line), read from outside: its CPU seconds every
    ``every_s``; its own memory (``private_pages``: the private pages no file holds for it) and the
    pages of files only it maps (page cache) as often too, or — under a ``budget`` — where it
    matters; the ground truth for what a worker's memory does."""

    def __init__(
        self, match: str | None, every_s: float = 0.25, parent: int | None = None, budget: float | None = None
    ) -> None:
        """``match``: a part of the command line; ``parent``: or the children this process forked
        (a DataLoader's workers, forked from the test itself; not a fork server it started).

        ``budget``: the share of a core the memory readings may take, where the run they read is
        timed on the same core. The kernel writes a torch process's ``smaps`` (some 800 mappings)
        in tens of ms: a training process and its workers read every quarter second took half of the
        core from the steps whose wait the test checks. Under a budget a process's memory is read
        where its work stops (its CPU time no longer advancing: the end of an epoch for a persistent
        worker), where it starts again, and otherwise only as the budget's credit allows."""
        self.match = match.encode() if match else None
        self.parent = parent
        self.every_s = every_s
        self.budget = budget
        self.readings: dict[int, list[tuple[float, int, float]]] = {}  # pid: (wall time, USS, CPU s)
        self.files: dict[int, list[tuple[float, int]]] = {}  # pid: (wall time, file pages only it maps)
        self.cpu: dict[int, list[tuple[float, float]]] = {}  # pid: (wall time, CPU s), every round
        self._credit = 0.0  # CPU seconds of memory readings the budget allows now
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._before: set[int] = set()

    def _loop(self) -> None:
        import psutil

        last = time.perf_counter()
        while not self._stop.wait(self.every_s):
            now = time.perf_counter()
            # credit for at most a few seconds' readings: no burst after a quiet spell
            self._credit = min(self._credit + (self.budget or 0.0) * (now - last), (self.budget or 0.0) * 4.0)
            last = now
            found: list[int] = []
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    if int(name) not in self._before and self._ours(name):
                        cpu = sum(psutil.Process(int(name)).cpu_times()[:2])
                        self.cpu.setdefault(int(name), []).append((time.time(), cpu))
                        found.append(int(name))
                except (OSError, ValueError, psutil.Error):
                    continue
            self._round(found)

    def _round(self, found: list[int]) -> None:
        """Each process's memory where it is due: every round without a budget; under one, first
        where a process's work turned (its credit spent down to none), then the longest unread while
        the credit stays above a reserve for the next turn. Each reading is stamped when it was read,
        with the CPU time read before it."""
        if not self.budget:
            due, first = found, len(found)
        else:
            turned = [pid for pid in found if self._turned(pid)]
            due = [pid for pid in turned if self._credit > 0]
            first = len(due)
            due += sorted((pid for pid in found if pid not in turned), key=self._last_read)
        for k, pid in enumerate(due):
            if k >= first and self._credit < (self.budget or 0.0) * 2.0:
                break
            began = time.thread_time()
            try:
                uss, files = private_pages(pid)
            except (OSError, ValueError):
                continue
            finally:
                self._credit -= time.thread_time() - began
            now = time.time()
            self.readings.setdefault(pid, []).append((now, uss, self.cpu[pid][-1][1]))
            self.files.setdefault(pid, []).append((now, files))

    def in_fork_order(self) -> list[int]:
        """The processes read, in the order they were started: by pid, which the kernel hands out
        in turn up to ``pid_max`` and then again from the lowest free, so a run of them that
        straddles the wrap starts after the widest gap between them, not at the lowest."""
        pids = sorted(self.readings)
        if len(pids) < 2:
            return pids
        top = int(Path("/proc/sys/kernel/pid_max").read_text())
        gaps = [(b - a) % top for a, b in itertools.pairwise([*pids, pids[0]])]
        first = (gaps.index(max(gaps)) + 1) % len(pids)
        return pids[first:] + pids[:first]

    def _turned(self, pid: int) -> bool:
        """Whether the process's work stopped or started again in the last round."""
        seen = self.cpu.get(pid, [])[-3:]
        if len(seen) < 3:
            return False
        worked = [_worked(a, b) for a, b in itertools.pairwise(seen)]
        return worked[0] != worked[1]

    def _last_read(self, pid: int) -> float:
        return self.readings[pid][-1][0] if self.readings.get(pid) else -math.inf

    def _ours(self, pid: str) -> bool:
        if self.parent is not None:  # its forked children: same command line (a fork server has its own)
            with open(f"/proc/{pid}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[1]) != self.parent:
                    return False
            with open(f"/proc/{pid}/cmdline", "rb") as f, open(f"/proc/{self.parent}/cmdline", "rb") as g:
                return f.read() == g.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return self.match is not None and self.match in f.read()

    def __enter__(self) -> Smaps:
        # processes already there are not this run's (a lingering worker of an earlier loader)
        self._before = {int(n) for n in os.listdir("/proc") if n.isdigit()}
        if self.match or self.parent:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def epoch_ends(self, pid: int, epochs: int) -> list[tuple[float, int]]:
        """A persistent worker's (wall time, USS) at the end of each of the script's ``epochs``: its
        CPU readings parted into working and idle runs (on a CPU at least 1 % of the interval or
        not), and the epochs parted by the ``epochs`` − 1 longest idle runs between working ones.
        Between epochs a worker idles through the evaluation loader, a checkpoint or ioprof's
        probes; inside one it idles only while its prefetched batches wait for the loop. How long
        either lasts depends on the script and the host (a small evaluation split parts epochs only
        briefly), so no length of idling tells them apart; their order does. Its USS at an epoch's
        end: the first memory reading from there to its next work (read as its work stopped, under
        a budget), else the last before."""
        runs: list[list[Any]] = []  # [working?, start, end]
        for a, b in itertools.pairwise(self.cpu.get(pid, [])):
            working = _worked(a, b)
            if runs and runs[-1][0] == working:
                runs[-1][2] = b[0]
            else:
                runs.append([working, a[0], b[0]])
        while runs and not runs[-1][0]:  # idling after its last epoch parts nothing
            runs.pop()
        while runs and not runs[0][0]:
            runs.pop(0)
        gaps = sorted((i for i, r in enumerate(runs) if not r[0]), key=lambda i: runs[i][2] - runs[i][1])
        parts = sorted(gaps[len(gaps) - (epochs - 1) :] if epochs > 1 else [])
        if len(parts) != epochs - 1:
            return []
        read = self.readings.get(pid, [])
        out = []
        for k, i in enumerate([*parts, len(runs)]):
            end, until = runs[i - 1][2], runs[i][2] if k < len(parts) else math.inf
            after = [(t, u) for t, u, _ in read if end <= t <= until]
            before = [(t, u) for t, u, _ in read if t <= end]
            if not after and not before:
                return []
            out.append(after[0] if after else before[-1])
        return out


def ioprof_window(results: dict[str, Any]) -> tuple[dict[str, Any], slice]:
    """``ioprof run``'s cell of its one loader in ``results`` (its results.json), and the batches
    of its window among the loop's own: after those the warm-up delivered before it."""
    (loader,) = results["loaders"]
    cell = next(c for c in results["cells"] if c["dataset"] == "loader 1")
    first = loader["before"]["batches"]
    return cell, slice(first, first + len(cell["wait_s"]))


def own_wait_share(own: dict[str, list[float]], part: slice) -> float:
    """A loop's wait share over ``part`` of its steps, from its own record of each ``next()``'s
    wait (``waits``) and each step's time after it (``steps``)."""
    waited = sum(own["waits"][part])
    return waited / (waited + sum(own["steps"][part]))
