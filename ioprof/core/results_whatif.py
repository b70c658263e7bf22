"""What ``ioprof whatif`` measured: each alternative, and the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ioprof.core.results import CellResult, ComputeCeiling, DatasetInfo, MachineInfo, RunInfo, StorageCeiling

if TYPE_CHECKING:
    from ioprof.core.findings_whatif import Ranking


# The user's pipeline is measured first, again after every AGAIN_EVERY alternatives, and last: how
# far the machine's pace moves over the run is the noise a change must exceed
# (``conclude.whatif.drift``); its runs after the first are named ``again(k)``.
AGAIN_EVERY = 4


def again(k: int) -> str:
    """The name of the user's pipeline measured the ``k``-th time (2, 3, …)."""
    return f"baseline-{k}"


def is_current(name: str) -> bool:
    """Whether an alternative is the user's pipeline as it is: its first run or one of its repeats."""
    return name == "baseline" or (name.startswith("baseline-") and name[9:].isdigit())


@dataclass(frozen=True)
class AlternativeResult:
    """One alternative ``ioprof whatif`` ran end to end (or why it could not here).

    ``name``: baseline | baseline-K (its K-th run, ``again``) | threads | decode_jpeg | gpu_decode | resized-256 | resized-320 | shards |
    loose-on-scratch | prefetch-N | in_order | persistent_workers | pin_memory | cache. ``why_not``: a code
    (``needs-cuda``, ``missing:torchdata``, ``already-small``, ``needs-workers``, ``failed: …``).
    ``where``: data (the dataset's own storage) | scratch | emulated. ``prep_s``/``prep_bytes``: the
    one-off cost of making its files from the sample (``sample_bytes`` of it).
    """

    name: str
    measured: bool
    why_not: str
    cell: CellResult | None
    where: str
    where_fs: str
    prep_s: float | None = None
    prep_bytes: int | None = None
    sample_bytes: int | None = None
    figures: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class WhatifResult:
    """``ioprof whatif``: the user's pipeline and the alternatives, each run end to end on a sample."""

    schema_version: int
    kind: str  # "whatif"
    run: RunInfo
    machine: MachineInfo
    config: dict[str, Any]
    dataset: DatasetInfo
    sample_files: int
    sample_bytes: int
    compute: ComputeCeiling
    setting: str  # the current loader setting (label), the baseline's
    scratch: str
    scratch_fs: str
    scratch_bytes: int  # the most the scratch folder held
    alternatives: tuple[AlternativeResult, ...]
    ranking: Ranking | None = None  # filled by ranking.rank, recomputed on load
    data_storage: StorageCeiling | None = None  # the data's own storage read alone, cold (copies' estimates)
    scratch_store: str = ""  # a prefix in the data's store the shards were written to and streamed from
