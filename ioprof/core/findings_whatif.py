"""What the analysis of ``ioprof whatif`` concludes: each alternative ranked against the
current pipeline, as typed values (words: ``render/whatif.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from ioprof.core.vocab import OverallInputBound


@dataclass(frozen=True)
class RankedAlternative:
    """One measured alternative against the user's current pipeline (the baseline), and against
    its control: the measurement that shares its storage and cache regime."""

    name: str
    img_per_s: float
    low: float | None
    high: float | None
    gain: float  # img/s ÷ the current pipeline's (the mean of its runs just before and after this one)
    beyond_noise: bool  # beyond the noise of its control (intervals apart and > the floor)
    busy_share: float | None  # img/s ÷ the compute ceiling: the accelerator's busy share
    data_wait_share: float
    dataset_prep_s: float | None = None  # its one-off cost scaled to the whole dataset
    dataset_prep_bytes: int | None = None
    control: str = "baseline"  # baseline | loose-on-scratch
    fix_gain: float | None = None  # img/s ÷ the control's (as ``gain`` where that is the current pipeline)
    storage_gain: float | None = None  # the control's img/s ÷ the baseline's: the storage move in its gain
    data_gain: float | None = None  # its gain over the baseline on the data's own storage
    data_gain_estimated: bool = False  # estimated from bytes per image against the storage read alone
    # the smallest change that counted: COMPARE_MIN_EFFECT, or how far the current pipeline moved
    # between its runs just before and after this one, where that is more
    floor: float | None = None


@dataclass(frozen=True)
class Ranking:
    """The alternatives ranked by img/s, and what the run says about them."""

    ranked: tuple[RankedAlternative, ...]  # fastest first, the baseline among them
    best: str  # the fix with the largest gain beyond the noise of its control, or ""
    baseline_input_bound: OverallInputBound
    compute_bound: bool  # the baseline is not input-bound: nothing upstream can speed training up
    storage_move: str = ""  # the control, when moving the loose files to the scratch storage alone helps
    # how far the current pipeline moved over the whole run (its fastest run ÷ its slowest − 1)
    drift: float | None = None
