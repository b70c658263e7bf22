"""Objects in an S3-compatible store (``--data s3://bucket/prefix``): listed, bounded, and read as
streams by ``measure.streams`` — the storage ceiling of an object store.

The client is boto3's: endpoint, region and credentials come the standard AWS way (``AWS_ENDPOINT_URL``
for any S3-compatible store, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_PROFILE``,
``~/.aws/config`` and ``credentials``); ioprof signs nothing itself. One client per thread and per
process (a client made before a fork is never used after it). boto3 retries throttling and 5xx
replies itself (its standard mode); the retries it needed are counted (``retries``) and reported,
since requests cost money.

A prefix of images in class folders (``prefix/CLASS/…jpg``) is read as an ImageFolder; loose images
as one class. Listing is bounded (``MAX_LISTED`` objects): a larger prefix is measured on the ones
listed first, and the report says so.
"""

from __future__ import annotations

import errno
import os
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, cast

from ioprof.core.errors import IoprofError

MAX_LISTED = 10_000
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 30.0
MAX_ATTEMPTS = 4  # boto3's standard retry mode: the first try and 3 retries
# After a read found the store unreachable through all its attempts, this thread's next reads for
# this long fail at once (the rest of a batch), rather than each waiting out the retries again.
GONE_FOR_S = 30.0

_local = threading.local()
_lock = threading.Lock()
_retries = 0


def is_store_url(path: str | None) -> bool:
    return bool(path) and str(path).startswith("s3://")


def not_yet(flag: str, path: str) -> IoprofError:
    """The error of a command that does not read object storage or URLs yet."""
    return IoprofError(
        f"{flag} {path}: only `ioprof sweep`, `ioprof probe`, `ioprof place` and `ioprof whatif` read object "
        "storage and shards by URL in this version (`ioprof run` observes your own loader on them) — for this "
        "command, copy the data (or a sample of it) to a folder and pass that"
    )


def split(url: str, *, shards: bool = False) -> tuple[str, str]:
    """(bucket, key or prefix) of ``s3://bucket/key``. ``shards``: the key may be a shard or a
    brace pattern of shards (``datasets.shards``)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise IoprofError(f"--data {url}: an object store URL is s3://BUCKET/PREFIX")
    key = parsed.path.lstrip("/")
    if not shards and ("{" in key or key.lower().endswith(".tar")):
        raise IoprofError(
            f"--data {url}: names tar shards; this command reads the prefix of JPEGs in class folders "
            "(s3://BUCKET/PREFIX) — `ioprof sweep`, `probe`, `place` and `whatif` read shards"
        )
    return parsed.netloc, key


def endpoint() -> str:
    """Where the client sends its requests: AWS_ENDPOINT_URL(_S3), or AWS's own."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS S3"


def client() -> Any:
    """This thread's client (made in this process: never one inherited through a fork)."""
    made = getattr(_local, "client", None)
    if made is not None and _local.pid == os.getpid():
        return made
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise IoprofError("reading s3:// needs boto3: pip install 'ioprof[s3]'") from None

    made = boto3.session.Session().client(
        "s3",
        config=Config(
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS},
        ),
    )
    _local.client, _local.pid = made, os.getpid()
    return made


def retries() -> int:
    """Retries boto3 needed so far in this process (throttling, 5xx, dropped connections)."""
    return _retries


def retries_here() -> int:
    """Retries this thread's requests needed so far (a sample's own, read around its GET)."""
    return int(getattr(_local, "retries", 0))


def _count(response: dict[str, Any]) -> None:
    _add_retries(int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0))


def _add_retries(n: int) -> None:
    """``n`` more retries, to this thread's count and the process's."""
    global _retries
    if n:
        _local.retries = retries_here() + n
        with _lock:
            _retries += n


