"""What a dataset reads (``Source``), and what every module of ``sources/`` answers about the
datasets it knows (``SourceKind``): a kind of source is one module that implements it, named in
``sources.KINDS``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ioprof.sources.memory import MemoryView

ITEMS_LISTED = 100_000  # a source lists at most this many of its files or URLs
MEMBERS_SAMPLED = 4096  # and of the samples it reads at their place in a file of many, this many


def spread(n: int, limit: int) -> Sequence[int]:
    """The positions of ``n`` items a source lists: all of them, or ``limit`` spread evenly over
    them (the first ``limit`` of an ImageFolder or of an image folder's rows are its first classes
    only, whose files may be smaller or larger than the rest)."""
    return range(n) if n <= limit else [i * n // limit for i in range(limit)]


@dataclass(frozen=True)
class Source:
    """What one dataset reads.

    ``kind``: the ``KIND`` of the module that found it (files | shards | arrow | custom | opened).
    ``items``: the files or URLs it reads (at most ``ITEMS_LISTED``). ``root``: the folder they lie
    under, on one filesystem ("" for URLs). ``where``: where the bytes come from in words (a folder,
    ``http://host:port``, a command). ``counted_by``: how the bytes its loader draws are counted —
    ``filesystem`` (the mount's own counters, or block I/O), ``network`` (the interface its host is
    reached by: what arrived, host-wide), or ``own-rchar`` (what the loader's processes were
    handed through pipes and TLS sockets: a ``pipe:`` command's output). ``file_a_sample``: each
    item is the file of one sample (an image a file), not a file of many (a shard, an Arrow file):
    read alone, a file a second is a sample a second (what files of many samples hold, where they
    say it themselves: ``sources.samples_of``). ``members``: where a dataset reads each sample at
    its own place in a file of many (an archive's members, read one by one), a random sample of
    them as (file, offset, bytes): read alone in a random order, as a random sampler asks for them,
    not whole.
    """

    kind: str
    label: str
    items: tuple[str, ...]
    root: str
    where: str
    counted_by: str
    count: int | None = None  # items in all, where more than were listed
    file_a_sample: bool = False  # each item is one sample's file, read whole
    # the samples its items hold in all, where the dataset says it without a read (an archive
    # reader's list of members; a streamed dataset's are counted later: ``sources.samples_of``)
    samples: int | None = None
    members: tuple[tuple[str, int, int], ...] = ()  # at most ``MEMBERS_SAMPLED``, in random order
    # the format of the files they lie in: a tar member's offset is its bytes', a zip member's its
    # local header's, an LMDB record's its bytes' in the database file (``sources.members_of``)
    members_in: str = "tar"
    # the bytes its items hold in all, where the dataset says it without a read (an MDS index)
    item_bytes: int | None = None
    # the keys its samples are read by, a random sample of them in random order, where its samples
    # are records of a database it reads by key (an LMDB database's): where each lies is asked later
    keys: tuple[bytes, ...] = ()

    @property
    def urls(self) -> bool:
        return not self.root

    @property
    def stated_bytes_per_sample(self) -> float | None:
        """The bytes a sample takes, where the dataset states both its bytes and its samples (an
        index) without a read; None otherwise."""
        return self.item_bytes / self.samples if self.item_bytes and self.samples else None


class SourceKind(Protocol):
    """One kind of source (a module of ``sources/``): what a dataset it knows reads, and a copy of
    that dataset reading a sample of it from memory (the decode ceiling's input), or why not."""

    KIND: str

    def find(self, dataset: Any) -> Source | None:
        """What ``dataset`` reads, where this kind knows it; None otherwise."""
        ...

    def in_memory(
        self, source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
    ) -> MemoryView | str:
        """A copy of ``dataset`` that reads a sample of ``source`` from memory, or why not.
        ``read``: loose files already read (by the storage read alone), to draw the sample from."""
        ...
