"""Tar shards named by URLs (``--data https://host/train-{000000..000099}.tar``, ``s3://bucket/
shards/train-{0..9}.tar``, or an ``s3://`` prefix that holds ``.tar`` objects): WebDataset's
layout, read as a stream of samples.

A sample is the run of members sharing a key (the member's name up to the first dot of its base
name): its image (``.jpg``, ``.png``…) and, where there is one, its class (``.cls``). Shards are
opened as streams (an HTTP GET through ``urllib``, an S3 GET through boto3: ``objects``), never
read whole first, as WebDataset reads them. Brace patterns are expanded by ``braceexpand``
(WebDataset's own). Nothing is written to the data's location.

The dataset's size in samples is estimated: the first shard's first samples give the bytes a
sample takes in the stream (tar headers included), and the shards' sizes (a listing, or HTTP
HEAD) divided by it give the rest — said so in the report.
"""

from __future__ import annotations

import errno
import io
import os
import random
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, cast

from ioprof.core.errors import IoprofError
from ioprof.datasets import objects

OPEN_TIMEOUT_S = 30.0
# HEAD requests for the shards' sizes: at most this many (the rest take the mean of those).
MAX_SIZED = 256
MAX_SHARDS = objects.MAX_LISTED
# The samples read from the first shard to describe the dataset (their bytes in the stream, their
# resolution, their classes): enough for a mean, little enough over a slow link.
DESCRIBE_SAMPLES = 32
DESCRIBE_MAX_BYTES = 8 * 10**6
IMAGE_SUFFIXES = objects.IMAGE_SUFFIXES
LABEL_SUFFIXES = ("cls", "cls2", "class", "label")
# The model's head for sharded data (ImageNet's 1,000 classes): a shard's labels are folded into it
# (a throughput measurement, not a trained model).
SHARD_CLASSES = 1000


def is_shard_url(data: str | None) -> bool:
    """``data`` names tar shards: an HTTP(S) URL, or an ``s3://`` URL with a brace pattern or
    ending in ``.tar``."""
    if not data:
        return False
    text = str(data)
    if text.startswith(("http://", "https://")):
        return True
    return text.startswith("s3://") and ("{" in text or text.lower().endswith(".tar"))


def expand(data: str) -> list[str]:
    """The shards' URLs: a brace pattern expanded (WebDataset's ``braceexpand``), a single URL as
    itself, an ``s3://`` prefix listed for its ``.tar`` objects."""
    try:
        from braceexpand import braceexpand
    except ImportError:
        raise IoprofError("reading tar shards by URL needs braceexpand: pip install braceexpand") from None
    urls = list(braceexpand(data))
    if len(urls) > MAX_SHARDS:
        raise IoprofError(
            f"--data {data}: names {len(urls):,} shards; ioprof reads at most {MAX_SHARDS:,} — name a range of them"
        )
    for u in urls:
        if not u.lower().endswith(".tar"):
            raise IoprofError(
                f"--data {data}: {u} is not a .tar shard; name tar shards (train-{{000000..000099}}.tar) "
                "or, for images in class folders, an s3://BUCKET/PREFIX"
            )
    return urls


def where(url: str) -> str:
    """What serves ``url``: the S3 endpoint, or the HTTP server's scheme and host."""
    if url.startswith("s3://"):
        return objects.endpoint()
    p = urllib.parse.urlparse(url)
    return f"{p.scheme}://{p.netloc}"


def fs_type(url: str) -> str:
    return "s3" if url.startswith("s3://") else urllib.parse.urlparse(url).scheme


