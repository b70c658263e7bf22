"""A run's loader record (as the observer writes it) → its fetched figure's pieces."""

from __future__ import annotations

from typing import Any

from ioprof.core.counts import IoCounts
from ioprof.observe.result import _fetched, _fetched_segments


def _piece(seconds: float, net: int) -> dict[str, Any]:
    return {
        "seconds": seconds,
        "read_bytes": 0,
        "read_chars": net,
        "own_chars": net,
        "processes": 1,
        "nfs_bytes": None,
        "daemon_bytes": None,
        "net_bytes": net,
    }


def _loader(pieces: list[dict[str, Any]], net: int) -> dict[str, Any]:
    return {
        "source": {"counted_by": "network", "where": "http://shards"},
        "mount": {"net_bytes": net, "iface": "veth0", "spans": 1},
        "settings": {"dataset_root": ""},
        "pieces": pieces,
    }


def test_pieces_counted_as_the_whole_are_its_segments_only_where_they_add_up() -> None:
    pieces = [_piece(0.5, 500_000), _piece(0.6, 640_000), _piece(0.5, 480_000)]
    io = IoCounts(0, 1_620_000, 1, 1.6, 1_620_000)
    loader = _loader(pieces, 1_620_000)
    whole = _fetched(loader, io)
    assert whole is not None and whole.method == "interface-rx" and whole.bytes == 1_620_000
    assert _fetched_segments(loader, io, whole) == ((0.5, 500_000), (0.6, 640_000), (0.5, 480_000))
    # a piece lost between two readings: its bytes are missing from the pieces, so no segments
    short = _loader(pieces[:1] + pieces[2:], 1_620_000)
    assert _fetched_segments(short, IoCounts(0, 1_620_000, 1, 1.6, 1_620_000), whole) == ()
    # the seconds must add up too
    assert _fetched_segments(loader, IoCounts(0, 1_620_000, 1, 2.0, 1_620_000), whole) == ()


def test_a_dataset_whose_files_were_not_found_has_its_bytes_unknown_and_says_why() -> None:
    """A dataset that opens a zip on sshfs lazily in each worker names no file: no filesystem's
    counter can be chosen, and block I/O (which cannot see a FUSE mount) must not read 0.00."""
    from ioprof.render import words

    loader = {"source": None, "mount": {"spans": 2}, "settings": {"dataset_root": ""}, "pieces": []}
    f = _fetched(loader, IoCounts(0, 1_280_000, 2, 1.0))
    assert f is not None and f.bytes is None and not f.known
    assert words.fetched(f).startswith("unknown: the files the dataset reads were not found")
