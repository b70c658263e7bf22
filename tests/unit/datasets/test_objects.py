"""Object-store URLs, listing and errors (``datasets.objects``). The listing's logic runs against
moto's in-process S3 (a fake of the store, for the logic only); the real server behind a shaped
link is ``tests/e2e/test_objects.py``."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from ioprof.core.errors import IoprofError
from ioprof.datasets import objects

pytest.importorskip("boto3", reason="boto3 is not installed (pip install -e '.[test]')")


def test_urls_split_into_bucket_and_prefix() -> None:
    assert objects.split("s3://b/imagenet/train") == ("b", "imagenet/train")
    assert objects.split("s3://b") == ("b", "")
    assert (
        objects.is_store_url("s3://b/x")
        and not objects.is_store_url("/data/s3")
        and not objects.is_store_url(None)
    )
    with pytest.raises(IoprofError, match="s3://BUCKET/PREFIX"):
        objects.split("s3:///x")
    for shards in ("s3://b/train-{000..009}.tar", "s3://b/train/shard-0.TAR"):
        with pytest.raises(IoprofError, match=r"names tar shards; this command reads the prefix of JPEGs"):
            objects.split(shards)
        assert objects.split(shards, shards=True)[0] == "b"


def test_each_failure_names_what_to_change(monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://store:9000")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)

    def client_error(code: str, status: int) -> ClientError:
        return ClientError(
            {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject"
        )

    url = "s3://b/k.jpg"
    assert "no bucket 'b' at http://store:9000" in objects.why(client_error("NoSuchBucket", 404), url)
    assert "no such object" in objects.why(client_error("NoSuchKey", 404), url)
    assert "refused these credentials (InvalidAccessKeyId)" in objects.why(
        client_error("InvalidAccessKeyId", 403), url
    )
    assert "refused these credentials" in objects.why(client_error("SignatureDoesNotMatch", 403), url)
    assert "kept failing (SlowDown) after 4 attempts" in objects.why(client_error("SlowDown", 503), url)
    assert "kept failing" in objects.why(client_error("InternalError", 500), url)
    assert "cannot reach the store at http://store:9000" in objects.why(
        EndpointConnectionError(endpoint_url="http://store:9000"), url
    )
    assert "AWS_ACCESS_KEY_ID" in objects.why(NoCredentialsError(), url)


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    moto = pytest.importorskip("moto", reason="moto is not installed (pip install -e '.[test]')")
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with moto.mock_aws():
        objects._local.__dict__.clear()  # a client made outside the fake would reach AWS
        c = objects.client()
        c.create_bucket(Bucket="bkt")
        for cls in ("cat", "dog"):
            for i in range(3):
                c.put_object(Bucket="bkt", Key=f"set/{cls}/{i}.jpg", Body=b"x" * (10 + i))
        c.put_object(Bucket="bkt", Key="set/README.txt", Body=b"not an image")
        c.put_object(Bucket="bkt", Key="set/cat/empty.jpg", Body=b"")
        yield c
    objects._local.__dict__.clear()


def test_a_prefix_of_class_folders_is_listed_as_an_imagefolder(bucket: object) -> None:
    got = objects.list_images("s3://bkt/set")
    assert got.classes == ("cat", "dog") and len(got.urls) == 6 and not got.truncated
    assert got.urls[0] == "s3://bkt/set/cat/0.jpg" and got.labels == (0, 0, 0, 1, 1, 1)
    assert got.sizes[:3] == (10, 11, 12)  # the empty object and the text file are not images
    with objects.opened(got.urls[1]) as f:
        assert f.read() == b"x" * 11
    assert objects.read_object(got.urls[2], first_bytes=4) == b"xxxx"  # a ranged GET


def test_listing_is_bounded_and_says_so(bucket: object) -> None:
    got = objects.list_images("s3://bkt/set", limit=4)
    assert len(got.urls) == 4 and got.truncated
    with pytest.raises(IoprofError, match="no images under this prefix"):
        objects.list_images("s3://bkt/elsewhere")
    with pytest.raises(IoprofError, match="no bucket 'nope'"):
        objects.list_images("s3://nope/set")
    with pytest.raises(OSError, match="no such object"), objects.opened("s3://bkt/set/cat/9.jpg"):
        pass


def test_the_loader_reads_an_object_whole_and_a_gone_store_is_storage_lost(
    bucket: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError

    from ioprof.measure.storage import STORAGE_LOST_ERRNOS, read_file

    assert read_file("s3://bkt/set/dog/2.jpg") == b"x" * 12  # the loader's read path: one GET

    def unreachable(e: Exception) -> object:
        def get_object(**_: object) -> object:
            raise e

        return get_object

    for e in (
        EndpointConnectionError(endpoint_url="http://s:9"),
        ConnectTimeoutError(endpoint_url="http://s:9"),
    ):
        objects._local.__dict__.pop("gone", None)
        monkeypatch.setattr(bucket, "get_object", unreachable(e))
        # after the client's own retries: the storage went away (a lost mount's errno), not one bad object
        with pytest.raises(ConnectionError, match="cannot reach the store") as got:
            read_file("s3://bkt/set/dog/2.jpg")
        assert got.value.errno in STORAGE_LOST_ERRNOS
    # the rest of the batch fails at once: no request (and no retries) for each of them again
    monkeypatch.setattr(bucket, "get_object", lambda **_: pytest.fail("asked a store found gone"))
    with pytest.raises(ConnectionError, match="cannot reach the store"):
        read_file("s3://bkt/set/cat/1.jpg")
    # …for a while only: once it has passed, the store is asked again
    monkeypatch.setattr(objects, "GONE_FOR_S", 0.0)
    asked = []

    def back_again(**kw: object) -> object:
        asked.append(kw["Key"])
        return {"Body": io.BytesIO(b"y")}

    monkeypatch.setattr(bucket, "get_object", back_again)
    assert read_file("s3://bkt/set/cat/1.jpg") == b"y" and asked == ["set/cat/1.jpg"]
    objects._local.__dict__.pop("gone", None)


def test_a_body_dropped_mid_object_is_asked_for_again_and_a_store_gone_meanwhile_is_storage_lost(
    bucket: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client retries requests, not bodies: a body that breaks mid-read is a GET again (one
    retry, counted); a store that stopped meanwhile fails that GET as gone; bodies that keep
    breaking are a connection reset after ``MAX_ATTEMPTS`` GETs — never botocore's own error."""
    from botocore.exceptions import EndpointConnectionError, ResponseStreamingError

    from ioprof.measure.storage import STORAGE_LOST_ERRNOS, read_file

    class Breaks(io.BytesIO):
        def read(self, n: int | None = -1) -> bytes:
            raise ResponseStreamingError(error="Connection broken: IncompleteRead(3 bytes read)")

    replies: list[object] = [Breaks(b"x"), io.BytesIO(b"whole")]
    asked: list[str] = []

    def get_object(**kw: object) -> dict[str, object]:
        asked.append(str(kw["Key"]))
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return {"Body": reply}

    monkeypatch.setattr(bucket, "get_object", get_object)
    objects._local.__dict__.pop("gone", None)
    before, here = objects.retries(), objects.retries_here()
    assert read_file("s3://bkt/set/dog/2.jpg") == b"whole" and asked == ["set/dog/2.jpg"] * 2
    assert (objects.retries() - before, objects.retries_here() - here) == (1, 1)
    # the store stopped while the body was coming: the GET asked again finds it gone
    replies[:] = [Breaks(b"x"), EndpointConnectionError(endpoint_url="http://s:9")]
    with pytest.raises(ConnectionError, match="cannot reach the store") as gone:
        read_file("s3://bkt/set/dog/2.jpg")
    assert gone.value.errno in STORAGE_LOST_ERRNOS
    objects._local.__dict__.pop("gone", None)
    # every body breaks: the storage cannot deliver an object, however often asked
    replies[:] = [Breaks(b"x") for _ in range(objects.MAX_ATTEMPTS)]
    with pytest.raises(ConnectionError, match="dropped the object's body mid-read 4 times") as broke:
        read_file("s3://bkt/set/dog/2.jpg")
    assert broke.value.errno in STORAGE_LOST_ERRNOS and not replies
    # a stream (a shard's members read as they come) cannot be asked for again: a reset, at once
    replies[:] = [Breaks(b"x")]
    with (
        pytest.raises(ConnectionError, match="dropped mid-object") as mid,
        objects.opened("s3://bkt/set/dog/2.jpg") as f,
    ):
        f.read(1)
    assert mid.value.errno in STORAGE_LOST_ERRNOS


def test_the_storage_ceiling_counts_the_retries_its_gets_needed(
    bucket: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each GET's reply says how often the client had to repeat it (``RetryAttempts``): the ceiling
    sums them for its level (here every GET reports 2)."""
    from ioprof.datasets.dataset import store_dataset
    from ioprof.measure.ceilings import store_ceilings

    real = bucket.get_object  # type: ignore[attr-defined]

    def get_object(**kw: object) -> dict[str, object]:
        reply = real(**kw)
        reply["ResponseMetadata"]["RetryAttempts"] = 2
        return reply  # type: ignore[no-any-return]

    ds = store_dataset("s3://bkt/set", seed=0, progress=lambda _: None)
    monkeypatch.setattr(bucket, "get_object", get_object)
    monkeypatch.setattr(objects, "client", lambda: bucket)  # the readers' threads: this client too
    progress = type("P", (), {"measured": lambda *a, **k: None, "__call__": lambda *a: None})()
    (level,) = store_ceilings(ds, [1], seed=0, progress=progress)
    assert level.files > 0 and level.retries == 2 * level.files