@contextmanager
def opened(url: str, timeout_s: float = OPEN_TIMEOUT_S) -> Iterator[IO[bytes]]:
    """A shard's bytes as a stream (a GET). A server that cannot be reached is a ConnectionError
    (ECONNREFUSED: the storage is gone, not one shard bad); any other failure an OSError naming
    what to change."""
    if url.startswith("s3://"):
        with objects.opened(url) as stream:
            yield stream
        return
    if not url.startswith(("http://", "https://")):
        with open(url[len("file:") :] if url.startswith("file:") else url, "rb") as f:
            yield f
        return
    try:
        response = urllib.request.urlopen(url, timeout=timeout_s)
    except urllib.error.HTTPError as e:
        raise OSError(f"{url}: {_refused(e)} — check the URL in --data") from None
    except (TimeoutError, urllib.error.URLError, ConnectionError) as e:
        reason = getattr(e, "reason", e)
        raise ConnectionError(
            errno.ECONNREFUSED, f"{url}: cannot reach {where(url)} ({reason}) — check the URL and the network"
        ) from None
    try:
        yield cast(IO[bytes], _Stream(response, url))
    finally:
        response.close()


def _refused(e: urllib.error.HTTPError) -> str:
    """What an HTTP error reply says of a shard."""
    return "no such shard" if e.code == 404 else f"the server answered {e.code} {e.reason}"


class _Stream:
    """An HTTP response whose read errors (a connection dropped mid-shard) are OSErrors."""

    def __init__(self, response: Any, url: str) -> None:
        self._response, self._url = response, url

    def read(self, n: int = -1) -> bytes:
        try:
            return bytes(self._response.read(n))
        except (OSError, ValueError) as e:
            raise ConnectionError(
                errno.ECONNRESET, f"{self._url}: the connection to {where(self._url)} dropped mid-shard ({e})"
            ) from None


def sizes_of(urls: list[str], listed: dict[str, int] | None = None) -> tuple[int, ...]:
    """Each shard's bytes: from a listing, else by HTTP HEAD (the first ``MAX_SIZED``; the rest
    take their mean). A shard whose size cannot be had is an error naming it."""
    if listed is not None:
        missing = [u for u in urls if u not in listed]
        if missing:
            raise IoprofError(
                f"--data: {missing[0]}: no such shard at {where(missing[0])} — check the pattern"
            )
        return tuple(listed[u] for u in urls)
    sized: list[int] = []
    for u in urls[:MAX_SIZED]:
        request = urllib.request.Request(u, method="HEAD")
        try:
            with urllib.request.urlopen(request, timeout=OPEN_TIMEOUT_S) as response:
                length = response.headers.get("Content-Length")
        except urllib.error.HTTPError as e:
            raise IoprofError(f"--data: {u}: {_refused(e)} — check the URL") from None
        except (urllib.error.URLError, OSError) as e:
            raise IoprofError(
                f"--data: {u}: cannot reach {where(u)} ({getattr(e, 'reason', e)}) — check the URL and the network"
            ) from None
        if not length:
            raise IoprofError(f"--data: {u}: the server does not say the shard's size (no Content-Length)")
        sized.append(int(length))
    mean = round(sum(sized) / len(sized))
    return (*sized, *([mean] * (len(urls) - len(sized))))


def listed_sizes(url: str) -> tuple[list[str], dict[str, int], int]:
    """The ``.tar`` objects under an ``s3://`` prefix (or next to a pattern's shards), with their
    sizes: (their URLs where ``url`` is a prefix, else [], sizes by URL, LIST requests made)."""
    bucket, key = objects.split(url, shards=True)
    pattern = "{" in key or key.lower().endswith(".tar")
    prefix = key.rsplit("/", 1)[0] + "/" if pattern and "/" in key else ("" if pattern else key)
    found, requests = objects.list_keys(f"s3://{bucket}/{prefix}", (".tar",))
    sizes = {f"s3://{bucket}/{k}": s for k, s in found}
    return ([] if pattern else sorted(sizes)), sizes, requests


@dataclass(frozen=True)
class ShardSample:
    """One sample of a shard: its key, its image's bytes, its label (-1: none), and the bytes it
    took in the stream (its members and their tar headers)."""

    key: str
    image: bytes
    label: int
    stream_bytes: int


def key_of(name: str) -> str:
    """WebDataset's sample key: the member's name up to the first dot of its base name."""
    folder, base = os.path.split(name)
    return os.path.join(folder, base.split(".", 1)[0])


