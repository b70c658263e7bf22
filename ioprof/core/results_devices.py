"""What ``ioprof devices`` measured: each model on each device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ioprof.core.results import MachineInfo, RunInfo, interval_fields
from ioprof.core.stats import Interval, ratio_interval


@dataclass(frozen=True)
class DeviceCell:
    """One model at one batch size on one device setup (or why it was not measured there).

    ``step_s``: seconds per measured training step (forward, backward, update; under DDP its
    all-reduce), per device; ``samples_per_step``: the samples all devices trained per step.
    """

    model: str
    setup: str  # cpu | 1 gpu | N gpus
    devices: int
    batch_size: int  # per device
    measured: bool
    why_not: str
    step_s: tuple[float, ...] = ()
    samples_per_step: int = 0
    params: int = 0
    gradient_bytes: int = 0  # what DDP all-reduces each step
    looks: int = 1  # how often a stopping rule looked at its interval (``stats.LOOKS``), or 1

    def throughput(self) -> Interval:
        """samples/s with its 95 % interval (batch means over the steps)."""
        return ratio_interval(
            [float(self.samples_per_step)] * len(self.step_s), list(self.step_s), 1, self.looks
        )

    def derived(self) -> dict[str, Any]:
        return interval_fields("samples_per_s", self.throughput()) if self.measured else {}


@dataclass(frozen=True)
class DevicesResult:
    """``ioprof devices``: does a GPU, and a second one, pay off for a model?"""

    schema_version: int
    kind: str  # "devices"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    gpus: int
    cells: tuple[DeviceCell, ...]
