"""Where a dataset's bytes come from, one module per kind of source: ``files`` (loose files a
dataset lists: ImageFolder, timm's ImageDataset, through Subset and ConcatDataset), ``shards``
(tar shards by URL: WebDataset, local, ``http(s)://``, ``pipe:``), ``arrow`` (a Hugging Face
``datasets.Dataset``: the Arrow files it memory-maps), ``custom`` (a dataset that
names what it reads through ``ioprof_source()``), and ``opened`` (what a loader's workers hold
open, read from the kernel, for a dataset none of these knows).

Each answers the same questions, so that commands never test a dataset's class: what does it
read (``find``), read that alone and cold (``read_alone``), how are the bytes it draws counted
(``Source.counted_by``), and a copy of the pipeline that reads a sample from memory
(``in_memory``).

May import: ``ioprof.measure``, ``ioprof.datasets``, ``ioprof.host``, ``ioprof.core``.
"""

from __future__ import annotations

import random
import urllib.parse
from dataclasses import dataclass, replace
from typing import Any

from ioprof.core.results import DatasetInfo, StorageCeiling
from ioprof.sources import arrow, custom, files, memory, shards
from ioprof.sources.memory import MemoryView, read_whole

__all__ = [
    "Source",
    "arrow",
    "custom",
    "files",
    "find",
    "in_memory",
    "memory",
    "opened",
    "read_alone",
    "shards",
]

# The storage read alone: at least this many items (more at more readers), for at most this long.
READ_ALONE_ITEMS = 200
READ_ALONE_ITEMS_PER_READER = 50
ITEMS_LISTED = 100_000


@dataclass(frozen=True)
class Source:
    """What one dataset reads.

    ``kind``: files | shards | arrow | custom | opened. ``items``: the files or URLs it reads (at most
    ``ITEMS_LISTED``). ``root``: the folder they lie under, on one filesystem ("" for URLs).
    ``where``: where the bytes come from in words (a folder, ``http://host:port``, a command).
    ``counted_by``: how the bytes its loader draws are counted — ``filesystem`` (the mount's own
    counters, or block I/O), ``network`` (the interface its host is reached by: what arrived,
    host-wide), or ``own-rchar`` (what the loader's processes were handed through pipes and TLS
    sockets: a ``pipe:`` command's output).
    """

    kind: str
    label: str
    items: tuple[str, ...]
    root: str
    where: str
    counted_by: str
    count: int | None = None  # items in all, where more than were listed

    @property
    def urls(self) -> bool:
        return not self.root


def _url_where(url: str) -> str:
    if url.startswith("pipe:"):
        return f"the command `{url[5:].split()[0] if url[5:].split() else url[5:]}`"
    p = urllib.parse.urlparse(url)
    return f"{p.scheme}://{p.netloc}"


def _from_urls(kind: str, label: str, urls: list[str]) -> Source:
    schemes = {shards.scheme(u) for u in urls}
    if schemes == {"file"}:
        paths = [shards.local_path(u) for u in urls]
        root = files.common_root(paths)
        return Source(kind, label, tuple(paths[:ITEMS_LISTED]), root, root, "filesystem", len(paths))
    # over HTTP: the interface its host is reached by counts what arrived (the workers' own reads —
    # curl's pipe, TLS — beside it); a pipe: command's bytes only the workers' own reads can count
    counted = (
        "network" if schemes <= {"http", "https"} else ("own-rchar" if schemes == {"pipe"} else "unknown")
    )
    return Source(kind, label, tuple(urls[:ITEMS_LISTED]), "", _url_where(urls[0]), counted, len(urls))


def find(dataset: Any) -> Source | None:
    """What ``dataset`` reads, from the first source that knows it; None when none does."""
    said = custom.declared(dataset)
    if said is not None and "files" in said:
        paths = said["files"]
        root = files.common_root(paths)
        return Source(
            "custom", "the files your dataset names", tuple(paths[:ITEMS_LISTED]), root, root, "filesystem"
        )
    if said is not None:
        return _from_urls("custom", "the URLs your dataset names", said["urls"])
    if files.listed(dataset):
        paths = files.files_of(dataset, ITEMS_LISTED)
        root = str(getattr(dataset, "root", "") or "") or files.common_root(paths)
        return Source("files", "loose files", tuple(paths), root, root, "filesystem")
    urls = shards.urls_of(dataset)
    if urls:
        return _from_urls("shards", "tar shards", urls)
    mapped = arrow.files_of(dataset)
    if mapped:
        root = files.common_root(mapped)
        return Source("arrow", "Arrow files (Hugging Face datasets)", tuple(mapped), root, root, "filesystem")
    return None


