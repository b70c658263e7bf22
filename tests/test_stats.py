from __future__ import annotations

import math

import pytest

from ioprof.stats import percentile, share_below, summarize


def test_percentile_interpolates_like_numpy() -> None:
    xs = [4.0, 1.0, 3.0, 2.0]
    assert percentile(xs, 0) == 1.0
    assert percentile(xs, 100) == 4.0
    assert percentile(xs, 50) == 2.5
    assert percentile(xs, 25) == pytest.approx(1.75)


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summarize_exact() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s.n, s.mean, s.min, s.max, s.p50) == (5, 3.0, 1.0, 5.0, 3.0)
    assert s.std == pytest.approx(math.sqrt(2.5))
    assert s.p5 == pytest.approx(1.2)
    assert s.p95 == pytest.approx(4.8)
    assert s.rel_std_error == pytest.approx(math.sqrt(2.5) / math.sqrt(5) / 3.0)


def test_single_sample_has_no_spread() -> None:
    s = summarize([7.0])
    assert s.std == 0.0 and s.rel_std_error == 0.0


def test_share_below() -> None:
    assert share_below([10, 40, 49.9, 50, 90], 50) == pytest.approx(0.6)
