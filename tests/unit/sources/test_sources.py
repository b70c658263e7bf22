"""``ioprof.sources``: what a dataset reads, found the same way for torchvision's ImageFolder,
timm's ImageDataset, ConcatDataset and Subset, WebDataset shards (local and over HTTP), a dataset
that names its own, and one that names nothing — and a copy in memory that never touches the
user's objects."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from httpfolder import served

from ioprof import sources
from ioprof.host.netdev import interface_for
from ioprof.runners.pipelines import write_shards
from ioprof.sources import opened


def _imagefolder(root: Path):  # type: ignore[no-untyped-def]
    from torchvision import datasets, transforms

    return datasets.ImageFolder(str(root), transforms.Compose([transforms.Resize(16), transforms.ToTensor()]))


def _resolves_to_memory(path: str) -> bool:
    return os.path.islink(path) and os.readlink(path).startswith("/proc/")


def test_an_imagefolder_is_loose_files_and_its_copy_reads_memory(small_set: Path) -> None:
    ds = _imagefolder(small_set)
    before = list(ds.samples)
    source = sources.find(ds)
    assert source is not None and source.kind == "files" and source.root == str(small_set)
    assert len(source.items) == 48 and source.counted_by == "filesystem"
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    try:
        assert view.positions is not None and len(view.positions) == 48 and view.files == 48
        copy = view.dataset
        assert copy is not ds and ds.samples == before and ds.imgs is ds.samples  # the user's, untouched
        assert copy.imgs is copy.samples and all(_resolves_to_memory(p) for p, _ in copy.samples)
        image, label = copy[view.positions[0]]
        assert image.shape[0] == 3 and label == ds.samples[view.positions[0]][1]
    finally:
        view.close()


# timm's reader opens each file and leaves it for the garbage collector to close
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_timm_keeps_its_files_on_its_reader_which_the_copy_never_shares(small_set: Path) -> None:
    timm = pytest.importorskip("timm.data", reason="timm is not installed (pip install -e '.[test]')")
    ds = timm.ImageDataset(str(small_set))
    reader_before = list(ds.reader.samples)
    source = sources.find(ds)
    assert source is not None and source.kind == "files" and len(source.items) == 48
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    try:
        copy = view.dataset
        assert copy.reader is not ds.reader and ds.reader.samples == reader_before
        assert all(_resolves_to_memory(p) for p, _ in copy.reader.samples)
        image, _ = copy[view.positions[0]] if view.positions else (None, None)
        assert image is not None and image.size[0] > 0
    finally:
        view.close()


def test_concat_and_subset_are_unwrapped_both_ways(small_set: Path) -> None:
    from torch.utils.data import ConcatDataset, Subset

    a, b = _imagefolder(small_set), _imagefolder(small_set)
    ds = ConcatDataset([Subset(a, list(range(10, 30))), b])
    source = sources.find(ds)
    assert source is not None and len(source.items) == 20 + 48
    view = sources.in_memory(source, ds, workers=1)
    assert not isinstance(view, str), view
    try:
        copy = view.dataset
        assert copy.datasets is not ds.datasets and copy.datasets[0].dataset is not a
        assert not any(_resolves_to_memory(p) for p, _ in a.samples + b.samples)
        for pos in view.positions or []:
            image, _ = copy[pos]
            assert image.shape[0] == 3
        subset_pos = next(p for p in view.positions or [] if p < 20)
        path = copy.datasets[0].dataset.samples[10 + subset_pos][0]
        assert _resolves_to_memory(path)
    finally:
        view.close()


@pytest.fixture(scope="module")
def shards(small_set: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    from ioprof.datasets.discover import find_images

    images = find_images(small_set)
    made, _, _ = write_shards(images.paths, images.labels, tmp_path_factory.mktemp("shards"), 60_000)
    return made


def _webdataset(urls: str | list[str]):  # type: ignore[no-untyped-def]
    wds = pytest.importorskip("webdataset", reason="webdataset is not installed (pip install -e '.[test]')")
    return wds.WebDataset(urls, shardshuffle=False, empty_check=False).decode("pil").to_tuple("jpg", "cls")


# WebDataset leaves each shard's file for the garbage collector to close (here, or in the next test)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_webdataset_shards_are_read_alone_and_copied_as_whole_samples(shards: list[str]) -> None:
    ds = _webdataset(shards)
    source = sources.find(ds)
    assert source is not None and source.kind == "shards" and len(source.items) == len(shards) > 2
    assert source.root == os.path.dirname(shards[0])  # local shards: their filesystem counts the bytes
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    try:
        assert (
            view.positions is None and view.files == sources.shards.MEMORY_SAMPLES // 2 * 2
        ) or view.files > 0
        assert sources.shards.urls_of(ds) == shards  # the user's pipeline still reads its shards
        copied = sources.shards.urls_of(view.dataset)
        assert all(_resolves_to_memory(u) for u in copied) and len(copied) >= 16
        samples = list(view.dataset)  # whole: WebDataset closes each shard as it ends
        assert len(samples) >= view.files and samples[0][0].size[0] > 0 and isinstance(samples[0][1], int)
    finally:
        view.close()


@pytest.fixture()
def http_base(shards: list[str]) -> Iterator[str]:
    with served(os.path.dirname(shards[0])) as base:
        yield base


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_shards_over_http_are_streamed_alone_and_counted_from_the_workers_own_reads(
    shards: list[str], http_base: str
) -> None:
    urls = [f"{http_base}/{os.path.basename(s)}" for s in shards]
    ds = _webdataset(urls)
    source = sources.find(ds)
    assert source is not None and source.urls and source.where == http_base
    assert source.counted_by == "network"  # what arrived on the interface its host is reached by
    ceiling = sources.read_alone(source, 2, max_seconds=10.0, bytes_per_sample=2_000.0)
    total = sum(os.path.getsize(s) for s in shards)
    assert ceiling.bytes == total and ceiling.files == len(shards)  # every shard, whole
    assert ceiling.latency_kind == "first byte" and ceiling.where == http_base
    assert ceiling.img_per_s == pytest.approx(ceiling.read_mb_per_s * 1e6 / 2_000.0)
    info = sources.describe(source, "loader 1")
    assert info.total_bytes == total and info.fs_type == "http" and info.keeps_pages is False
    assert info.mean_file_bytes is None  # per sample: not known from the URLs alone


def test_shards_in_an_object_store_are_counted_on_the_interface_its_endpoint_is_reached_by(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``s3://bucket/key`` names no host: its bytes arrive from the store's endpoint (the one
    boto3 sends its requests to), on the interface that host is routed through."""
    from ioprof.sources.shards import host_of, url_source

    urls = [f"s3://shards/train/shard-{i:05d}.tar" for i in range(2)]
    source = url_source("shards", "WebDataset", urls)
    assert source.counted_by == "network" and source.where == "s3://shards"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    assert host_of(urls[0]) == "127.0.0.1" and interface_for(host_of(urls[0]) or "") == "lo"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    assert host_of(urls[0]) == "s3.amazonaws.com"  # AWS's own
    assert host_of("http://data.example:8080/a.tar") == "data.example" and host_of("pipe:cat a.tar") is None


