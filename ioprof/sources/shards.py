"""Tar shards: a streaming dataset (WebDataset and its ``DataPipeline``) that reads samples from
tar files named by URLs — local paths, ``file:``, ``http(s)://`` (WebDataset pipes them through
``curl``), ``pipe:COMMAND``.

What it reads is the URL list of the pipeline's shard stage (``SimpleShardList``,
``ResampledShards``: any stage with a list of ``urls``). Read alone: each shard streamed whole,
in chunks, at the loader's concurrency (``measure.streams``). In memory: the first samples of a
few shards, as whole members, re-packed into tar files held in memory, and a copy of the
pipeline whose shard stage names them — the user's pipeline is never changed.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import signal
import subprocess
import tarfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from ioprof.datasets.shards import key_of
from ioprof.datasets.shards import opened as opened_by_url
from ioprof.sources import files
from ioprof.sources.memory import MemoryCopies, MemoryView, shallow, unavailable
from ioprof.sources.source import ITEMS_LISTED, Source

# The copy in memory: this many samples (a key's members together), from at most this many shards.
MEMORY_SAMPLES = 64
MEMORY_SHARDS = 2
OPEN_TIMEOUT_S = 30.0


def shard_stage(dataset: Any) -> tuple[int, Any] | None:
    """(position, stage) of the pipeline stage listing the shards' URLs, or None."""
    pipeline = getattr(dataset, "pipeline", None)
    if not isinstance(pipeline, list):
        return None
    for i, stage in enumerate(pipeline):
        urls = getattr(stage, "urls", None)
        if isinstance(urls, (list, tuple)) and urls and all(isinstance(u, str) for u in urls):
            return i, stage
    return None


def is_hugging_face_streaming(obj: Any) -> bool:
    """A Hugging Face ``datasets.IterableDataset`` (told by what it has: ``datasets`` may not be
    installed)."""
    return type(obj).__module__.startswith("datasets.") and hasattr(obj, "_ex_iterable")


def shard_count(dataset: Any) -> int | None:
    """The shards an iterable dataset deals out among its loader's workers, where it says: a
    Hugging Face ``IterableDataset``'s ``num_shards`` (this node's, where it was split by node), a
    WebDataset pipeline's URL list where a stage after it splits them by worker
    (``split_by_worker``; this rank's share where one splits them by node first; not a list that
    resamples, nor one every worker reads whole). None where it does not say.

    A ``num_shards`` is read only where the library is known to deal its shards out by worker:
    another dataset's may count files every worker reads from (MosaicML Streaming's counts the
    shards of its index, and it deals samples, not shards, out among the workers)."""
    try:  # a property: a dataset's own code may raise
        n = getattr(dataset, "num_shards", None) if is_hugging_face_streaming(dataset) else None
    except Exception:
        n = None
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        return n
    found = shard_stage(dataset)
    if found is None or "Resampled" in type(found[1]).__name__:
        return None
    index, stage = found
    after = [getattr(s, "__name__", "") for s in dataset.pipeline[index + 1 :]]
    if not any("split_by_worker" in name for name in after):
        return None
    if any("split_by_node" in name for name in after):  # this rank's share, as the stage deals it
        rank, world = _node()
        return len(range(rank, len(stage.urls), world))
    return len(stage.urls)


def _node() -> tuple[int, int]:
    """(rank, world size), as WebDataset's ``split_by_node`` reads them: the environment's
    ``RANK`` and ``WORLD_SIZE``, else torch.distributed's default group; (0, 1) outside both."""
    try:
        from webdataset.utils import pytorch_worker_info
    except ImportError:
        return 0, 1
    rank, world, _, _ = pytorch_worker_info()
    return rank, max(1, world)


