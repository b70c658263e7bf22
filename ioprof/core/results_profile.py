"""What ``ioprof profile`` measured: a step per phase and per layer, and an epoch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ioprof.core.results import DatasetInfo, MachineInfo, RunInfo
from ioprof.core.stats import Interval, ratio_interval


@dataclass(frozen=True)
class PhaseTimes:
    """Per measured minibatch: seconds in each phase of the training step."""

    data_wait_s: tuple[float, ...]
    copy_s: tuple[float, ...]
    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    update_s: tuple[float, ...]
    loss_read_s: tuple[float, ...]
    images: tuple[int, ...]

    def compute_s(self) -> list[float]:
        """Per step: everything but the data wait."""
        return [
            sum(x)
            for x in zip(
                self.copy_s, self.forward_s, self.backward_s, self.update_s, self.loss_read_s, strict=True
            )
        ]

    def step_s(self) -> list[float]:
        return [w + c for w, c in zip(self.data_wait_s, self.compute_s(), strict=True)]

    def phase(self, name: str) -> tuple[float, ...]:
        return tuple(getattr(self, f"{name}_s"))

    def mean_interval(self, name: str) -> Interval:
        """A phase's mean seconds per step with its 95 % interval (batch means)."""
        xs = list(self.phase(name))
        return ratio_interval(xs, [1.0] * len(xs))


@dataclass(frozen=True)
class LayerTimes:
    """One leaf module: seconds per step in its forward and backward (summed over its calls)."""

    name: str
    kind: str
    params: int
    activation_bytes: int
    calls_per_step: int
    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    share_of_step: float  # (mean forward + mean backward) / the mean compute step

    def mean_s(self) -> float:
        n = max(1, len(self.forward_s))
        return (sum(self.forward_s) + sum(self.backward_s)) / n


@dataclass(frozen=True)
class OperatorTime:
    name: str
    self_s: float  # over the traced steps
    share: float  # of all operators' self time
    calls: int


@dataclass(frozen=True)
class MeasuredEpoch:
    """A real epoch, run to check the prediction: its images and seconds."""

    images: int
    steps: int
    seconds: float
    regime: str


@dataclass(frozen=True)
class ProfileResult:
    """``ioprof profile``: one training step taken apart, and the epoch time it predicts."""

    schema_version: int
    kind: str  # "profile"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    dataset: DatasetInfo
    setting: str  # the loader setting profiled
    batch_size: int
    epoch_images: int
    startup_s: float  # from a fresh iterator to its first batch (worker start-up, each epoch)
    cold: PhaseTimes  # the first epoch: files from storage (evicted before and after each read)
    warm: PhaseTimes | None  # later epochs, when the dataset stays in RAM
    hooked: PhaseTimes  # the steps timed with the layer hooks on (their cost: against ``warm``/``cold``)
    layers: tuple[LayerTimes, ...]
    operators: tuple[OperatorTime, ...]
    trace_file: str
    measured_epoch: MeasuredEpoch | None = None
    prediction: Any = None  # findings.EpochPrediction, recomputed on load


# -- what the profile concludes (``conclude.profile``) ----------------------------------------------


@dataclass(frozen=True)
class EpochPrediction:
    """An epoch's time predicted from the profile, in one cache regime, split into its parts."""

    regime: str  # cold (the first epoch: from storage) | warm (later epochs: from RAM)
    images: int
    steps: int  # epoch images // batch (the loader drops the last partial batch)
    startup_s: float  # the workers' start-up, once an epoch
    input_s: float  # steps × mean data wait
    compute_s: float  # steps × mean compute (copy, forward, backward, update, loss read)
    total_s: float
    total_low_s: float | None  # the 95 % interval of the per-step mean, carried to the epoch
    total_high_s: float | None


@dataclass(frozen=True)
class ProfileConclusions:
    """What the profile says: the epoch predictions, the check, the hooks' cost, the top layer."""

    predictions: tuple[EpochPrediction, ...]
    check_error: float | None  # (predicted cold − measured) / measured, when an epoch was measured
    hooks_cost: float | None  # compute step with layer hooks ÷ without − 1
    layers_cover: float | None  # Σ layer forward+backward ÷ the forward+backward phases
    top_layer: str
