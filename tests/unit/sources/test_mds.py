"""MosaicML Streaming datasets (``streaming.StreamingDataset``, as ``streaming-community``
installs it): what one reads — its remote's shards, or its cache's once every shard is there —
and the copy of its first samples that the probe reads from memory, on real MDS shards written by
the library's own ``MDSWriter``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ioprof import sources
from ioprof.datasets.discover import find_images
from ioprof.datasets.synth import DatasetSpec, generate
from ioprof.sources.shards import shard_count

streaming = pytest.importorskip(
    "streaming", reason="streaming-community is not installed (pip install -e '.[test]')"
)

SAMPLES = 60


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 JPEGs of 64x48 and their labels, in MDS shards of 200 kB (a few samples each)."""
    from PIL import Image

    root = tmp_path_factory.mktemp("mds")
    generate(DatasetSpec(64, 48, SAMPLES, seed=0), root / "images")
    images = find_images(root / "images")
    with streaming.MDSWriter(
        out=str(root / "remote"), columns={"x": "jpeg", "y": "int"}, size_limit=40_000
    ) as w:
        for path, label in zip(images.paths, images.labels, strict=True):
            with Image.open(path) as image:
                w.write({"x": image, "y": int(label)})
    return root / "remote"


def _photos(remote: str, local: Path) -> Any:
    """A StreamingDataset subclass that decodes and transforms in ``__getitem__``, as MosaicML
    Streaming's CIFAR-10 example writes one."""
    from torchvision import transforms

    class Photos(streaming.StreamingDataset):  # type: ignore[misc]
        def __init__(self, remote: str, local: str) -> None:
            super().__init__(remote=remote, local=local, shuffle=False, batch_size=4)
            self.transforms = transforms.ToTensor()

        def __getitem__(self, idx: int) -> Any:
            obj = super().__getitem__(idx)
            return self.transforms(obj["x"]), obj["y"]

    return Photos(remote, str(local))


def _shard_files(remote: Path) -> list[str]:
    return sorted(str(p) for p in remote.glob("shard.*.mds"))


def test_it_reads_its_remotes_shards_and_then_its_cache_and_deals_out_no_shards(
    remote: Path, tmp_path: Path
) -> None:
    """Before its first pass it reads the remote's shards (downloaded whole into its cache); once
    every shard is in the cache, the cache. The index says what the shards hold and weigh; its
    ``num_shards`` is no count of shards dealt out among workers."""
    ds = _photos(str(remote), tmp_path / "cache")
    shards = _shard_files(remote)
    assert ds.num_shards == len(shards) > 3
    source = sources.find(ds)
    assert source is not None and (source.kind, source.root, source.counted_by) == (
        "mds",
        str(remote),
        "filesystem",
    )
    assert sorted(source.items) == shards and source.samples == SAMPLES
    assert source.item_bytes == sum(os.path.getsize(p) for p in shards)
    assert sources.bytes_per_sample(source) == pytest.approx(source.item_bytes / SAMPLES)
    assert shard_count(ds) is None  # every worker reads from every shard
    assert sum(1 for _ in ds) == SAMPLES  # its pass downloads every shard into its cache
    cached = sources.find(ds)
    assert cached is not None and cached.root == str(tmp_path / "cache")
    assert sorted(cached.items) == sorted(str(tmp_path / "cache" / os.path.basename(p)) for p in shards)
    assert cached.item_bytes == sum(os.path.getsize(p) for p in cached.items)  # the index's sizes