def test_a_piped_shard_is_counted_on_the_link_its_command_fetches_it_over() -> None:
    """``pipe:curl … http://host/…`` brings the bytes of the URL it names: counted on the interface
    that host is reached by, not by the workers' own reads, which would count a cache of their own
    (WebDataset's ``cache_dir``) as fetched; a command that names no URL is left to those reads."""
    from ioprof.sources.shards import host_of, url_source

    urls = [f"pipe:curl -s -L http://127.0.0.1:8088/whole/shard-{i:05d}.tar" for i in range(2)]
    source = url_source("shards", "WebDataset", urls)
    assert source.counted_by == "network", source
    assert source.where == "the command `curl` from http://127.0.0.1:8088"
    assert host_of(urls[0]) == "127.0.0.1" and interface_for(host_of(urls[0]) or "") == "lo"
    local = url_source("shards", "WebDataset", ["pipe:cat a.tar", "pipe:cat b.tar"])
    assert local.counted_by == "own-rchar" and local.where == "the command `cat`"
    assert host_of("pipe:cat a.tar") is None


class Named:
    """A dataset that names what it reads, and can read a copy from memory (``ioprof_source``)."""

    def __init__(self, files: list[str]) -> None:
        self.files_read = files

    def __len__(self) -> int:
        return len(self.files_read)

    def __getitem__(self, i: int) -> bytes:
        with open(self.files_read[i], "rb") as f:
            return f.read()

    def ioprof_source(self) -> dict[str, list[str]]:
        return {"files": list(self.files_read)}

    def ioprof_in_memory(self, local: dict[str, str]) -> Named:
        return Named([local[f] for f in self.files_read if f in local])


class Silent:
    def __len__(self) -> int:
        return 3

    def __getitem__(self, i: int) -> int:
        return i


def test_a_dataset_names_its_own_source_or_is_said_to_name_none(small_set: Path) -> None:
    files = sorted(str(p) for p in small_set.rglob("*.jpg"))
    ds = Named(files)
    source = sources.find(ds)
    assert source is not None and source.kind == "custom" and list(source.items) == files
    view = sources.in_memory(source, ds, workers=1)
    assert not isinstance(view, str), view
    try:
        assert view.positions == list(range(48)) and all(
            _resolves_to_memory(f) for f in view.dataset.files_read
        )
        assert view.dataset[0] == Path(files[files.index(files[0])]).read_bytes() or len(view.dataset[0]) > 0
    finally:
        view.close()
    assert sources.find(Silent()) is None
    why = sources.unknown(Silent())
    assert why.startswith("Silent does not say what it reads") and "ioprof_source()" in why


