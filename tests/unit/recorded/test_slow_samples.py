"""Slow samples on recorded runs (``python tests/support/record.py slow-samples``): ``ioprof run``
on a loop whose dataset has a slow path of its own (one sample in 50 twenty times the others), and
on the same loop without it. The finding's rule and its words, replayed from the measurements."""

from __future__ import annotations

from replay import replay

from ioprof.render.findings import finding


def _found(name: str) -> list:  # type: ignore[type-arg]
    result, _ = replay(f"slow-samples/{name}")
    return [f for f in result.analysis.findings if f.kind == "slow-samples"]


def test_slow_samples_are_found_named_and_said_with_what_they_cost() -> None:
    (f,) = _found("slow")
    assert f.dataset == "loader 1" and f.setting == "2 workers"
    # one sample in 50 takes 200 ms where the others take 10: the slowest named are among them
    assert f.slowest and all(int(index) % 50 == 25 and seconds > 0.15 for index, seconds, _ in f.slowest)
    assert f.median_s < f.fence_s < 0.05
    # at least 5 % of the loop's time at the interval's low end, the share of the wait beyond it
    assert 0.05 <= f.loop[1] <= f.loop[0] <= f.loop[2] and f.wait[0] >= f.loop[0]
    words = finding(f)
    assert words.startswith("loader 1 2 workers: slow samples hold the loop back")
    assert "in_order=False" in words and all(f"#{index} " in words for index, _, _ in f.slowest)
    # handed over as they are made, the other worker goes on behind a slow batch: the loop waits less
    assert f.unordered_saves is not None and 0 < f.unordered_saves < f.wait[0]
    assert "replayed so, the loop would wait" in words


def test_the_same_loop_without_its_slow_path_gets_no_finding() -> None:
    """Broken once (the finding made wherever a replay was, whatever it cost): this test failed."""
    assert _found("control") == []
