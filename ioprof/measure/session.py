"""What every measuring command runs with, resolved once: the device and why, the run length,
the machine, NVML for the device's GPU — and the progress it reports while measuring.

The command builds a ``Session`` and hands it to its runner, so device resolution and tuning
happen in one place, and ``RunInfo`` is written the same way for a sweep and a placement.
"""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Protocol

import torch

from ioprof.core.config import RunLength
from ioprof.core.counts import ReadBack
from ioprof.core.results import MachineInfo, RunInfo
from ioprof.core.version import __version__
from ioprof.host.machine import machine_info
from ioprof.host.pagecache import PageRuns, held_any, read_back
from ioprof.host.telemetry import NvmlStatus, nvml_for_device


class Progress(Protocol):
    """Where a runner reports as it goes: plain status notes, and each finished measurement
    (a ceiling, a cell), which the command's renderer turns into a line."""

    def __call__(self, text: str) -> None: ...

    def measured(
        self, result: object, *, dataset: str = "", position: str = "", took_s: float = 0.0
    ) -> None: ...


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Session:
    """A measuring command's resolved setting: device, run length, machine and GPU telemetry."""

    command: str
    device: torch.device
    device_reason: str
    run: RunLength
    machine: MachineInfo
    nvml: NvmlStatus
    start_method: str
    started_at: str

    def run_info(
        self, *, interrupted: bool = False, finished: bool = True, read_back: ReadBack | None = None
    ) -> RunInfo:
        r = self.run
        return RunInfo(
            command=self.command,
            started_at=self.started_at,
            finished_at=now_iso() if finished else "",
            interrupted=interrupted,
            device=str(self.device),
            device_reason=self.device_reason,
            batch_size=r.batch_size,
            warmup_steps=r.warmup_steps,
            steps=r.max_steps,
            seconds=r.max_seconds,
            start_method=self.start_method,
            ioprof_version=__version__,
            min_steps=r.min_steps,
            target_rel_half_width=r.target_rel_half_width,
            decided_rel_half_width=r.decided_rel_half_width,
            read_back=read_back,
        )


def open_session(
    command: str, device: torch.device, device_reason: str, run: RunLength, start_method: str | None
) -> Session:
    """The session for a resolved device: reads the machine and opens NVML for its GPU."""
    gpu_name, nvml = nvml_for_device(device)
    return Session(
        command=command,
        device=device,
        device_reason=device_reason,
        run=run,
        machine=machine_info(gpu_name, nvml.driver or None, nvml.reason or None),
        nvml=nvml,
        start_method=start_method or multiprocessing.get_start_method(),
        started_at=now_iso(),
    )


def with_run(session: Session, run: RunLength) -> Session:
    return replace(session, run=run)


def put_back(evicted: PageRuns | None, since: float, progress: Progress) -> ReadBack | None:
    """The pages of a user's files the page cache held before a command's cold reads evicted them,
    read back in no more time than the command has measured ``since`` (so it never takes more
    than twice as long); None where it held none."""
    if evicted is None or not held_any(evicted):
        return None
    progress("reading back the pages of your files the page cache held before the cold reads…")
    return read_back(evicted, time.perf_counter() - since)
