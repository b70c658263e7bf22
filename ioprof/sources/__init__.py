"""Where a dataset's bytes come from, one module per kind of source, each implementing
``source.SourceKind``: ``custom`` (a dataset that names what it reads through
``ioprof_source()``), ``files`` (loose files a dataset lists: ImageFolder, timm's ImageDataset,
through Subset and ConcatDataset), ``shards`` (tar shards by URL: WebDataset, local,
``http(s)://``, ``pipe:``), ``arrow`` (a Hugging Face ``datasets.Dataset``: the Arrow files it
memory-maps), ``streamed`` (a Hugging Face ``IterableDataset``: the data files its builder
streams), ``mds`` (a MosaicML Streaming dataset: the shards its index lists, in its remote or its
cache), ``archive`` (images in tar archives read by member: timm's tar reader), and
``opened`` (what a loader's workers hold open, read from the kernel, for a dataset none of these
knows).

Each answers the same questions, so that commands never test a dataset's class: what does it
read (``find``: the first of ``KINDS`` that knows it), a copy of the pipeline that reads a sample
from memory (``in_memory``), and, from the ``Source`` alone, read that alone and cold
(``read_alone``), its size and storage (``describe``) and how the bytes it draws are counted
(``Source.counted_by``). A new kind of source is a module with ``KIND``, ``find`` and
``in_memory``, named in ``KINDS``.

May import: ``ioprof.measure``, ``ioprof.datasets``, ``ioprof.host``, ``ioprof.core``.
"""

from __future__ import annotations

import functools
import os
import random
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ioprof.core.results import DatasetInfo, StorageCeiling
from ioprof.sources import archive, arrow, custom, files, lmdbfile, mds, memory, opened, shards, streamed
from ioprof.sources.memory import MemoryView
from ioprof.sources.source import Source, SourceKind

if TYPE_CHECKING:
    from ioprof.host.pagecache import PageRuns

__all__ = [
    "KINDS",
    "Source",
    "SourceKind",
    "archive",
    "arrow",
    "custom",
    "files",
    "find",
    "in_memory",
    "lmdbfile",
    "mds",
    "memory",
    "opened",
    "read_alone",
    "shards",
    "streamed",
]

# The storage read alone: at least this many items (more at more readers), for at most this long.
READ_ALONE_ITEMS = 200
READ_ALONE_ITEMS_PER_READER = 50

# the kinds that know a dataset by itself, asked in this order (what a dataset says of itself first)
KINDS: tuple[SourceKind, ...] = (custom, mds, files, shards, arrow, streamed, archive, lmdbfile)
BY_KIND: dict[str, SourceKind] = {k.KIND: k for k in (*KINDS, opened)}


def find(dataset: Any) -> Source | None:
    """What ``dataset`` reads, from the first kind of source that knows it; None when none does."""
    for kind in KINDS:
        found = kind.find(dataset)
        if found is not None:
            return found
    return None


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None = None
) -> MemoryView | str:
    """A copy of ``dataset`` that reads a sample of its source from memory, or why not.
    ``read``: loose files already read (by ``read_alone``): the sample is drawn from them."""
    return BY_KIND[source.kind].in_memory(source, dataset, workers=workers, read=read)


def from_opened(paths: list[str]) -> Source:
    """The files a loader's workers were seen holding open (``opened``), as a source."""
    return opened.source_of(paths)


def zips_held(paths: list[str], samples: int | None) -> Source | None:
    """Zip archives a loader's workers held open, read by member where their images are its
    samples (``opened.zips_held``); None otherwise."""
    return opened.zips_held(paths, samples)


def unknown(dataset: Any) -> str:
    """Why no source knows what ``dataset`` reads, in one line."""
    names = ", ".join(files.FILE_LIST_ATTRIBUTES[:6])
    return (
        f"{type(dataset).__name__} does not say what it reads: no list of files ({names}…, on it or on "
        f"its {'/'.join(files.HOLDER_ATTRIBUTES)}), no shard URLs (a WebDataset pipeline), no "
        f"Arrow or data files (a Hugging Face dataset"
        + (" held in memory: it has none" if arrow.holder(dataset) is not None else "")
        + f"), no {custom.SOURCE_METHOD}()"
    )