def test_files_a_worker_holds_open_are_found_and_libraries_are_not(small_set: Path, tmp_path: Path) -> None:
    archive = next(small_set.rglob("*.jpg"))
    # its output goes to a log, as `python train.py > run.log 2>&1` sends it: open, never read
    log = (tmp_path / "run.log").open("w")
    code = f"import sys, time, torch; f = open({str(archive)!r}, 'rb'); print('ready', flush=True); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        found = opened.held_open([p.pid])
        assert found == [str(archive)], found  # torch's own libraries and the log are left out
    finally:
        p.kill()
        p.wait()
        log.close()
        if p.stdout is not None:
            p.stdout.close()


def _hf_images(small_set: Path, out: Path):  # type: ignore[no-untyped-def]
    """A Hugging Face dataset of the small set's JPEGs, saved as Arrow files and mapped back."""
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    files = sorted(str(p) for p in small_set.rglob("*.jpg"))
    ds = datasets.Dataset.from_dict(
        {"image": files, "label": [i % 2 for i in range(len(files))]},
        features=datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")}),
    )
    ds.save_to_disk(str(out))
    return datasets.load_from_disk(str(out)), len(files)


def _to_tensor(batch: dict) -> dict:  # type: ignore[type-arg]
    from torchvision import transforms

    t = transforms.Compose([transforms.Resize(16), transforms.CenterCrop(16), transforms.ToTensor()])
    return {"pixel_values": [t(im.convert("RGB")) for im in batch["image"]], "label": batch["label"]}


class _Wraps:
    """A user's torch dataset holding a Hugging Face one, as many training scripts do."""

    def __init__(self, hf) -> None:  # type: ignore[no-untyped-def]
        self.ds = hf

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        row = self.ds[i]
        return row["pixel_values"], row["label"]


def test_a_hugging_face_dataset_reads_its_arrow_files_and_its_copy_holds_rows_in_ram(
    small_set: Path, tmp_path: Path
) -> None:
    hf, n = _hf_images(small_set, tmp_path / "saved")
    hf.set_transform(_to_tensor)
    for user in (hf, _Wraps(hf)):
        source = sources.find(user)
        assert source is not None and source.kind == "arrow" and source.counted_by == "filesystem"
        assert source.items and all(
            p.endswith(".arrow") and p.startswith(str(tmp_path)) for p in source.items
        )
        view = sources.in_memory(source, user, workers=2)
        assert not isinstance(view, str), view
        copy = view.dataset
        inner = copy if user is hf else copy.ds
        assert copy is not user and inner is not hf and view.positions == list(range(len(inner)))
        assert 0 < len(inner) <= 64 and len(hf) == n  # a sample of the rows; the user's keeps them all
        assert inner.cache_files == [] and hf.cache_files  # the copy maps no file; the user's still does
        assert type(hf._data).__name__ == "MemoryMappedTable"  # the user's table is not replaced
        sample = copy[view.positions[0]]
        pixels = sample["pixel_values"] if user is hf else sample[0]
        assert tuple(pixels.shape) == (3, 16, 16)  # the user's transform is kept
    assert "Arrow" in sources.unknown(object()) and "held in memory" not in sources.unknown(object())


def _rows_paths(hf) -> list[str]:  # type: ignore[no-untyped-def]
    return [row["path"] for row in hf.data.column("image").to_pylist()]


def test_a_hugging_face_imagefolder_reads_the_files_its_rows_name_and_its_copy_holds_them(
    small_set: Path, tmp_path: Path
) -> None:
    """``load_dataset("imagefolder", …)`` keeps only each image's path in its Arrow file (its
    bytes stay in the JPEG): what it reads is those files, one a sample, not its Arrow file."""
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    hf = datasets.load_dataset("imagefolder", data_dir=str(small_set), split="train", cache_dir=str(tmp_path))
    hf.set_transform(_to_tensor)
    jpegs = sorted(str(p) for p in small_set.rglob("*.jpg"))
    before = _rows_paths(hf)
    for user in (hf, _Wraps(hf)):
        source = sources.find(user)
        assert source is not None and source.kind == "arrow" and source.file_a_sample
        assert sorted(source.items) == jpegs and source.root == str(small_set)
        assert "`image` column" in source.label
        some = {p: Path(p).read_bytes() for p in jpegs[::4]}  # read already (by the storage read alone)
        view = sources.in_memory(source, user, workers=2, read=some)
        assert not isinstance(view, str), view
        try:
            inner = view.dataset if user is hf else view.dataset.ds
            assert view.files == len(some) and view.bytes == sum(map(len, some.values()))
            assert view.positions == list(range(len(inner))) == list(range(len(some)))
            copied = _rows_paths(inner)
            assert all(_resolves_to_memory(p) for p in copied)
            assert sorted(Path(p).read_bytes() for p in copied) == sorted(
                some.values()
            )  # those read, not again
            assert _rows_paths(hf) == before and type(hf._data).__name__ == "MemoryMappedTable"  # untouched
            sample = view.dataset[0]
            pixels = sample["pixel_values"] if user is hf else sample[0]
            assert tuple(pixels.shape) == (3, 16, 16)  # the user's transform is kept
        finally:
            view.close()
    described = sources.describe(source, "hf", len(hf))
    assert (described.files, described.samples) == (48, 48)
    assert described.total_bytes == sum(Path(p).stat().st_size for p in jpegs)