@pytest.fixture()
def bucket(remote: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The shards in an S3-API store (moto's server on this host), as ``s3://photos/train``."""
    boto3 = pytest.importorskip("boto3")
    server_mod = pytest.importorskip(
        "moto.server", reason="moto[server] is not installed (pip install -e '.[test]')"
    )
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()  # on a port of the kernel's choosing: no other test can take it first
    endpoint = "http://{}:{}".format(*server.get_host_and_port())
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "S3_ENDPOINT_URL": endpoint,  # MosaicML Streaming's own
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    try:
        client = boto3.client("s3")
        client.create_bucket(Bucket="photos")
        for path in remote.iterdir():
            client.upload_file(str(path), "photos", f"train/{path.name}")
        yield "s3://photos/train"
    finally:
        server.stop()


def test_a_remote_in_an_object_store_is_counted_by_the_network_sized_by_its_index_and_copied(
    remote: Path, bucket: str, tmp_path: Path
) -> None:
    """Shards in an object store: their URLs, counted on the link (the interface the store is
    reached by), their bytes in all from the index (no request per shard); the copy in memory
    reads the first samples of a shard from the store, and the cache stays empty."""
    ds = _photos(bucket, tmp_path / "cache")
    source = sources.find(ds)
    assert source is not None and source.urls and source.counted_by == "network"
    assert sorted(source.items) == sorted(f"{bucket}/{os.path.basename(p)}" for p in _shard_files(remote))
    info = sources.describe(source, "photos", samples=SAMPLES)
    assert info.total_bytes == sum(os.path.getsize(p) for p in _shard_files(remote))
    assert info.mean_file_bytes == pytest.approx(info.total_bytes / SAMPLES)
    view = sources.in_memory(source, ds, workers=1)
    assert not isinstance(view, str), view
    try:
        image, label = view.dataset[view.positions[0]]
        assert image.shape == (3, 48, 64) and isinstance(label, int)
        assert not any((tmp_path / "cache").rglob("*.mds"))
    finally:
        view.close()


def test_its_copy_reads_its_first_samples_from_memory_and_leaves_the_dataset_as_it_was(
    remote: Path, tmp_path: Path
) -> None:
    """The copy, made before anything is downloaded, reads its samples from shards held in memory:
    nothing lands in the dataset's cache, its record of shard reads (shared memory) is untouched,
    and each sample is the one the dataset itself reads at that position — through the user's
    ``__getitem__`` — in a loader's workers too, drawn by position as the probe draws them."""
    cache = tmp_path / "cache"
    ds = _photos(str(remote), cache)
    source = sources.find(ds)
    assert source is not None
    access_times = ds._shard_access_times.numpy().copy()
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    try:
        assert view.positions and view.files == len(view.positions) <= sources.shards.MEMORY_SAMPLES
        copied = [r for r, mine in zip(view.dataset.dataset.shards, ds.shards, strict=True) if r is not mine]
        assert 0 < len(copied) <= sources.shards.MEMORY_SHARDS
        for reader in copied:
            path = os.path.join(reader.dirname, reader.split, reader.raw_data.basename)
            assert os.path.islink(path) and os.readlink(path).startswith("/proc/")
        got = {p: view.dataset[p] for p in view.positions}
        loader = torch.utils.data.DataLoader(
            view.dataset, sampler=view.positions, batch_size=4, num_workers=2
        )
        assert sum(len(labels) for _, labels in loader) == len(view.positions)
        assert not any(cache.rglob("*.mds")), list(cache.rglob("*"))  # nothing downloaded
        assert (ds._shard_access_times.numpy() == access_times).all()  # its shared record, untouched
    finally:
        view.close()
    for p, (image, label) in got.items():  # the dataset itself (downloading its shards)
        mine, own_label = ds[p]
        assert own_label == label and torch.equal(mine, image), p


def test_a_shards_first_samples_are_a_shard_of_their_own(remote: Path, tmp_path: Path) -> None:
    """Cut to its first 3 samples (or to what fits in the bytes allowed, one at least), a shard is
    still one its own reader reads: each sample as it was in the whole shard."""
    import copy

    from ioprof.sources.mds import _first_samples

    ds = _photos(str(remote), tmp_path / "cache")
    reader = ds.shards[0]
    whole = remote / reader.raw_data.basename
    assert reader.samples > 3
    for limit, expect in ((10**9, 3), (1, 1)):
        with open(whole, "rb") as f:
            data, m = _first_samples(f, 3, limit)
        assert m == expect
        cut = tmp_path / f"cut-{limit}"
        cut.mkdir()
        (cut / reader.raw_data.basename).write_bytes(data)
        mine = copy.copy(reader)
        mine.dirname, mine.split = str(cut), ""
        original = copy.copy(reader)
        original.dirname = str(remote)
        for i in range(m):
            a, b = mine[i], original[i]
            assert a["y"] == b["y"] and a["x"].tobytes() == b["x"].tobytes(), i
        assert len(data) < whole.stat().st_size


# Streaming opens each compressed shard to decompress it and leaves it for the garbage collector
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_compressed_shards_are_read_as_downloaded_and_copied_once_in_the_cache(tmp_path: Path) -> None:
    """Shards written compressed (zstd): what it downloads is the compressed files, as the index
    sizes them; none is copied into memory before its cache holds it decompressed, and the copy then
    comes from the cache."""
    from PIL import Image

    generate(DatasetSpec(64, 48, 24, seed=0), tmp_path / "images")
    images = find_images(tmp_path / "images")
    remote = tmp_path / "remote"
    columns = {"x": "jpeg", "y": "int"}
    with streaming.MDSWriter(out=str(remote), columns=columns, size_limit=40_000, compression="zstd") as w:
        for path, label in zip(images.paths, images.labels, strict=True):
            with Image.open(path) as image:
                w.write({"x": image, "y": int(label)})
    ds = _photos(str(remote), tmp_path / "cache")
    source = sources.find(ds)
    zipped = sorted(str(p) for p in remote.glob("shard.*.mds.zstd"))
    assert source is not None and sorted(source.items) == zipped and len(zipped) > 1
    assert source.item_bytes == sum(os.path.getsize(p) for p in zipped)
    why = sources.in_memory(source, ds, workers=1)
    assert isinstance(why, str) and "compressed and not in its cache" in why
    assert sum(1 for _ in ds) == 24
    view = sources.in_memory(source, ds, workers=1)
    assert not isinstance(view, str), view
    try:
        image, _ = view.dataset[view.positions[0]]
        assert image.shape == (3, 48, 64)
    finally:
        view.close()