def read_alone(
    source: Source,
    readers: int,
    *,
    max_seconds: float,
    bytes_per_sample: float | None = None,
    keep: dict[str, bytes] | None = None,
    found: PageRuns | None = None,
    in_order: bool = False,
) -> StorageCeiling:
    """The source read alone at ``readers`` concurrent readers: files cold (evicted, verified),
    URLs streamed whole (every byte crosses the network), and the samples of a source read by
    member (an archive's) each at its place, in a random order — unless the loader asks for them
    ``in_order`` (a sequential sampler), which reads its files through, as whole files are read.
    ``keep``: filled with the first loose files read (what a copy in memory needs), so that they
    are not read twice. ``found``: filled with the pages of the files that the page cache held when
    they were evicted (to read back)."""
    at_least = max(READ_ALONE_ITEMS, READ_ALONE_ITEMS_PER_READER * readers)
    count = min(len(source.items), at_least)
    sample = random.Random(0).sample(list(source.items), count)
    if source.root:
        from ioprof.host.pagecache import filesystem_of
        from ioprof.measure.storage import probe_storage

        taken = members_of(source, at_least) if not in_order else ()
        if taken:
            with archive.MemberReads(source.members_in) as read:
                ceiling = probe_storage(
                    [path for path, _, _ in taken],
                    readers,
                    filesystem_of(taken[0][0]),
                    max_seconds=max_seconds,
                    root=source.root,
                    found=found,
                    read_member=lambda i: read(*taken[i]),
                    places=[(offset, size) for _, offset, size in taken],
                )
            # a database's records need not be one a sample: the samples/s its bandwidth feeds
            if source.kind == lmdbfile.KIND and bytes_per_sample:
                return _fed_by_bandwidth(ceiling, bytes_per_sample)
            return ceiling
        ceiling = probe_storage(
            sample,
            readers,
            filesystem_of(sample[0]),
            max_seconds=max_seconds,
            root=source.root,
            keep=keep,
            keep_bytes=memory.MEMORY_SAMPLE_BYTES if source.file_a_sample else 0,
            found=found,
        )
        if bytes_per_sample and not source.file_a_sample:  # a file of many samples (a shard)
            ceiling = _fed_by_bandwidth(ceiling, bytes_per_sample)
    else:
        from ioprof.measure.streams import probe_streams

        ceiling = probe_streams(
            sample,
            shards.opened,
            readers,
            bytes_per_sample=bytes_per_sample,
            where=source.where,
            max_seconds=max_seconds,
        )
    # files of many samples, how many not known: its files/s is no img/s
    return ceiling if bytes_per_sample or source.file_a_sample else replace(ceiling, samples_unknown=True)


def _fed_by_bandwidth(ceiling: StorageCeiling, bytes_per_sample: float) -> StorageCeiling:
    """The samples/s a read's bandwidth feeds, at ``bytes_per_sample`` a sample."""
    return replace(
        ceiling, img_per_s=ceiling.read_mb_per_s * 1e6 / bytes_per_sample, bytes_per_sample=bytes_per_sample
    )


def members_of(source: Source, count: int) -> tuple[tuple[str, int, int], ...]:
    """The first ``count`` of the samples a source reads by member (in random order): an archive's,
    listed as it was found; a database's, listed when first asked — by the probe, once the window
    is over — and kept."""
    if source.members or source.kind != lmdbfile.KIND:
        return source.members[:count]
    return _records_listed(source, count)


@functools.lru_cache(maxsize=16)
def _records_listed(source: Source, count: int) -> tuple[tuple[str, int, int], ...]:
    return lmdbfile.members(source, count)


