"""What ``ioprof scale`` measured: each rank at each rank count, and the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ioprof.core.counts import MACHINE_WIDE_FETCH_METHODS
from ioprof.core.rates import share_left
from ioprof.core.results import (
    CellResult,
    DatasetInfo,
    MachineInfo,
    RunInfo,
    StorageCeiling,
    interval_fields,
)
from ioprof.core.stats import Interval, gaps, ratio_interval


def interval_sum(parts: list[Interval]) -> Interval:
    """A sum of figures measured side by side: ranks in lockstep (DDP) vary together, so their
    bounds add (a conservative interval; unknown when any part's is)."""
    value = sum(p.value for p in parts)
    if not parts or not all(p.known for p in parts):
        return Interval.unknown(value)
    return Interval(
        value, sum(p.low for p in parts), sum(p.high for p in parts), min(p.batches for p in parts)
    )


@dataclass(frozen=True)
class RankResult:
    """One rank of a ``ioprof scale`` run: its measured window, and the CPU it and its loader
    workers used during it."""

    rank: int
    host: str
    cell: CellResult
    cpu_s: float  # CPU time (user + system) of the rank's process and its workers in the window
    wall_s: float  # the window's wall-clock length
    host_cores: int = 0  # CPU cores usable on the rank's host
    compute_s_per_step: float = 0.0  # the accelerator's work per step, without waiting for other ranks
    # when each batch handed over in the window, then each still held ready at its close, was
    # made (s from the window's open: 0 or below, made before it)
    made_s: tuple[float, ...] = ()

    @property
    def cores_used(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def made_rate(self) -> Interval | None:
        """Batches a second the rank's loader made in the window, with its interval: from the first
        it made after the open over whole turns of its workers (one batch each) to the last it
        made before the close — a renewal count, with neither a start from idle workers nor a
        batch part made at either edge — or None with fewer than three such batches, or none
        recorded."""
        turn = self.cell.setting.concurrency
        made = sorted(m for m in self.made_s if 0 < m <= self.wall_s)
        made = made[: 1 + (len(made) - 1) // turn * turn]  # whole turns: each worker's cycles alike
        if len(made) < 3:
            return None
        seconds = gaps([m - made[0] for m in made[1:]])
        return ratio_interval([1.0] * len(seconds), seconds, turn)

    def drained(self) -> int:
        """Batches the loop took in the window beyond what the loader made in it: those handed over
        that were made before it opened, less those made in it and still held at its close (0
        where the makings were not recorded)."""
        handed = len(self.cell.wait_s)
        if len(self.made_s) < handed:
            return 0
        return sum(1 for m in self.made_s[:handed] if m <= 0) - (len(self.made_s) - handed)

    def _steps_per_s(self) -> tuple[Interval, bool]:
        """Steps a second the rank's window held, and whether that is its loader's making rate: the
        loop's own, unless the loop took more batches than the loader made in the window
        (``drained``) and the loader made them more slowly than it took them. Then it drained
        batches made before the window opened — read ahead while the first steps were slow (a
        late rank's first all-reduce, a first step's set-up) and handed over without a wait —,
        which no longer window would, and what the loader makes is the rate."""
        c = self.cell
        durations = c.step_durations_s()
        total = sum(durations)
        loop = ratio_interval([1.0] * len(durations), durations, c.setting.concurrency)
        loop = loop.centered_on(len(durations) / total if total > 0 else 0.0)
        made = self.made_rate() if self.drained() > 0 else None
        if made is not None and made.known and made.value < loop.value:
            return made, True
        return loop, False

    def wait_share(self) -> Interval:
        """The rank's data-wait share: its loop's own, or — where the loop drained batches made
        before the window (``_steps_per_s``) — what its steps leave at its loader's rate: each
        step is what it was, only fewer come a second (``rates.share_left``)."""
        c = self.cell
        own = c.wait_share()
        rate, made = self._steps_per_s()
        total = sum(c.step_durations_s())
        if not made or total <= 0:
            return own
        return share_left(rate, len(c.wait_s) / total, own)

    def throughput(self) -> Interval:
        """img/s of the rank's window (``_steps_per_s``): the images handed over, or — where the
        loop drained batches made before the window — what its loader made in it."""
        c = self.cell
        rate, made = self._steps_per_s()
        if not made or not c.steps:
            return c.throughput()
        per_batch = c.images / c.steps
        return Interval(rate.value * per_batch, rate.low * per_batch, rate.high * per_batch, rate.batches)

    def busy(self) -> Interval:
        """Share of the rank's wall time its accelerator computed (MLPerf Storage's AU: compute time ÷
        total time), with its interval: a step's compute at the rate of ``_steps_per_s``. Time in
        the all-reduce waiting for a late rank is not busy, nor is the time blocked waiting for
        data. (Files without the compute time: 1 − wait share.)"""
        c = self.cell
        if self.compute_s_per_step <= 0:
            w = c.wait_share()
            return Interval(1.0 - w.value, 1.0 - w.high, 1.0 - w.low, w.batches)
        rate, _ = self._steps_per_s()
        x = self.compute_s_per_step
        return Interval(rate.value * x, rate.low * x, rate.high * x, rate.batches).clipped(0.0, 1.0)


@dataclass(frozen=True)
class RankCountResult:
    """All ranks of one rank count in one cache regime (or why that count failed).

    ``storage``: the storage read alone (cold) by as many readers as the ranks' loaders run
    together, measured just before the ranks start; None where not measured (``storage_error``).
    """

    ranks: int
    regime: str  # cold | warm
    status: str  # ok | failed
    reason: str  # why it failed: the first rank that did, and how
    launch_s: float  # torchrun's start to its exit
    per_rank: tuple[RankResult, ...]
    storage: StorageCeiling | None = None
    storage_error: str = ""

    def aggregate(self) -> Interval:
        """img/s of all ranks together."""
        return interval_sum([r.throughput() for r in self.per_rank])

    def window_s(self) -> float:
        return max((r.cell.elapsed_s for r in self.per_rank), default=0.0)

    def fetched_bytes(self) -> int | None:
        """Bytes all ranks fetched from storage (None where any rank's count is unknown). A count of
        the whole host (NFS client statistics, the FUSE daemon's reads) is taken once per host — every
        rank on it recorded the same host-wide figure — never summed over its ranks."""
        if not self.per_rank or any(r.cell.fetched.bytes is None for r in self.per_rank):
            return None
        per_host: dict[str, list[int]] = {}
        own = 0
        for r in self.per_rank:
            b = r.cell.fetched.bytes or 0
            if r.cell.fetched.method in MACHINE_WIDE_FETCH_METHODS:
                per_host.setdefault(r.host, []).append(b)
            else:
                own += b
        return own + sum(max(v) for v in per_host.values())

    def fetched_mb_per_s(self) -> float | None:
        b, w = self.fetched_bytes(), self.window_s()
        return None if b is None or w <= 0 else b / 1e6 / w

    def fetched_bandwidth(self) -> Interval | None:
        """fetched_mb_per_s with an interval: the ranks' intervals added (``interval_sum``), a
        host-wide count's once per host, as its bytes are; None where a rank's has none."""
        value = self.fetched_mb_per_s()
        if value is None:
            return None
        own: list[Interval] = []
        per_host: dict[str, Interval] = {}
        for r in self.per_rank:
            bandwidth = r.cell.fetched_bandwidth()
            if bandwidth is None:
                return None
            if r.cell.fetched.method not in MACHINE_WIDE_FETCH_METHODS:
                own.append(bandwidth)
            elif r.host not in per_host or bandwidth.value > per_host[r.host].value:
                per_host[r.host] = bandwidth
        if value == 0:
            return Interval.exact(0.0)
        return interval_sum([*own, *per_host.values()]).centered_on(value)

    def requested_mb_per_s(self) -> float:
        w = self.window_s()
        return sum(r.cell.read_bytes_in_window for r in self.per_rank) / 1e6 / w if w > 0 else 0.0

    def cores_used(self, host: str | None = None) -> float:
        """CPU cores the ranks (and their workers) kept busy, on one host or on all."""
        return sum(r.cores_used for r in self.per_rank if host is None or r.host == host)

    def derived(self) -> dict[str, Any]:
        if self.status != "ok":
            return {}
        return {
            **interval_fields("aggregate_img_per_s", self.aggregate()),
            "aggregate_img_per_s": self.aggregate().value,
            "fetched_bytes": self.fetched_bytes(),
            "fetched_mb_per_s": self.fetched_mb_per_s(),
            **interval_fields("fetched_mb_per_s", self.fetched_bandwidth() or Interval.unknown(0.0)),
            "cores_used": self.cores_used(),
        }


@dataclass(frozen=True)
class ScaleResult:
    """``ioprof scale``: rank counts × cache regimes on one storage, each rank measured on its own."""

    schema_version: int
    kind: str  # "scale"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    dataset: DatasetInfo
    compute: str  # the compute's label: "simulated 2800 img/s (h100)", "real"
    sim_img_per_s: float | None  # per rank, when simulated
    backend: str  # gloo | nccl
    workers_per_rank: int
    gpus: int  # CUDA devices visible to rank 0 (the most ranks real compute can use per host)
    counts: tuple[RankCountResult, ...]
    conclusion: Any = None  # scaling.ScaleConclusion, recomputed on load

    def ranks_measured(self) -> list[int]:
        return sorted({c.ranks for c in self.counts if c.status == "ok"})
