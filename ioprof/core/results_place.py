"""What ``ioprof place`` measured: each candidate location, and the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ioprof.core.results import (
    ComputeCeiling,
    DatasetInfo,
    DecodeCeiling,
    MachineInfo,
    RunInfo,
    StorageCeiling,
)

if TYPE_CHECKING:
    from ioprof.core.findings_place import PlaceDecision, Recommendation


@dataclass(frozen=True)
class CandidateResult:
    """One place the data could live, as measured (or why it could not be)."""

    label: str
    path: str
    kind: str  # "current" | "candidate" | "emulated"
    status: str  # "ok" | "missing" | "not writable" | "full" | "too small" | "failed"
    reason: str
    fs_type: str
    mount_source: str
    ram_backed: bool
    sample_files: int
    sample_bytes: int
    write_mb_per_s: float | None  # copying the sample there: read + write + fsync
    storage: tuple[StorageCeiling, ...]
    free_bytes: int | None = None  # free space there before the sample was copied
    keeps_pages: bool | None = None  # its filesystem keeps read pages cached (sshfs drops them at each open)


@dataclass(frozen=True)
class PlaceResult:
    schema_version: int
    kind: str  # "place"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    dataset: DatasetInfo
    ram_available_bytes: int
    epochs: int
    compute: ComputeCeiling
    decode: tuple[DecodeCeiling, ...]
    candidates: tuple[CandidateResult, ...]
    decisions: tuple[PlaceDecision, ...] = ()  # filled by placement, recomputed on load
    recommendation: Recommendation | None = None  # filled by placement, recomputed on load
    ram_source: str = ""  # where ram_available_bytes comes from: the host, a cgroup limit, --ram
