"""``ioprof devices``' conclusion: per model and batch size, what a GPU gains over the CPU, what N
GPUs gain over one (scaling efficiency), and how much of an N-GPU step communication took. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ioprof.core.results_devices import DeviceCell, DevicesResult
from ioprof.core.stats import Interval, quotient
from ioprof.core.thresholds import MULTI_DEVICE_PAYS_EFFICIENCY


@dataclass(frozen=True)
class Payoff:
    model: str
    batch_size: int
    cpu: DeviceCell | None
    one: DeviceCell | None  # one GPU
    multi: DeviceCell | None  # N GPUs under DDP
    gpu_speedup: float | None  # one GPU ÷ CPU
    efficiency: Interval | None  # N GPUs ÷ (N × one GPU), bounds from both intervals
    communication_share: float | None  # of the N-GPU step: time beyond the one-GPU step
    pays: str  # yes | no | barely | unknown


def _measured(cells: list[DeviceCell], pred: Callable[[DeviceCell], bool]) -> DeviceCell | None:
    return next((c for c in cells if pred(c)), None)


def _efficiency(one: DeviceCell, multi: DeviceCell) -> Interval:
    return quotient(multi.throughput(), one.throughput(), multi.devices)


def payoff(cells: list[DeviceCell]) -> Payoff:
    model, batch = cells[0].model, cells[0].batch_size
    cpu = _measured(cells, lambda c: c.setup == "cpu")
    one = _measured(cells, lambda c: c.setup == "1 gpu")
    multi = _measured(cells, lambda c: c.devices > 1)
    speedup = eff = comm = None
    pays = "unknown"
    if cpu and one and cpu.measured and one.measured:
        speedup = one.throughput().value / cpu.throughput().value
    if one and multi and one.measured and multi.measured:
        eff = _efficiency(one, multi)
        t1 = sum(one.step_s) / len(one.step_s)
        tn = sum(multi.step_s) / len(multi.step_s)
        comm = max(0.0, (tn - t1) / tn)
        faster = one.throughput().high < multi.throughput().low if eff.known else eff.value > 1
        if not faster:
            pays = "no"
        elif eff.known and eff.low >= MULTI_DEVICE_PAYS_EFFICIENCY:
            pays = "yes"
        else:
            pays = "barely"
    return Payoff(model, batch, cpu, one, multi, speedup, eff, comm, pays)


def payoffs(result: DevicesResult) -> list[Payoff]:
    keys = list(dict.fromkeys((c.model, c.batch_size) for c in result.cells))
    return [payoff([c for c in result.cells if (c.model, c.batch_size) == k]) for k in keys]