def unknown(dataset: Any) -> str:
    """Why no source knows what ``dataset`` reads, in one line."""
    names = ", ".join(files.FILE_LIST_ATTRIBUTES)
    return (
        f"{type(dataset).__name__} does not say what it reads: no list of files ({names}, on it or on "
        f"its {'/'.join(files.HOLDER_ATTRIBUTES)}), no shard URLs (a WebDataset pipeline), no "
        f"Arrow files (a Hugging Face dataset"
        + (" held in memory: it has none" if arrow.holder(dataset) is not None else "")
        + f"), no {custom.SOURCE_METHOD}()"
    )


def read_item(source: Source, item: str) -> bytes:
    """One item's bytes, read as the pipeline would get them."""
    if source.root:
        return read_whole(item)
    with shards.opened(item) as stream:
        return stream.read()


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None = None
) -> MemoryView | str:
    """A copy of ``dataset`` that reads a sample of its source from memory, or why not.
    ``read``: loose files already read (by ``read_alone``): the sample is drawn from them."""
    if source.kind == "custom":
        return custom.in_memory(dataset, lambda item: read_item(source, item))
    if source.kind == "files":
        return files.in_memory(dataset, read=read)
    if source.kind == "arrow":
        return arrow.in_memory(dataset)
    return shards.in_memory(dataset, workers=workers)


def read_alone(
    source: Source,
    readers: int,
    *,
    max_seconds: float,
    bytes_per_sample: float | None = None,
    keep: dict[str, bytes] | None = None,
) -> StorageCeiling:
    """The source read alone at ``readers`` concurrent readers: files cold (evicted, verified),
    URLs streamed whole (every byte crosses the network). ``keep``: filled with the first loose
    files read (what a copy in memory needs), so that they are not read twice."""
    count = min(len(source.items), max(READ_ALONE_ITEMS, READ_ALONE_ITEMS_PER_READER * readers))
    sample = random.Random(0).sample(list(source.items), count)
    if source.root:
        from ioprof.host.pagecache import filesystem_of
        from ioprof.measure.storage import probe_storage

        ceiling = probe_storage(
            sample,
            readers,
            filesystem_of(sample[0]),
            max_seconds=max_seconds,
            root=source.root,
            keep=keep,
            keep_bytes=memory.MEMORY_SAMPLE_BYTES if source.kind == "files" else 0,
        )
        if source.kind == "files" or not bytes_per_sample:
            return ceiling
        # a file of many samples (a shard): the samples/s its bandwidth feeds
        return replace(
            ceiling,
            img_per_s=ceiling.read_mb_per_s * 1e6 / bytes_per_sample,
            bytes_per_sample=bytes_per_sample,
        )
    from ioprof.measure.streams import probe_streams

    return probe_streams(
        sample,
        shards.opened,
        readers,
        bytes_per_sample=bytes_per_sample,
        where=source.where,
        max_seconds=max_seconds,
    )


def from_opened(paths: list[str]) -> Source:
    """The files a loader's workers were seen holding open (``opened``), as a source."""
    root = files.common_root(paths)
    return Source("opened", "the files its workers held open", tuple(paths), root, root, "filesystem")


# A URL source's size: this many of its items are asked for theirs (HTTP HEAD), and scaled.
SIZED_URLS = 8


def describe(source: Source, label: str, samples: int | None = None) -> DatasetInfo:
    """What is known of a source's size and storage; None where it could not be read.
    ``samples``: the dataset's length, where it has one (bytes per sample = its bytes ÷ them)."""
    if source.root:
        from ioprof.datasets.discover import ImageList
        from ioprof.datasets.discover import describe as describe_files

        n = len(source.items)
        info = describe_files(
            ImageList(source.root, source.items, (0,) * n, ("",), "listed"), label, False, stat_limit=2000
        )
        if source.kind == "files":
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
