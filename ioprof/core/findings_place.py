"""What the analysis of ``ioprof place`` concludes: each location's decision and the one
recommended, as typed values (words: ``render/place.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlaceDecision:
    """What one location would give training over the run's epochs, and whether copying there pays.

    ``reading_epochs``: the epochs that read the storage there — the first only when the dataset
    fits in the RAM the page cache can use *and* the filesystem keeps read pages (sshfs drops them
    at every open), every epoch otherwise. Later epochs from the page cache run at ``warm_img_per_s``
    (compute and decode only). ``total_s``: all the epochs; a candidate's saving is the current
    location's total minus its own, and the copy pays when the saving exceeds the copy.
    """

    label: str
    kind: str
    best_workers: int
    predicted_img_per_s: float
    limited_by: str  # storage | decode | compute
    busy_share: float  # predicted / compute ceiling (MLPerf Storage's accelerator utilization)
    keeps_busy: bool
    storage_headroom: float  # storage img/s at best_workers / compute ceiling
    predicted_by_workers: dict[str, float]
    epoch_s: float  # an epoch that reads the storage
    copy_s: float | None
    saved_s: float | None  # over all the epochs, vs the current location
    copy_pays_off: bool | None
    fits: bool = True  # the whole dataset fits in the free space there
    reading_epochs: int = 0
    warm_img_per_s: float | None = None
    total_s: float = 0.0
    keeps_pages: bool | None = None
    # MLPerf Storage's figure: the most accelerators of this compute that the storage alone keeps
    # at least 90 % busy, from its fastest measured concurrency's rate at the 95 % interval's low end
    accelerators_fed: int = 0
    accelerators_at: int = 0  # the readers that rate was measured at


@dataclass(frozen=True)
class Recommendation:
    """``ioprof place``'s one decision: keep, move, keep because the copy does not pay, or none
    keeps the accelerator busy. ``alternative``: for keep-copy-does-not-pay, the faster location
    not worth the copy (its label, img/s, copy and saving)."""

    action: str  # keep | move | keep-copy-does-not-pay | none-suffices | nothing-measured
    location: str
    predicted_img_per_s: float
    best_workers: int
    demand_img_per_s: float
    simulated_demand: bool
    busy_share: float
    limited_by: str
    storage_headroom: float
    copy_s: float | None
    saved_s: float | None
    copy_pays_off: bool | None
    epochs: int
    threshold: float
    reading_epochs: int = 0  # epochs that read the current location's storage
    current_keeps_pages: bool | None = None
    current_object_store: bool = False  # the data is in an object store: read by GETs every epoch
    fits_in_ram: bool = False
    alternative: tuple[str, float, float, float] | None = None
