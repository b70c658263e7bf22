"""Tar shards by URL: patterns expanded or refused before any request, samples grouped by key as
WebDataset groups them, a sample's bytes in the stream counted, a stream that is no tar named."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from ioprof.core.errors import IoprofError
from ioprof.datasets import shards


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_which_urls_are_shards_and_how_patterns_expand() -> None:
    assert shards.is_shard_url("https://h/train-{000..009}.tar")
    assert shards.is_shard_url("s3://b/shards/train-{0..3}.tar") and shards.is_shard_url("s3://b/x/a.TAR")
    assert not shards.is_shard_url("s3://b/imagenet/train") and not shards.is_shard_url("/data/train")
    assert shards.expand("https://h/t-{08..11}.tar") == [f"https://h/t-{i:02d}.tar" for i in (8, 9, 10, 11)]
    with pytest.raises(IoprofError, match=r"https://h/t-0\.jpg is not a \.tar shard"):
        shards.expand("https://h/t-{0..2}.jpg")
    with pytest.raises(IoprofError, match="names 10,001 shards"):
        shards.expand("https://h/t-{0..10000}.tar")


def test_samples_are_grouped_by_key_with_their_label_and_stream_bytes() -> None:
    data = _tar(
        [
            ("a/0001.jpg", b"J" * 1000),
            ("a/0001.cls", b"7"),
            ("a/0002.seg.png", b"P" * 10),  # a key's first image is its image; 0002 has no class
            ("a/0002.json", b"{}"),
            ("a/0003.cls", b"3"),  # a key without an image is no sample
        ]
    )
    got = list(shards.samples(io.BytesIO(data), "u"))
    assert [(s.key, s.image[:1], s.label) for s in got] == [("a/0001", b"J", 7), ("a/0002", b"P", -1)]
    # each sample's share of the stream: its members and their 512-byte headers, padded to 512
    assert got[0].stream_bytes == 512 + 1024 + 512 + 512
    assert sum(s.stream_bytes for s in got) < len(
        data
    )  # the class-only key and the tar's end are no sample's


def test_a_stream_that_is_not_a_tar_is_named() -> None:
    with pytest.raises(OSError, match=r"u: not a tar shard .* --data must name WebDataset tar shards"):
        list(shards.samples(io.BytesIO(b"<html>not found</html>" * 40), "u"))


def test_a_shard_that_breaks_off_is_not_called_a_non_tar() -> None:
    data = _tar([("a/0001.jpg", b"J" * 3000), ("a/0001.cls", b"1"), ("a/0002.jpg", b"K" * 3000)])
    with pytest.raises(OSError, match=r"u: the shard broke off after \d member"):
        list(shards.samples(io.BytesIO(data[:2000]), "u"))


def test_first_samples_take_whole_samples_from_the_bytes_kept_and_read_only_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The storage ceilings' first bytes of shards (``kept``): the whole samples in them are taken
    and those shards are not read again; one cut off within its first sample is read itself."""
    from ioprof.datasets.discover import find_images
    from ioprof.datasets.synth import DatasetSpec, generate
    from ioprof.runners.pipelines import write_shards

    generate(DatasetSpec(64, 48, 24), tmp_path / "d")
    images = find_images(tmp_path / "d")
    made, _, _ = write_shards(images.paths, images.labels, tmp_path / "s", 20_000)
    assert len(made) >= 3
    alone = shards.first_samples(made, max_samples=1000, max_bytes=10**9, seed=0)
    order = [url for url in dict.fromkeys(k.split("#")[0] for k in alone.keys)]
    opened: list[str] = []
    real = shards.opened

    def counted(url: str):  # type: ignore[no-untyped-def]
        opened.append(url)
        return real(url)

    monkeypatch.setattr(shards, "opened", counted)
    whole, cut, tiny = (Path(u).read_bytes() for u in order[:3])
    kept = {order[0]: whole, order[1]: cut[: len(cut) // 2], order[2]: tiny[:100]}
    got = shards.first_samples(made, max_samples=1000, max_bytes=10**9, seed=0, kept=kept)
    assert order[0] not in opened and order[1] not in opened and order[2] in opened
    first_two = [k for k in alone.keys if k.split("#")[0] in order[:2]]
    assert 0 < got.kept < len(first_two)  # all of the whole one, the whole samples of the half
    assert set(got.keys) < set(alone.keys) and set(alone.keys) - set(got.keys) <= set(first_two)
    for k, image in zip(got.keys, got.images, strict=True):
        assert image == alone.images[alone.keys.index(k)]