# timm's reader opens each file and leaves it for the garbage collector to close
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_timms_hugging_face_reader_is_found_on_its_reader_and_its_copy_reads_memory(
    small_set: Path, tmp_path: Path
) -> None:
    """timm's ``--dataset hfds/<folder>``: its ``ImageDataset`` holds a ``ReaderHfds`` that holds the
    Hugging Face dataset (its image column cast to paths, opened by the reader itself)."""
    timm = pytest.importorskip("timm.data", reason="timm is not installed (pip install -e '.[test]')")
    pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    ds = timm.create_dataset(f"hfds/{small_set}", root=str(tmp_path), split="train")
    before = _rows_paths(ds.reader.dataset)
    source = sources.find(ds)
    assert source is not None and source.file_a_sample and len(source.items) == 48
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    try:
        assert view.files == 48 and view.dataset.reader is not ds.reader
        copied = view.dataset.reader.dataset
        assert all(_resolves_to_memory(p) for p in _rows_paths(copied))
        assert _rows_paths(ds.reader.dataset) == before
        image, label = view.dataset[0]
        name = os.path.join(*Path(_rows_paths(copied)[0]).parts[-2:])  # the link keeps the file's name
        original = next(i for i, p in enumerate(before) if p.endswith(name))
        assert image.size == (96, 72) and label == ds[original][1]
    finally:
        view.close()


def test_only_the_columns_whose_rows_name_files_are_what_a_hugging_face_dataset_reads(
    small_set: Path,
) -> None:
    """An image column of paths beside one of embedded bytes (a thumbnail, a mask): the files are
    those of the first, one a row; the second is read with the table."""
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    jpegs = sorted(str(p) for p in small_set.rglob("*.jpg"))
    image = datasets.Image()
    hf = datasets.Dataset.from_dict(
        {"image": jpegs, "thumb": [{"bytes": Path(p).read_bytes(), "path": None} for p in jpegs]},
        features=datasets.Features({"image": image, "thumb": image}),
    )
    source = sources.find(hf)  # held in memory, yet it reads files: those its rows name
    assert source is not None and list(source.items) == jpegs and source.file_a_sample
    assert "`image`" in source.label and "thumb" not in source.label


class _Own:
    """A user's own dataset, its list under a name of its own choosing."""

    def __init__(self, **lists: list[str]) -> None:
        self.__dict__.update(lists)

    def __len__(self) -> int:
        return len(next(iter(self.__dict__.values())))


def test_a_users_own_list_of_files_under_a_usual_name_is_found_but_not_a_list_of_words(
    small_set: Path,
) -> None:
    jpegs = sorted(str(p) for p in small_set.rglob("*.jpg"))
    for name in ("image_files", "filenames", "images"):
        source = sources.find(_Own(**{name: jpegs}))
        assert source is not None and source.kind == "files" and list(source.items) == jpegs, name
    user = _Own(image_files=jpegs)
    view = sources.in_memory(sources.find(user), user, workers=2)  # type: ignore[arg-type]
    assert not isinstance(view, str), view
    try:
        assert view.files == 48 and all(_resolves_to_memory(p) for p in view.dataset.image_files)
        assert user.image_files == jpegs  # the user's list, untouched
    finally:
        view.close()
    assert sources.find(_Own(images=["a cat", "a dog"], captions=jpegs)) is None  # names, not files


def test_a_users_own_list_of_files_under_any_name_is_found_where_it_alone_is_the_samples(
    small_set: Path,
) -> None:
    """A list under a name of the dataset's own (accelerate's example keeps ``file_names``) is its
    samples' files where it holds one entry a sample and no other list of files does: of two
    (images and masks) which a sample reads is not known, and a list of another length is not
    the samples'."""
    jpegs = sorted(str(p) for p in small_set.rglob("*.jpg"))
    labels = [p.split(os.sep)[-2] for p in jpegs]
    source = sources.find(_Own(file_names=jpegs, labels=labels))
    assert source is not None and source.kind == "files" and list(source.items) == jpegs
    user = _Own(file_names=jpegs)
    view = sources.in_memory(sources.find(user), user, workers=2)  # type: ignore[arg-type]
    assert not isinstance(view, str), view
    try:
        assert all(_resolves_to_memory(p) for p in view.dataset.file_names)
        assert user.file_names == jpegs  # the user's list, untouched
    finally:
        view.close()
    assert sources.find(_Own(im_paths=jpegs, mask_paths=list(reversed(jpegs)))) is None  # which one?
    assert sources.find(_Own(labels=labels[:10], file_names=jpegs)) is None  # not one a sample


class _Counted(list):  # type: ignore[type-arg]
    """A list that counts the entries read from it, one by one or in slices."""

    read = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        _Counted.read += len(self)
        return super().__iter__()

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        _Counted.read += len(range(len(self))[i]) if isinstance(i, slice) else 1
        return super().__getitem__(i)