def samples_of(source: Source) -> int | None:
    """The samples a source's items hold in all, where the dataset said it (an archive reader) or
    its files say it themselves (a streamed dataset's Parquet footers, all of them listed), read
    when first asked — by the probe or the dataset's description, once the window is over, never
    as the loader starts — and kept."""
    if source.samples is not None or source.kind != streamed.KIND:
        return source.samples
    return _rows_counted(source)


@functools.lru_cache(maxsize=16)
def _rows_counted(source: Source) -> int | None:
    return streamed.rows(source)


def bytes_per_sample(source: Source | None) -> float | None:
    """The bytes a sample takes, where the source's own files say how many samples they hold (all
    of them listed); None otherwise."""
    if source is not None and source.stated_bytes_per_sample is not None:
        return source.stated_bytes_per_sample
    if source is None or not source.root or source.file_a_sample:
        return None
    samples = samples_of(source)
    if not samples:
        return None
    try:
        return sum(os.path.getsize(path) for path in source.items) / samples
    except OSError:
        return None


def seen_in_passing(info: DatasetInfo) -> DatasetInfo:
    """The description of files seen open for a sample each, as what it says of the dataset: the
    folder they lie in and what keeps them, not its size (they are a few of its files, not all)."""
    return replace(
        info,
        path=os.path.dirname(info.path) if os.path.isfile(info.path) else info.path,
        files=None,
        total_bytes=None,
        mean_file_bytes=None,
        mean_width_px=None,
        mean_height_px=None,
        bits_per_pixel=None,
    )


# A URL source's size: this many of its items are asked for theirs (HTTP HEAD), and scaled.
SIZED_URLS = 8


def describe(source: Source, label: str, samples: int | None = None) -> DatasetInfo:
    """What is known of a source's size and storage; None where it could not be read.
    ``samples``: the dataset's length, where it has one (bytes per sample = its bytes ÷ them), or
    what its files say they hold."""
    samples = samples if samples is not None else samples_of(source)
    if source.root:
        from ioprof.datasets.discover import ImageList
        from ioprof.datasets.discover import describe as describe_files

        n = len(source.items)
        info = describe_files(
            ImageList(source.root, source.items, (0,) * n, ("",), "listed"), label, False, stat_limit=2000
        )
        if source.count is not None and source.count > n:  # the listed items are the first of more
            scale = source.count / n
            total = round(info.total_bytes * scale) if info.total_bytes is not None else None
            info = replace(info, files=source.count, total_bytes=total)
        if source.file_a_sample:
            return replace(info, samples=samples)
        if source.kind == "arrow" and info.keeps_pages is False:
            # a FUSE mount drops a file's pages when it is opened again; an Arrow file is opened and
            # mapped once, and its faulted pages stay while it is mapped — whether a later epoch
            # comes from them depends on RAM and on who else opens it: not known, so not claimed
            info = replace(info, keeps_pages=None)
        # shards, archives: a file holds many samples (bytes per sample: from the probe, where the
        # dataset has no length)
        return replace(
            info,
            mean_file_bytes=info.total_bytes / samples if info.total_bytes is not None and samples else None,
            mean_width_px=None,
            mean_height_px=None,
            bits_per_pixel=None,
            samples=samples,
        )
    count = source.count or len(source.items)
    total = source.item_bytes  # where the dataset states it; else asked of a few items and scaled
    if total is None:
        sizes = [shards.size_of(u) for u in source.items[:SIZED_URLS]]
        known = [s for s in sizes if s is not None]
        total = round(sum(known) / len(known) * count) if known and len(known) == len(sizes) else None
    kind = shards.scheme(source.items[0])
    return DatasetInfo(
        label=label,
        path=source.where,
        generated=False,
        files=count,
        total_bytes=total,
        mean_file_bytes=total / samples if total is not None and samples else None,
        mean_width_px=None,
        mean_height_px=None,
        bits_per_pixel=None,
        fs_type=kind,
        mount_source=source.where,
        classes=None,
        fs_kind="network",
        keeps_pages=False,  # a URL is fetched again at every read: no page cache keeps it
        samples=samples,
    )
