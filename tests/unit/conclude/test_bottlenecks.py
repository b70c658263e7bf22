"""Which stage a verdict blames, decided from hand-built ceilings."""

from __future__ import annotations

from pathlib import Path

import pytest

from ioprof.datasets.discover import find_images
from ioprof.host.pagecache import filesystem_of
from ioprof.measure.storage import probe_storage


def test_probe_counts_fetched_bytes_unthrottled(small_set: Path) -> None:
    images = find_images(small_set)
    s = probe_storage(images.paths, 2, filesystem_of(small_set))
    if not s.cache.verified:
        pytest.skip(s.cache.note)
    assert s.fetched.bytes is not None and s.fetched.bytes >= 0.9 * s.bytes