def test_a_long_list_of_files_is_read_a_few_times_whole_not_once_a_sample(small_set: Path) -> None:
    """Finding a dataset's files and copying a sample of them into memory reads its list a few
    times whole, not once for each sample copied: a list of 1.28 M files walked once a sample took
    a minute as a DataFrame (broken once — the list copied on each lookup — it read it 66 times over)."""
    jpegs = sorted(str(p) for p in small_set.rglob("*.jpg"))
    user = _Own(image_files=_Counted(jpegs * 500))
    _Counted.read = 0
    view = sources.in_memory(sources.find(user), user, workers=2)  # type: ignore[arg-type]
    assert not isinstance(view, str), view
    try:
        assert view.files == len(view.positions) > 0
        assert _Counted.read <= 3 * len(user.image_files), _Counted.read / len(user.image_files)
    finally:
        view.close()


class _Annotated:
    """The custom dataset of PyTorch's "Datasets & DataLoaders" tutorial, as many scripts write it:
    a CSV of file names and labels read into a DataFrame, each name joined to ``img_dir``."""

    def __init__(self, annotations_file: Path, img_dir: str) -> None:
        import pandas as pd

        self.img_labels = pd.read_csv(annotations_file)
        self.img_dir = img_dir

    def __len__(self) -> int:
        return len(self.img_labels)

    def __getitem__(self, idx: int):  # type: ignore[no-untyped-def]
        from torchvision.io import decode_image

        img_path = os.path.join(self.img_dir, self.img_labels.iloc[idx, 0])
        return decode_image(img_path), self.img_labels.iloc[idx, 1]


def test_a_csv_of_file_names_in_a_folder_is_the_files_it_names(small_set: Path, tmp_path: Path) -> None:
    pytest.importorskip("pandas", reason="pandas is not installed")
    names = sorted(str(p.relative_to(small_set)) for p in small_set.rglob("*.jpg"))
    csv = tmp_path / "labels.csv"
    csv.write_text("file,label\n" + "".join(f"{n},{i % 4}\n" for i, n in enumerate(names)))
    ds = _Annotated(csv, str(small_set))
    before = list(ds.img_labels["file"])
    source = sources.find(ds)
    assert source is not None and source.file_a_sample
    assert list(source.items) == [os.path.join(small_set, n) for n in names] and source.root == str(small_set)
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    try:
        copy = view.dataset
        assert view.files == 48 and all(_resolves_to_memory(p) for p in copy.img_labels["file"])
        assert list(ds.img_labels["file"]) == before  # the user's table, untouched
        image, label = copy[view.positions[0]]
        assert tuple(image.shape) == (3, 72, 96) and label == view.positions[0] % 4
    finally:
        view.close()
    assert sources.find(_Own(images=names)) is None  # names in no folder it holds
    listed = sources.find(_Own(images=names, root=str(small_set)))  # names in a folder it holds
    assert listed is not None and list(listed.items) == [os.path.join(small_set, n) for n in names]