def why(e: BaseException, url: str) -> str:
    """One line naming what to change, for a failed request on ``url``."""
    from botocore.exceptions import ClientError, NoCredentialsError
    from botocore.exceptions import ConnectionError as Unreachable

    where = endpoint()
    if isinstance(e, NoCredentialsError):
        return (
            f"{url}: no credentials found — set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        )
    if isinstance(e, Unreachable):
        return f"{url}: cannot reach the store at {where} — check AWS_ENDPOINT_URL and the network"
    if isinstance(e, ClientError):
        code = str(e.response.get("Error", {}).get("Code", ""))
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code == "NoSuchBucket":
            return f"{url}: no bucket {split(url, shards=True)[0]!r} at {where} — check the bucket's name in --data"
        if code in ("NoSuchKey", "404"):
            return f"{url}: no such object at {where} — check the prefix in --data"
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403") or status == 403:
            return f"{url}: the store at {where} refused these credentials ({code}) — check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or AWS_PROFILE"
        if code in ("SlowDown", "Throttling", "ThrottlingException", "503") or (status or 0) >= 500:
            return f"{url}: the store at {where} kept failing ({code or status}) after {MAX_ATTEMPTS} attempts — try again later, or with fewer --workers"
        return f"{url}: the store at {where} answered {code or status}"
    return f"{url}: {type(e).__name__}: {e}"


class HoldsShards(IoprofError):
    """The prefix holds tar shards and no images: read it as shards (``datasets.shards``)."""


@dataclass(frozen=True)
class Listing:
    """Objects under a prefix: their URLs, sizes and class labels (bounded: ``truncated``)."""

    url: str
    urls: tuple[str, ...]
    sizes: tuple[int, ...]
    labels: tuple[int, ...]
    classes: tuple[str, ...]
    truncated: bool
    requests: int


def list_keys(
    url: str, suffixes: tuple[str, ...], limit: int = MAX_LISTED
) -> tuple[list[tuple[str, int]], int]:
    """(key, bytes) of the non-empty objects under ``url`` whose names end in ``suffixes``, at most
    ``limit`` (and one more where the prefix holds more: the caller says it was cut), and the LIST
    requests that took."""
    bucket, prefix = split(url, shards=True)
    client()  # boto3 is there (or a one-line error), before its exceptions are imported
    from botocore.exceptions import BotoCoreError, ClientError

    if prefix and not prefix.endswith("/"):
        prefix += "/"
    found: list[tuple[str, int]] = []
    token, requests = None, 0
    try:
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": 1000}
            if token:
                kwargs["ContinuationToken"] = token
            page = client().list_objects_v2(**kwargs)
            requests += 1
            _count(page)
            for obj in page.get("Contents", ()):
                if obj["Key"].lower().endswith(suffixes) and obj.get("Size", 0) > 0:
                    found.append((obj["Key"], int(obj["Size"])))
            token = page.get("NextContinuationToken")
            if len(found) > limit or not page.get("IsTruncated") or not token:
                break
    except (ClientError, BotoCoreError) as e:
        raise IoprofError(why(e, url)) from None
    return found, requests


def list_images(url: str, limit: int = MAX_LISTED) -> Listing:
    """The images under ``url`` (at most ``limit``), class folders as labels."""
    bucket, prefix = split(url)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    listed, requests = list_keys(url, (*IMAGE_SUFFIXES, ".tar"), limit)
    found = [(k, n) for k, n in listed if not k.lower().endswith(".tar")]
    if not found and listed:
        raise HoldsShards(f"--data {url}: holds tar shards, not images")
    truncated = len(found) > limit
    found = found[:limit]
    if not found:
        raise IoprofError(f"--data {url}: no images under this prefix at {endpoint()} — check the prefix")
    found.sort()
    folders = [k[len(prefix) :].split("/") for k, _ in found]
    nested = all(len(f) >= 2 for f in folders)
    classes = tuple(sorted({f[0] for f in folders})) if nested else ("",)
    return Listing(
        url=url,
        urls=tuple(f"s3://{bucket}/{k}" for k, _ in found),
        sizes=tuple(s for _, s in found),
        labels=tuple(classes.index(f[0]) if nested else 0 for f in folders),
        classes=classes,
        truncated=truncated,
        requests=requests,
    )


@contextmanager
def opened(url: str) -> Iterator[IO[bytes]]:
    """An object's bytes as a stream (a GET); failures as ``_get`` says."""
    body = _get(url)["Body"]
    try:
        yield cast(IO[bytes], _Body(body, url))
    finally:
        body.close()


class _Body:
    """A response body whose read errors are connection resets (dropped mid-object), as a shard
    stream's are (``shards._Stream``)."""

    def __init__(self, body: Any, url: str) -> None:
        self._body, self._url = body, url

    def read(self, n: int = -1) -> bytes:
        from botocore.exceptions import BotoCoreError

        try:
            return bytes(self._body.read(n))
        except (BotoCoreError, OSError) as e:  # a stream cannot be asked for again from where it broke
            raise ConnectionError(
                errno.ECONNRESET,
                f"{self._url}: the connection to {endpoint()} dropped mid-object ({type(e).__name__}: {e})",
            ) from None


def read_object(url: str, first_bytes: int | None = None) -> bytes:
    """A whole object, or its first bytes (a ranged GET: an image's header); failures as ``_get``
    says. The client retries a request, never a body: a body dropped mid-object is asked for again
    (a retry, counted), up to ``MAX_ATTEMPTS`` GETs — a store gone meanwhile fails the next GET as
    ``_get`` says, and bodies that keep dropping are a connection reset (the storage, not one
    object)."""
    from botocore.exceptions import BotoCoreError

    byte_range = f"bytes=0-{first_bytes - 1}" if first_bytes else None
    for _ in range(MAX_ATTEMPTS):
        body = _get(url, byte_range)["Body"]
        try:
            return bytes(body.read())
        except (BotoCoreError, OSError) as e:
            dropped = e
        finally:
            body.close()
        _add_retries(1)
    raise ConnectionError(
        errno.ECONNRESET,
        f"{url}: the store at {endpoint()} dropped the object's body mid-read {MAX_ATTEMPTS} times "
        f"({type(dropped).__name__}) — check the network to it",
    )


def _get(url: str, byte_range: str | None = None) -> dict[str, Any]:
    """One GET's response, its retries counted. A store that cannot be reached after the client's
    retries is a ConnectionError with ``errno`` ECONNREFUSED (the storage is gone, not one object
    bad), and this thread's next GETs fail the same at once for ``GONE_FOR_S``; any other failure
    is an OSError naming what to change."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.exceptions import ConnectionError as Unreachable

    bucket, key = split(url, shards=True)
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
    if byte_range:
        kwargs["Range"] = byte_range
    gone = getattr(_local, "gone", None)
    if gone is not None and gone[0] == os.getpid() and time.monotonic() - gone[2] < GONE_FOR_S:
        # this thread's client found the store unreachable through all its retries just now: the
        # rest of a batch fails at once instead of each sample waiting out the retries again
        raise ConnectionError(errno.ECONNREFUSED, gone[1])
    try:
        response: dict[str, Any] = client().get_object(**kwargs)
    except Unreachable as e:  # the endpoint refused or timed out every attempt
        _local.gone = (os.getpid(), why(e, url), time.monotonic())
        raise ConnectionError(errno.ECONNREFUSED, _local.gone[1]) from None
    except (ClientError, BotoCoreError) as e:
        raise OSError(why(e, url)) from None
    _count(response)
    return response


def put_file(path: str, url: str) -> None:
    """A local file written to the store as ``url`` (one PUT, or boto3's multipart for a large one)."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split(url, shards=True)
    try:
        client().upload_file(path, bucket, key)
    except (ClientError, BotoCoreError) as e:
        raise IoprofError(why(e, url)) from None


def delete(urls: list[str]) -> None:
    """The objects at ``urls`` removed (those ioprof wrote); a failure is an error naming them."""
    from botocore.exceptions import BotoCoreError, ClientError

    by_bucket: dict[str, list[str]] = {}
    for u in urls:
        bucket, key = split(u, shards=True)
        by_bucket.setdefault(bucket, []).append(key)
    for bucket, keys in by_bucket.items():
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1,000 keys
            try:
                client().delete_objects(
                    Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]], "Quiet": True}
                )
            except (ClientError, BotoCoreError) as e:
                raise IoprofError(
                    f"{why(e, f's3://{bucket}/{keys[i]}')} — remove s3://{bucket}/{keys[i].rsplit('/', 1)[0]}/ by hand"
                ) from None
