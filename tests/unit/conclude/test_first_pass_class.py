"""The first pass judged whole (``conclude.firstpass``): its class put before the window's only
where its own interval decides it — the rest of the pass reckoned at the window's wait share,
known within that share's interval."""

from __future__ import annotations

from builders import cell

from ioprof.conclude.firstpass import _judged
from ioprof.core.results_run import BeforeWindow, ObservedLoader
from ioprof.core.thresholds import MODERATELY_INPUT_BOUND_SHARE

# a window of 10 steps of 0.15 s, each waiting 4 ms ± 3 ms: 2.4 % [1.4–3.4] of its time
WINDOW = cell(wait=0.004, step=0.15, steps=10, jitter=0.003, workers=2, dataset="loader 1")


def _loader(before_wait_s: float) -> ObservedLoader:
    """A pass of 20 batches whose first 7, before the window, took 1 s and waited ``before_wait_s``."""
    before = BeforeWindow(seconds=1.0, first_batch_s=0.1, batches=7, wait_s=before_wait_s)
    return ObservedLoader(
        *("loader 1", 0, "training", "X", None, "", 2, 8, False, 2, False, False, "RandomSampler", "fork"),
        *(20, 1, "complete", 0, 0),
        before=before,
        batches_per_pass=20,
    )


def test_a_pass_whose_interval_straddles_a_class_is_not_put_before_its_window() -> None:
    """120 ms waited before the window: the pass's share is above the 5 % bar, but with the rest
    of the pass at the low end of the window's interval it is below — not decided, no verdict."""
    rest_s = 13 * (0.15 + 0.004)
    share = (0.12 + 13 * 0.004) / (1.0 + rest_s)
    window = WINDOW.wait_share()
    assert share > MODERATELY_INPUT_BOUND_SHARE > (0.12 + rest_s * window.low) / (1.0 + rest_s)
    assert _judged(_loader(0.12), WINDOW) is None


def test_a_pass_decided_beyond_its_window_is_its_verdict_with_its_interval() -> None:
    """500 ms waited before the window: the pass's interval lies in one class, above the window's."""
    found = _judged(_loader(0.5), WINDOW)
    assert found is not None and (found.pass_class, found.window_class) == ("moderately", "not")
    assert found.pass_low is not None and found.pass_high is not None
    assert MODERATELY_INPUT_BOUND_SHARE < found.pass_low < found.pass_share < found.pass_high