def test_a_dataset_of_more_files_than_are_listed_is_described_whole(
    small_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source lists ``ITEMS_LISTED`` of its files (100,000: an ImageNet has 1.28 M);
    the dataset described is all of them, its bytes scaled from those listed, not the list alone
    (which would make a dataset larger than RAM look as if it fit)."""
    from ioprof.sources import arrow, files

    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    sizes = [p.stat().st_size for p in small_set.rglob("*.jpg")]
    monkeypatch.setattr(files, "ITEMS_LISTED", 12)
    monkeypatch.setattr(arrow, "ITEMS_LISTED", 12)
    hf = datasets.load_dataset("imagefolder", data_dir=str(small_set), split="train", cache_dir=str(tmp_path))
    for ds in (_imagefolder(small_set), hf):
        source = sources.find(ds)
        assert source is not None and len(source.items) == 12 and source.count == 48
        info = sources.describe(source, "d", len(ds))
        assert info.files == 48 and info.total_bytes == pytest.approx(sum(sizes), rel=0.2), (info, sum(sizes))


def test_files_listed_of_more_are_spread_over_the_dataset_not_its_first_classes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image folder is listed class by class: its first files are its first classes'. Of a
    folder whose first class holds images of 2 kB and whose second holds images of 40 kB, the
    files listed, where fewer than all, are drawn from both, as are the rows of the same folder
    loaded by Hugging Face ``datasets`` and of a ``Subset`` taking the folder backwards, and the bytes
    described are the folder's (broken once — the first files listed — they were a tenth of them).
    A copy drawn from the files listed holds them at the samples that read them (broken once — the
    n-th file listed taken for sample n — the Subset's copy held other files)."""
    from PIL import Image

    from ioprof.sources import arrow, files

    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    noise = torch.Generator().manual_seed(0)
    for cls, side in (("a", 24), ("b", 160)):
        (tmp_path / "d" / cls).mkdir(parents=True)
        for i in range(24):
            pixels = torch.randint(0, 256, (side, side, 3), dtype=torch.uint8, generator=noise).numpy()
            Image.fromarray(pixels).save(tmp_path / "d" / cls / f"{i}.jpg", quality=95)
    sizes = [p.stat().st_size for p in (tmp_path / "d").rglob("*.jpg")]
    monkeypatch.setattr(files, "ITEMS_LISTED", 12)
    monkeypatch.setattr(arrow, "ITEMS_LISTED", 12)
    hf = datasets.load_dataset(
        "imagefolder", data_dir=str(tmp_path / "d"), split="train", cache_dir=str(tmp_path)
    )
    folder = _imagefolder(tmp_path / "d")
    backwards = torch.utils.data.Subset(folder, list(range(47, -1, -1)))
    for ds in (folder, hf, backwards):
        source = sources.find(ds)
        assert source is not None and len(source.items) == 12 and source.count == 48
        assert {Path(p).parent.name for p in source.items} == {"a", "b"}, source.items
        info = sources.describe(source, "d", len(ds))
        assert info.total_bytes == pytest.approx(sum(sizes), rel=0.2), (info.total_bytes, sum(sizes))
        # the copy drawn from files already read holds those files at the samples that read them
        read = {p: Path(p).read_bytes() for p in source.items[:6]}
        view = sources.in_memory(source, ds, workers=2, read=read)
        assert not isinstance(view, str), view
        try:
            assert view.files == 6 and len(view.positions) == 6
            if ds is backwards:
                listed = {folder.samples[47 - pos][0] for pos in view.positions}
                assert listed == set(read), (listed, set(read))
        finally:
            view.close()


def test_a_hugging_face_dataset_held_in_memory_names_no_files(small_set: Path, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    hf = datasets.Dataset.from_dict({"x": [1, 2, 3]})
    assert sources.find(hf) is None
    assert "held in memory: it has none" in sources.unknown(hf)


def test_a_kind_of_source_is_one_module_implementing_the_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every kind answers through ``SourceKind`` (``KIND``, ``find``, ``in_memory``), and a new kind
    is found and asked for its copy in memory once it is named in ``KINDS``: no branch on a
    dataset's class or a source's kind anywhere else."""
    import types

    from ioprof.sources.source import Source

    for kind in sources.BY_KIND.values():
        assert isinstance(kind.KIND, str) and callable(kind.find) and callable(kind.in_memory), kind
    assert set(sources.BY_KIND) == {
        "custom",
        "mds",
        "files",
        "shards",
        "arrow",
        "streamed",
        "archive",
        "lmdb",
        "opened",
    }

    class Rows:  # a dataset no kind here knows: rows of a database file
        path = str(tmp_path / "rows.db")

    assert sources.find(Rows()) is None
    asked: list[str] = []
    database = types.SimpleNamespace(
        KIND="database",
        find=lambda ds: (
            Source("database", "a database file", (ds.path,), str(tmp_path), str(tmp_path), "filesystem")
            if isinstance(ds, Rows)
            else None
        ),
        in_memory=lambda source, ds, *, workers, read: (
            asked.append(source.items[0]) or "no copy: a test kind"
        ),
    )
    monkeypatch.setattr(sources, "KINDS", (*sources.KINDS, database))
    monkeypatch.setitem(sources.BY_KIND, "database", database)
    found = sources.find(Rows())
    assert found is not None and found.kind == "database" and found.items == (Rows.path,)
    assert sources.in_memory(found, Rows(), workers=2) == "no copy: a test kind" and asked == [Rows.path]
    # what a loader's workers hold open has no copy to make, and says why (no shard fallback)
    held = sources.from_opened([str(tmp_path / "a.zip")])
    why = sources.in_memory(held, Rows(), workers=2)
    assert isinstance(why, str) and "held open" in why


def _parquet_files(small_set: Path, out: Path, parts: int) -> list[str]:
    """The small set's JPEGs, their bytes in rows, written as ``parts`` Parquet files."""
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    files = sorted(small_set.rglob("*.jpg"))
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    out.mkdir()
    written = []
    for k in range(parts):
        mine = files[k::parts]
        rows = {"image": [{"bytes": f.read_bytes(), "path": None} for f in mine], "label": [0] * len(mine)}
        path = str(out / f"train-{k:05d}.parquet")
        datasets.Dataset.from_dict(rows, features=features).to_parquet(path)
        written.append(path)
    return written


def test_a_hugging_face_streaming_dataset_reads_its_data_files_and_is_not_copied(
    small_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under its chain of shuffle, map and formatting, and held by a user's dataset: the Parquet
    files its builder streams, files of many samples; the images of a streamed image folder, one
    a sample. No copy in memory is made, and says why. Read alone without knowing how many samples
    a file holds, its storage is MB/s and files/s, no ceiling in img/s; told, it is one."""
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")
    import pyarrow.parquet as pq

    from ioprof.core.results import DatasetCeilings
    from ioprof.observe.recorder import loader_settings

    parquet = _parquet_files(small_set, tmp_path / "pq", 3)
    hf = datasets.load_dataset("parquet", data_files=parquet, split="train", streaming=True)
    hf = hf.shuffle(seed=0, buffer_size=8).map(lambda row: row).with_format("torch")
    # what is read off a loader as it starts, before its first batch, reads no file's footer
    footers: list[str] = []
    read_metadata = pq.read_metadata
    monkeypatch.setattr(
        pq, "read_metadata", lambda path, **kw: footers.append(path) or read_metadata(path, **kw)
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "This DataLoader will create")
        settings = loader_settings(torch.utils.data.DataLoader(hf, batch_size=4, num_workers=2))
    assert settings["source"] is not None and settings["source"].kind == "streamed" and footers == []
    for user in (hf, _Wraps(hf)):
        source = sources.find(user)
        assert source is not None and source.kind == "streamed", source
        assert sorted(source.items) == parquet and not source.file_a_sample
        assert source.counted_by == "filesystem" and source.root == str(tmp_path / "pq")
        # its files' footers count its rows — when asked after the window, not as the loader is
        # found (a round trip each on a network filesystem): what a sample takes follows
        n = len(list(small_set.rglob("*.jpg")))
        per_sample = sum(os.path.getsize(p) for p in parquet) / n
        assert sources.samples_of(source) == n and sorted(footers) == parquet  # once: kept
        assert sources.bytes_per_sample(source) == pytest.approx(per_sample)
    assert "no copy of it can be made" in str(sources.in_memory(source, hf, workers=2))

    folder = datasets.load_dataset("imagefolder", data_dir=str(small_set), split="train", streaming=True)
    images = sources.find(folder)
    assert images is not None and images.file_a_sample and sources.samples_of(images) is None
    lines = tmp_path / "rows.jsonl"  # a JSON Lines file says nothing of its rows
    lines.write_text("".join(f'{{"label": {i}}}\n' for i in range(8)))
    rows = sources.find(datasets.load_dataset("json", data_files=str(lines), split="train", streaming=True))
    assert rows is not None and rows.items == (str(lines),) and sources.samples_of(rows) is None
    assert sources.bytes_per_sample(rows) is None
    assert sorted(images.items) == sorted(str(p) for p in small_set.rglob("*.jpg"))

    unknown = sources.read_alone(source, 2, max_seconds=5.0)
    assert unknown.read_mb_per_s > 0 and unknown.samples_unknown
    cell = SimpleNamespace(setting=SimpleNamespace(concurrency=2))
    assert DatasetCeilings("d", (), (unknown,)).storage_for(cell) is None  # type: ignore[arg-type]
    assert DatasetCeilings("d", (), (replace(unknown, samples_unknown=False),)).storage_for(cell)  # type: ignore[arg-type]
    known = sources.read_alone(source, 2, max_seconds=5.0, bytes_per_sample=per_sample)
    assert not known.samples_unknown and known.img_per_s == pytest.approx(
        known.read_mb_per_s * 1e6 / per_sample
    )


def _image_tar(small_set: Path, path: Path) -> list[tuple[str, bytes]]:
    """The small set's JPEGs in one tar, each under its class folder: (member name, bytes)."""
    members = [(f"{p.parent.name}/{p.name}", p.read_bytes()) for p in sorted(small_set.rglob("*.jpg"))]
    _tar_of(path, members)
    return members


# timm's reader leaves each tar it opens uncached to the collector (its own way, cache_tarfiles=False)
@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_timms_tar_reader_is_read_by_archive_and_copied_by_member(small_set: Path, tmp_path: Path) -> None:
    """timm's reader of images in a tar (``create_dataset`` with a ``.tar`` root): its archive,
    with the samples its members are (so what a sample takes in it); a copy in memory whose reader
    opens the tar for each sample — one kept open would be shared by the probe's threads and the
    workers forked after them — reading the members' own bytes, the user's reader untouched."""
    pytest.importorskip("timm", reason="timm is not installed (pip install -e '.[test]')")
    from concurrent.futures import ThreadPoolExecutor

    from timm.data import create_dataset

    members = _image_tar(small_set, tmp_path / "train.tar")
    ds = create_dataset("", root=str(tmp_path / "train.tar"), split="train")
    source = sources.find(ds)
    assert source is not None and source.kind == "archive", source
    assert (source.items, source.root, source.file_a_sample) == (
        (str(tmp_path / "train.tar"),),
        str(tmp_path),
        False,
    )
    assert sources.samples_of(source) == len(members)
    tar_bytes = (tmp_path / "train.tar").stat().st_size
    assert sources.bytes_per_sample(source) == pytest.approx(tar_bytes / len(members))
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    try:
        copy = view.dataset.reader
        assert copy is not ds.reader and ds.reader.root == str(tmp_path / "train.tar")
        assert view.positions == list(range(view.files)) and 0 < view.files <= len(members)
        by_name = {name.split("/")[1]: data for name, data in members}

        def read(i: int) -> bool:
            handle, _ = copy[i % view.files]
            return handle.read() == by_name[copy.samples[i % view.files][0].name.split("-", 1)[1]]

        with ThreadPoolExecutor(4) as pool:
            assert all(pool.map(read, range(8 * view.files)))
        assert copy.cache_tarfiles is False and copy.tar_state.tf is None  # nothing left open to inherit
        assert ds.reader.tar_state.tf is None  # the user's reader opened nothing here
        loader = torch.utils.data.DataLoader(view.dataset, batch_size=None, num_workers=2)
        assert sum(1 for _ in loader) == view.files
    finally:
        view.close()


def _tar_of(path: Path, members: list[tuple[str, bytes]]) -> None:
    """A tar at ``path`` of ``members``: (name, bytes)."""
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize(
    "compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED], ids=["stored", "deflated"]
)
def test_zips_a_dataset_holds_open_are_read_alone_member_by_member_where_their_images_are_its_samples(
    small_set: Path, tmp_path: Path, compression: int
) -> None:
    """A dataset of its own that reads images as members of a zip it keeps open names nothing;
    its workers are seen holding the zip. Where its image members are as many as its samples,
    each is a sample: read alone, a member at a time as ``zipfile`` reads one (its local header,
    then its bytes as stored), in a random order; a count that differs, or a file that is no zip,
    gives no such source."""
    images = {f"{p.parent.name}/{p.name}": p.read_bytes() for p in sorted(small_set.rglob("*.jpg"))}
    archive = tmp_path / "train.zip"
    with zipfile.ZipFile(archive, "w", compression) as z:
        z.writestr("README.txt", "not an image")  # and a folder entry: neither is a sample
        z.writestr("class_000/", "")
        for name, data in images.items():
            z.writestr(name, data)
    with zipfile.ZipFile(archive) as z:
        stored = {i.header_offset: i.compress_size for i in z.infolist() if i.filename in images}
    source = sources.zips_held([str(archive)], len(images))
    assert source is not None and source.members_in == "zip" and source.samples == len(images)
    assert sorted((o, n) for _, o, n in source.members) == sorted(stored.items())
    s = sources.read_alone(source, 2, max_seconds=30)
    assert s.by_member and 0 < s.files <= len(images) and s.latency_kind == "a member"
    assert all(b in stored.values() for b in s.completed_bytes) and s.bytes == sum(s.completed_bytes)
    assert s.img_per_s == pytest.approx(s.files_per_s)
    assert sources.zips_held([str(archive)], len(images) + 1) is None  # its samples are not its images
    assert sources.zips_held([str(next(small_set.rglob("*.jpg")))], 1) is None  # no zip


@pytest.mark.parametrize("layout", ["a tar", "a folder of tars", "a tar of tars"])
def test_an_archives_samples_are_read_alone_member_by_member_at_their_offsets(
    small_set: Path, tmp_path: Path, layout: str
) -> None:
    """timm's tar reader, in each of its layouts: what it reads of a sample is that member's bytes,
    at its offset in the file (within a tar within a tar, at the inner tar's plus its own). Read
    alone, the storage is read so — each sample's bytes at its place, as a random sampler asks for
    them — and a completion is a sample."""
    pytest.importorskip("timm", reason="timm is not installed (pip install -e '.[test]')")
    from timm.data import ImageDataset
    from timm.data.readers.reader_image_in_tar import ReaderImageInTar

    images = {p: p.read_bytes() for p in sorted(small_set.rglob("*.jpg"))}
    by_class: dict[str, list[tuple[str, bytes]]] = {}
    for p, data in images.items():
        by_class.setdefault(p.parent.name, []).append((f"{p.parent.name}/{p.name}", data))
    root = tmp_path / "data"
    root.mkdir()
    if layout == "a tar":
        _tar_of(root / "train.tar", [m for ms in by_class.values() for m in ms])
        root = root / "train.tar"
    else:
        for name, ms in by_class.items():
            _tar_of(tmp_path / f"{name}.tar", [(n.split("/")[1], d) for n, d in ms])
        if layout == "a folder of tars":
            for name in by_class:
                (tmp_path / f"{name}.tar").rename(root / f"{name}.tar")
        else:
            _tar_of(
                root / "train.tar", [(f"{n}.tar", (tmp_path / f"{n}.tar").read_bytes()) for n in by_class]
            )
            root = root / "train.tar"
    source = sources.find(ImageDataset(str(root), reader=ReaderImageInTar(str(root))))
    assert source is not None and source.kind == "archive", source
    assert len(source.members) == len(images) == len({(p, o) for p, o, _ in source.members})
    contents = set(images.values())
    for path, offset, size in source.members:
        with open(path, "rb") as f:
            f.seek(offset)
            assert f.read(size) in contents, (path, offset, size)
    s = sources.read_alone(source, 2, max_seconds=30)
    assert s.by_member and 0 < s.files <= len(images) and s.latency_kind == "a member"
    sizes = {len(d) for d in contents}
    assert all(b in sizes for b in s.completed_bytes) and s.bytes == sum(s.completed_bytes)
    assert s.img_per_s == pytest.approx(s.files_per_s)
    whole = sources.read_alone(source, 2, max_seconds=30, in_order=True)  # a sequential sampler's
    assert not whole.by_member and whole.files == len(source.items)
