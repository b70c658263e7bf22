"""What a loader's recorder needs from the watcher of its process, and how a watch is set up:
the seam between ``recorder`` (one DataLoader) and ``observer`` (the process)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ioprof.host.fetched import MountCounters
    from ioprof.host.telemetry import GpuSampler
    from ioprof.measure.inside import InsideRecorder
    from ioprof.observe.window import GpuMarks, Reading

ENV = "IOPROF_WATCH"


@dataclass(frozen=True)
class WatchConfig:
    """How ``ioprof run`` / ``ioprof.watch`` observe: the window and the probes after it."""

    out_dir: str = ""  # where observation files go ("" keeps them in memory)
    warmup_steps: int = 5
    steps: int = 100
    seconds: float | None = 60.0
    probe: bool = True
    probe_seconds: float = 10.0
    inside: bool = True  # stages timed in the workers, their memory and threads read


class Watching(Protocol):
    """The watcher as a loader's recorder sees it (``observer.Watcher``)."""

    config: WatchConfig
    optimizer_steps: int  # the process's optimizer steps so far
    step_threads: set[int]  # the threads that stepped an optimizer
    pins: Any  # the pin-memory copies' times (``pins.PinTimes``), or None
    probe_pause_s: float  # how long the probe paused the training (0 before it ran)

    def inside_recorder(self, rec: Any) -> InsideRecorder: ...

    def gpu_marks(self) -> GpuMarks | None: ...

    def gpu_sampler(self) -> GpuSampler | None: ...

    def read_counters(self, rec: Any, pids: Sequence[int], at_s: float, cpu: bool = True) -> Reading: ...

    def mount_counters(self, root: str) -> MountCounters | None: ...

    def window_finished(self, rec: Any) -> None: ...

    def pass_ended(self, rec: Any) -> None: ...