def samples(stream: IO[bytes], url: str) -> Iterator[ShardSample]:
    """The samples of a tar stream, in order; a stream that is not a tar is an OSError naming it.
    A sample's stream bytes run from its first member's header to the next sample's (the tar's
    own offsets: exact, where counting the reads would be lumpy — tarfile reads 10 kB records)."""
    key, image, label, start, end, seen = "", b"", -1, 0, 0, 0
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                seen += 1
                k = key_of(member.name)
                if k != key:
                    if image:
                        yield ShardSample(key, image, label, member.offset - start)
                    key, image, label, start = k, b"", -1, member.offset
                f = tar.extractfile(member)
                data = f.read() if f is not None else b""
                end = member.offset_data + -(-member.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
                ext = member.name.rsplit(".", 1)[-1].lower()
                if f".{ext}" in IMAGE_SUFFIXES and not image:
                    image = data
                elif ext in LABEL_SUFFIXES:
                    try:
                        label = int(data.strip() or b"-1")
                    except ValueError:
                        label = -1
    except tarfile.ReadError as e:
        if seen:  # it began as a tar: the stream ended early (a dropped connection, a cut file)
            raise OSError(f"{url}: the shard broke off after {seen} member(s) ({e})") from None
        raise OSError(f"{url}: not a tar shard ({e}) — --data must name WebDataset tar shards") from None
    if image:
        yield ShardSample(key, image, label, end - start)


@dataclass(frozen=True)
class FirstSamples:
    """What the first samples of a shard told: their mean bytes in the stream, their images,
    labels and keys, and how long reading them took."""

    keys: tuple[str, ...]
    images: tuple[bytes, ...]
    labels: tuple[int, ...]
    bytes_per_sample: float
    read_s: float
    kept: int = 0  # of them, samples parsed from bytes read before (``kept``), not read here


def first_samples(
    urls: list[str],
    *,
    max_samples: int,
    max_bytes: int,
    seed: int | None = None,
    kept: Mapping[str, bytes] | None = None,
) -> FirstSamples:
    """The first samples of the shards (shuffled by ``seed``; None: in order), until ``max_samples``
    or ``max_bytes``: a sample of the data in memory. A non-tar or missing shard is an IoprofError.
    ``kept``: shards' first bytes read before (whole, or cut off anywhere): their whole samples
    are taken from there, and those shards are not read again."""
    order = list(urls)
    if seed is not None:
        random.Random(seed).shuffle(order)
    keys: list[str] = []
    images: list[bytes] = []
    labels: list[int] = []
    streamed = held = taken = 0
    t0 = time.perf_counter()

    def full() -> bool:
        return len(images) >= max_samples or held >= max_bytes

    def take(stream: IO[bytes], url: str) -> None:
        nonlocal streamed, held
        for s in samples(stream, url):
            keys.append(f"{url}#{s.key}")
            images.append(s.image)
            labels.append(s.label)
            streamed += s.stream_bytes
            held += len(s.image)
            if full():
                return

    for url in order:
        if full():
            break
        prefix = kept.get(url) if kept else None
        if prefix is not None:
            before, cut_in_first = len(images), False
            try:
                take(io.BytesIO(prefix), url)
            except OSError:  # cut off within a sample: the whole ones before it are taken
                cut_in_first = len(images) == before
            taken += len(images) - before
            if not cut_in_first:
                continue
        try:  # not kept, or cut off within its first sample: the shard itself (which says what is wrong)
            with opened(url) as stream:
                take(stream, url)
        except OSError as e:
            raise IoprofError(str(e)) from None
    if not images:
        raise IoprofError(
            f"--data {urls[0]}: its shards hold no images (looked for {', '.join(IMAGE_SUFFIXES[:3])}…)"
        )
    return FirstSamples(
        tuple(keys), tuple(images), tuple(labels), streamed / len(images), time.perf_counter() - t0, taken
    )


def header_opener(image: bytes) -> Callable[[], IO[bytes]]:
    return lambda: io.BytesIO(image)
