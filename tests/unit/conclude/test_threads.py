"""Threads against processes, the rule: a deficit that matters beyond both intervals is the GIL
held; within what changes no answer (10 %), threads serve as well; between, not decided."""

from __future__ import annotations

from ioprof.conclude.threads import call_of
from ioprof.core.stats import Interval


def test_only_a_deficit_beyond_what_changes_no_answer_and_beyond_the_intervals_is_the_gil() -> None:
    processes = Interval(206.0, 198.0, 215.0, 10)
    # PIL's decode on a loaded host: threads 8 % behind, tight intervals: Python's own steps, not the GIL
    assert call_of(Interval(190.0, 184.0, 195.0, 10), processes) == "as-fast"
    # a transform that holds the GIL: threads at about one worker's rate
    assert call_of(Interval(113.0, 106.0, 120.0, 10), processes) == "holds-the-gil"
    # 17 % behind, but the threads' interval reaches the processes': not decided
    assert call_of(Interval(170.0, 140.0, 200.0, 10), processes) == "undecided"
    # threads faster (their own pool has no batches to send between processes)
    assert call_of(Interval(185.0, 180.0, 190.0, 10), Interval(117.0, 98.0, 136.0, 10)) == "as-fast"