def split_reader(dataset: Any) -> Any | None:
    """timm's WebDataset reader (``create_dataset("wds/…")``: ``ReaderWds`` on the dataset's
    ``reader``), which builds its pipeline only inside each worker: the shards of its split are
    ``split_info.filenames`` under its ``root``. None for any other dataset."""
    reader = getattr(dataset, "reader", None)
    names = getattr(getattr(reader, "split_info", None), "filenames", None)
    if not isinstance(getattr(reader, "root", None), str) or not isinstance(names, (list, tuple)):
        return None
    return reader if names and all(isinstance(n, str) for n in names) else None


def urls_of(dataset: Any) -> list[str]:
    found = shard_stage(dataset)
    if found:
        return list(found[1].urls)
    reader = split_reader(dataset)
    return [os.path.join(reader.root, n) for n in reader.split_info.filenames] if reader else []


def scheme(url: str) -> str:
    """``file`` (a local path), ``http``, ``https``, ``pipe``, or another URL scheme."""
    if url.startswith("pipe:"):
        return "pipe"
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:  # a path (or a Windows drive)
        return "file"
    return parsed.scheme


def local_path(url: str) -> str:
    return url[len("file:") :] if url.startswith("file:") else url


@contextmanager
def opened(url: str, timeout_s: float = OPEN_TIMEOUT_S) -> Iterator[IO[bytes]]:
    """A shard's bytes as a stream: a file, an HTTP response, or a command's output."""
    kind = scheme(url)
    if kind in ("file", "http", "https", "s3"):  # read as ``--data`` reads them (``datasets.shards``)
        with opened_by_url(local_path(url), timeout_s) as stream:
            yield stream
    elif kind == "pipe":
        # in a session of its own, ended whole: the commands of a pipeline (``curl … | zcat``) are
        # the shell's children, and outlive its kill
        proc = subprocess.Popen(
            url[len("pipe:") :], shell=True, stdout=subprocess.PIPE, start_new_session=True
        )
        assert proc.stdout is not None
        try:
            yield proc.stdout
        finally:
            proc.stdout.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    else:
        raise OSError(f"ioprof cannot read {kind}:// URLs alone")


def size_of(url: str) -> int | None:
    """A shard's size in bytes, where it can be had without reading it (stat, HTTP HEAD)."""
    kind = scheme(url)
    try:
        if kind == "file":
            return os.stat(local_path(url)).st_size
        if kind in ("http", "https"):
            request = urllib.request.Request(url, method="HEAD")
            with urllib.request.urlopen(request, timeout=OPEN_TIMEOUT_S) as response:
                length = response.headers.get("Content-Length")
                return int(length) if length else None
    except (OSError, ValueError):
        return None
    return None


def first_samples(stream: IO[bytes], samples: int) -> tuple[bytes, int]:
    """The first ``samples`` samples of a tar stream, whole, as a tar of their own (its members
    as they were), and how many samples it holds."""
    out = io.BytesIO()
    keys: list[str] = []
    with tarfile.open(fileobj=stream, mode="r|*") as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src:
            if not member.isfile():
                continue
            key = key_of(member.name)
            if key not in keys:
                if len(keys) >= samples:
                    break
                keys.append(key)
            data = src.extractfile(member)
            dst.addfile(member, io.BytesIO(data.read() if data is not None else b""))
    return out.getvalue(), len(keys)


KIND = "shards"


NETWORK_SCHEMES = frozenset({"http", "https", "s3"})


def named_url(url: str) -> str:
    """The URL whose bytes a shard's URL brings: the URL itself, or for ``pipe:COMMAND`` the first
    word of the command that is a network URL (``curl -s http://…``, ``aws s3 cp s3://… -``), as
    WebDataset's own cache names a piped shard; the ``pipe:`` URL itself where the command names
    none (``cat a.tar``)."""
    if scheme(url) != "pipe":
        return url
    return next((w for w in url[5:].split() if scheme(w) in NETWORK_SCHEMES), url)


def url_where(url: str) -> str:
    """Where a URL's bytes come from, in words: ``scheme://host``, or the command of a ``pipe:``
    (and the host its URL names)."""
    if url.startswith("pipe:"):
        command = f"the command `{url[5:].split()[0] if url[5:].split() else url[5:]}`"
        named = named_url(url)
        return command if named == url else f"{command} from {url_where(named)}"
    p = urllib.parse.urlparse(url)
    return f"{p.scheme}://{p.netloc}"


