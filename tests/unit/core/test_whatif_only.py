"""``ioprof whatif --only``: which alternatives a name picks, and a name that picks none refused."""

from __future__ import annotations

import pytest

from ioprof.commands.whatif import parse_only
from ioprof.core.config import WHATIF_ALTERNATIVES, whatif_wants


def _picked(text: str) -> list[str]:
    only = parse_only(text)
    return [a for a in WHATIF_ALTERNATIVES if whatif_wants(only, a)]


def test_a_name_picks_itself_and_a_name_without_its_number_picks_each() -> None:
    assert _picked("shards") == ["shards"]
    assert _picked("resized, prefetch") == [
        "resized-256",
        "resized-320",
        "prefetch-1",
        "prefetch-4",
        "prefetch-8",
    ]
    # "threads" is the thread-pool loader, not the threads reading each worker's batch
    assert _picked("threads") == ["threads"]
    assert _picked("threads-per-worker") == ["threads-per-worker-4"]
    assert all(whatif_wants(None, a) for a in WHATIF_ALTERNATIVES)


def test_a_name_that_picks_nothing_is_refused_with_the_names() -> None:
    with pytest.raises(ValueError, match=r"'resize' is no alternative; choose among threads, decode_jpeg"):
        parse_only("shards,resize")
    with pytest.raises(ValueError, match="at least one"):
        parse_only(" , ")


def test_every_alternative_has_words_in_the_report() -> None:
    from ioprof.render.whatif import ALTERNATIVES

    assert set(WHATIF_ALTERNATIVES) <= set(ALTERNATIVES)
