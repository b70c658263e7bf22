"""Bytes fetched from storage during a measurement — on every filesystem, with the method named.

The kernel's ``read_bytes`` counts block I/O only. On NFS, FUSE (sshfs, s3fs, gcsfuse), 9p and
CIFS a read that crossed the network shows 0 there, so it cannot tell a cache hit from a fetch.
Each filesystem kind gets the counter that does see its reads:

- block devices: ``read_bytes`` of the loader's own processes (``iocounters``);
- NFS (kernel client): ``/proc/self/mountstats``, the bytes this client read from the server for
  that mount (all processes of the machine together: say so);
- FUSE: what the daemon serving the mount read (its ``rchar``: the bytes it took in from its
  transport or backing store), where its process can be found and read;
- any filesystem, in the cold regime with each file evicted before the window and again after
  every read and the eviction verified: every byte the loader read was fetched ("cold reads").

A verified-cold window on a block device that fetched nothing is a contradiction the analysis
reports; it is never read as evidence of cache hits.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import psutil

from ioprof.core.counts import CacheInfo, CrossCheck, Fetched, IoCounts
from ioprof.host import iocounters
from ioprof.host.libc import read_held, read_whole_held
from ioprof.host.pagecache import FilesystemInfo
from ioprof.host.procstat import parse_io

MOUNTSTATS = "/proc/self/mountstats"
# In a mountstats "bytes:" line: normal read, normal write, direct read, direct write, server read, …
_SERVER_READ_FIELD = 4


def nfs_server_read_bytes(mountpoint: str, text: str | None = None) -> int | None:
    """Bytes this NFS client has read from the server for ``mountpoint`` (None: not found)."""
    if text is None:  # read holding the GIL: it is read at a batch, in the training loop (``libc``)
        whole = read_whole_held(MOUNTSTATS)
        if whole is None:
            return None
        text = whole.decode("utf-8", "replace")
    current = None
    for line in text.splitlines():
        if line.startswith("device "):
            parts = line.split()
            current = parts[4] if len(parts) > 4 and parts[3] == "on" else None
            continue
        if current == mountpoint and line.strip().startswith("bytes:"):
            fields = line.split(":", 1)[1].split()
            if len(fields) > _SERVER_READ_FIELD:
                return int(fields[_SERVER_READ_FIELD])
    return None


def fuse_daemon(fs: FilesystemInfo) -> psutil.Process | None:
    """The process serving a FUSE mount: the one whose command line names the mount point."""
    if not fs.fuse:
        return None
    found = []
    for proc in psutil.process_iter(["cmdline", "pid"]):
        cmd = proc.info.get("cmdline") or []
        if proc.info["pid"] != os.getpid() and fs.mountpoint in (os.path.normpath(c) for c in cmd[1:]):
            found.append(proc)
    return found[0] if len(found) == 1 else None


@dataclass(frozen=True)
class FetchSnapshot:
    """The counters of the mount itself (not of the loader's processes) at one instant."""

    nfs_server_read_bytes: int | None
    daemon_pid: int | None
    daemon_name: str
    daemon_read_chars: int | None
    net_rx_bytes: int | None = None  # an object store: bytes received on the interface it is reached by
    net_iface: str = ""


def store_host(endpoint: str) -> str:
    """The host an object store's requests go to: its endpoint URL's, or AWS S3's."""
    import urllib.parse

    return urllib.parse.urlparse(endpoint).hostname or "s3.amazonaws.com"


class MountCounters:
    """Snapshots of the counters a mount has beside the loader's own: NFS client statistics, or
    the FUSE daemon's reads; for an object store, the bytes its network interface received. On a
    block device or tmpfs there are none."""

    def __init__(self, fs: FilesystemInfo) -> None:
        from ioprof.host.netdev import interface_for

        self.fs = fs
        self._daemon = fuse_daemon(fs)
        self._daemon_name = ""
        if self._daemon is not None:
            try:
                self._daemon_name = self._daemon.name()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                self._daemon = None
        self._iface = interface_for(store_host(fs.source)) if fs.object_store else None

    def snapshot(self) -> FetchSnapshot:
        nfs = nfs_server_read_bytes(self.fs.mountpoint) if self.fs.kind == "network" else None
        pid = name = chars = None
        if self._daemon is not None:
            pid, name = self._daemon.pid, self._daemon_name
            io = read_held(f"/proc/{pid}/io")  # holding the GIL, as psutil's read does not
            chars = parse_io(io).get("rchar") if io else None
            if chars is None:
                pid = name = None
        net = None
        if self._iface is not None:
            from ioprof.host.netdev import rx_bytes

            net = rx_bytes(self._iface)
        return FetchSnapshot(nfs, pid, name or "", chars, net, self._iface or "")


def _delta(a: int | None, b: int | None) -> int | None:
    return b - a if a is not None and b is not None else None


def decide(
    fs: FilesystemInfo,
    cache: CacheInfo,
    *,
    read_bytes: int,
    requested_bytes: int,
    before: FetchSnapshot,
    after: FetchSnapshot,
    emulated: bool = False,
    whole_files: bool = True,
) -> Fetched:
    """The bytes fetched from storage during a window, by the best method this filesystem has.

    Pure: every counter is passed in. ``read_bytes``: block I/O of the loader's processes;
    ``requested_bytes``: what the loader read from the dataset's files. ``whole_files``: whether
    each read took a whole file: only then are files verified cold and evicted after each read
    fetched byte for byte as read; a member read at its place in an archive fetches the readahead
    around it, which only a counter of the mount sees.
    """
    cold = cache.regime == "cold" and cache.verified and cache.evict_after_read and whole_files
    checks: list[CrossCheck] = []
    nfs = _delta(before.nfs_server_read_bytes, after.nfs_server_read_bytes)
    daemon = _delta(before.daemon_read_chars, after.daemon_read_chars)
    if daemon is not None and after.daemon_pid == before.daemon_pid:
        checks.append(CrossCheck("fuse-daemon", f"{after.daemon_name} (pid {after.daemon_pid})", daemon))
    else:
        daemon = None
    if emulated:
        return Fetched(requested_bytes, "emulated", "every read charged to the emulated device")
    if fs.object_store:
        # no page cache holds an object: every byte the loader read came in a GET's body
        net = _delta(before.net_rx_bytes, after.net_rx_bytes)
        rx = (
            (
                CrossCheck(
                    "interface-rx",
                    f"bytes received on {after.net_iface}, the interface {fs.source} is reached by (the whole host's traffic on it)",
                    net,
                ),
            )
            if net is not None and after.net_iface == before.net_iface
            else ()
        )
        return Fetched(requested_bytes, "object-gets", fs.source, rx)
    if fs.kind == "ram":
        return Fetched(0, "ram", f"{fs.fs_type} holds the files in RAM: there is no storage below it")
    if fs.kind == "block":
        return Fetched(read_bytes, "block-io", "read_bytes of the loader's processes")
    if nfs is not None:
        return Fetched(nfs, "nfs-mountstats", f"{MOUNTSTATS}, {fs.mountpoint}", tuple(checks))
    if cold:
        return Fetched(requested_bytes, "cold-reads", fs.mountpoint, tuple(checks))
    if daemon is not None:
        return Fetched(daemon, "fuse-daemon", checks[0].source)
    return Fetched(
        None, "unknown", f"no counter sees {fs.fs_type} at {fs.mountpoint}, and it was not verified cold"
    )


# A window's fetch counters are read again at the first step boundary this long after their last
# reading (and at its ends): segments for fetched MB/s's interval. Reading them takes about
# 0.25 ms with 8 workers, 0.1 % of this; at every step it would be 9 % of a simulated H100's
# 2.7 ms step on a batch of 8.
FETCH_SEGMENT_S = 0.25

# Counts the bytes fetched over a piece of a window: (the loader's processes' I/O counters over it,
# the steps it covers [first, end), the mount's counters at its ends) → as ``decide`` counts them.
PieceCounter = Callable[[IoCounts, tuple[int, int], tuple[FetchSnapshot, FetchSnapshot]], Fetched]


def bytes_read(delivered: int, counts: IoCounts, by_workers: bool) -> int:
    """The bytes a loader read from the dataset's files between two readings of the fetch
    counters: the figure set beside what those readings say was fetched.

    A loader that reads in this process reads a batch's files inside the loop's wait for it: the
    batches delivered between the readings are what it read (``delivered``). Workers read ahead of
    the loop by up to prefetch_factor batches each, so the batches delivered between two readings
    were read partly before the first, and the reads between them were partly for batches delivered
    after the second: over a short window, or one begun while their queue filled, the two differ by
    up to a queue's worth of batches. Where they read files (``by_workers``), what their own
    reads returned over the same readings (``rchar``) is the figure.
    """
    return counts.read_chars if by_workers else delivered


@dataclass
class FetchReadings:
    """The fetch counters (the loader's processes', the mount's) read at a window's step
    boundaries: at its start, at least FETCH_SEGMENT_S apart within it, and at its end."""

    pids: Sequence[int]
    mount: MountCounters
    marks: list[tuple[int, iocounters.Snapshot, FetchSnapshot]] = field(default_factory=list)

    def open(self, now_s: float) -> tuple[iocounters.Snapshot, FetchSnapshot]:
        self.marks = [(0, iocounters.snapshot(self.pids, now_s), self.mount.snapshot())]
        return self.marks[0][1:]

    def step(self, steps_done: int, now_s: float) -> None:
        """At a step boundary: read again, once FETCH_SEGMENT_S has passed since the last reading."""
        if now_s - self.marks[-1][1].at_s >= FETCH_SEGMENT_S:
            self.marks.append((steps_done, iocounters.snapshot(self.pids, now_s), self.mount.snapshot()))

    def close(self, steps_done: int, now_s: float) -> tuple[iocounters.Snapshot, FetchSnapshot]:
        """The window's end (after the GPU drained): its last reading. The one before it is dropped
        where it would leave a last segment shorter than FETCH_SEGMENT_S: a few hundredths of a
        second holding a batch's bytes read as a rate ten times the window's, and its interval
        as nothing (4.01 MB/s [0.00–15.53] on the throttled disk, in a CI run)."""
        if len(self.marks) > 1 and (
            self.marks[-1][0] == steps_done or now_s - self.marks[-1][1].at_s < FETCH_SEGMENT_S
        ):
            self.marks.pop()
        self.marks.append((steps_done, iocounters.snapshot(self.pids, now_s), self.mount.snapshot()))
        return self.marks[-1][1:]

    def segments(self, count: PieceCounter, whole: Fetched) -> tuple[tuple[float, int], ...]:
        """(seconds, bytes fetched) between consecutive readings, each counted as ``whole`` was;
        none where one cannot be, or where they do not add up to it (a worker gone between two)."""
        return adding_up(
            whole,
            (
                (io1.at_s - io0.at_s, count(iocounters.delta(io0, io1), (n0, n1), (m0, m1)))
                for (n0, io0, m0), (n1, io1, m1) in itertools.pairwise(self.marks)
            ),
        )


def adding_up(
    whole: Fetched, parts: Iterable[tuple[float, Fetched | None]], window_s: float | None = None
) -> tuple[tuple[float, int], ...]:
    """(seconds, bytes fetched) of each part of a window, where every part was counted as the
    ``whole`` was and they add up to it (and to ``window_s``, where given); otherwise none: a
    part that cannot be counted so, or parts that fall short (a process gone between two readings)."""
    out = []
    for seconds, part in parts:
        if part is None or part.bytes is None or part.method != whole.method:
            return ()
        out.append((seconds, part.bytes))
    if not whole.known or sum(b for _, b in out) != whole.bytes:
        return ()
    if window_s is not None and abs(sum(s for s, _ in out) - window_s) > 1e-6:
        return ()
    return tuple(out)