def host_of(url: str) -> str | None:
    """The host a URL's bytes come from: an object store's endpoint for ``s3://`` (the bucket
    names no host), the URL's own host otherwise, the host a ``pipe:`` command's URL names; None
    for a file or a command that names no network URL."""
    url = named_url(url)
    kind = scheme(url)
    if kind == "s3":
        from ioprof.datasets.objects import endpoint
        from ioprof.host.fetched import store_host

        return store_host(endpoint())
    return urllib.parse.urlparse(url).hostname if kind in NETWORK_SCHEMES else None


def url_source(kind: str, label: str, urls: list[str]) -> Source:
    """A source of URLs: local files where they are all ``file:``, else what the network brings."""
    schemes = {scheme(named_url(u)) for u in urls}
    if schemes == {"file"}:
        paths = [local_path(u) for u in urls]
        root = files.common_root(paths)
        return Source(kind, label, tuple(paths[:ITEMS_LISTED]), root, root, "filesystem", len(paths))
    # over HTTP or from an object store: the interface its host is reached by counts what arrived
    # (the workers' own reads — curl's pipe, TLS, a client's socket — beside it), a pipe: command
    # that names its URL included: the workers' reads would count a cache of their own as fetched;
    # the bytes of a command that names none only the workers' own reads can count
    counted = "network" if schemes <= NETWORK_SCHEMES else ("own-rchar" if schemes == {"pipe"} else "unknown")
    return Source(kind, label, tuple(urls[:ITEMS_LISTED]), "", url_where(urls[0]), counted, len(urls))


def find(dataset: Any) -> Source | None:
    """The tar shards a WebDataset pipeline reads, by URL."""
    urls = urls_of(dataset)
    return url_source(KIND, "tar shards", urls) if urls else None


def in_memory(
    source: Source, dataset: Any, *, workers: int, read: dict[str, bytes] | None
) -> MemoryView | str:
    return copy_in_memory(dataset, workers=workers)


def copy_in_memory(
    dataset: Any, *, workers: int, samples: int = MEMORY_SAMPLES, seed: int = 0
) -> MemoryView | str:
    """A copy of the pipeline whose shard stage names tar files in memory (the first samples of a
    few of its shards), or why not."""
    why = unavailable()
    found = shard_stage(dataset)
    urls = urls_of(dataset)
    if why or not urls:
        return why or "no shard list in this pipeline"
    random.Random(seed).shuffle(urls)
    copies = MemoryCopies()
    held = 0
    links: list[str] = []
    try:
        for url in urls[:MEMORY_SHARDS]:
            with opened(url) as stream:
                data, n = first_samples(
                    stream, max(1, (samples - held) // max(1, MEMORY_SHARDS - len(links)))
                )
            links.append(copies.add(urllib.parse.urlparse(local_path(url)).path or url, data))
            held += n
    except (OSError, tarfile.TarError) as e:
        return copies.fail(f"its shards could not be copied into memory ({e})")
    if not held:
        return copies.fail("its shards held no samples")
    # every worker gets shards to read, for as long as the probe runs
    named = links * max(1, -(-8 * max(1, workers) // len(links)))
    copy = shallow(dataset)
    if found is not None:
        index, stage = found
        copy.pipeline = list(dataset.pipeline)
        copy.pipeline[index] = shards = shallow(stage)
        shards.urls = named
    else:  # timm's reader: its split names the copies (absolute: its root is joined to nothing)
        copy.reader = reader = shallow(dataset.reader)
        reader.split_info = shallow(reader.split_info)
        reader.split_info.filenames, reader.ds = tuple(named), None
    view = copies.done(copy, None, f"the first {held} samples of {len(links)} of your shards")
    view.files = held  # samples, for the report's "n of your …"
    return view
