"""LMDB databases (py-lmdb): what a dataset that reads one reads, where its records lie for the
storage read alone, and the copy of its records the probe reads from memory — on databases
written by a converter nobody here wrote (thecml/pytorch-lmdb's ``folder2lmdb.py``, unchanged) and
read by that repository's own ``ImageFolderLMDB`` (lazily opened in each worker), and on a folder
database held open by a dataset of one's own."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from ioprof import sources
from ioprof.datasets.synth import DatasetSpec, generate
from ioprof.sources import lmdbfile

lmdb = pytest.importorskip("lmdb", reason="lmdb is not installed (pip install -e '.[test]')")

THIRDPARTY = Path(__file__).resolve().parents[2] / "scripts" / "thirdparty" / "pytorch_lmdb"
SAMPLES = 48


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """48 JPEGs of 160x120 in an ImageFolder tree, turned into ``train.lmdb`` by folder2lmdb.py."""
    root = tmp_path_factory.mktemp("lmdb")
    generate(DatasetSpec(160, 120, SAMPLES, classes=3, seed=0), root / "train")
    subprocess.run(
        [sys.executable, str(THIRDPARTY / "folder2lmdb.py"), "-f", str(root), "-s", "train"],
        check=True,
        capture_output=True,
    )
    return root / "train.lmdb"


def _their_dataset(path: Path) -> Any:
    """thecml/pytorch-lmdb's ``ImageFolderLMDB`` from its ``main.py``, as that script builds it."""
    from torchvision import transforms

    spec = importlib.util.spec_from_file_location("pytorch_lmdb_main", THIRDPARTY / "main.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ImageFolderLMDB(
        str(path), transforms.Compose([transforms.CenterCrop(64), transforms.ToTensor()])
    )


def _images(path: Path) -> list[int]:
    """Each record's image bytes, read through lmdb itself (the ground truth)."""
    env = lmdb.open(str(path), subdir=path.is_dir(), readonly=True, lock=False)
    with env.begin() as txn:
        keys = pickle.loads(txn.get(b"__keys__"))
        sizes = [len(pickle.loads(txn.get(k))[0][0]) for k in keys]
    env.close()
    return sizes


def test_a_database_kept_by_its_path_is_found_and_its_bytes_a_sample_stated(database: Path) -> None:
    ds = _their_dataset(database)
    source = sources.find(ds)
    assert source is not None and source.kind == "lmdb"
    assert source.items == (os.path.realpath(database),) and source.where == str(database)
    assert source.root == os.path.realpath(database)  # the database file, not the folder it lies in
    assert source.samples == SAMPLES
    # the pages its records fill: each image's bytes, its pickle around it, rounded up to pages
    images = _images(database)
    per_sample = sources.bytes_per_sample(source)
    assert per_sample is not None
    assert sum(images) / SAMPLES <= per_sample <= sum(images) / SAMPLES + 4096 + 512
    assert not hasattr(ds, "txn")  # nothing was opened on the user's dataset


def test_a_path_to_anything_else_is_no_database(tmp_path: Path) -> None:
    assert lmdbfile._lmdb() is not None
    (tmp_path / "data.mdb").write_bytes(b"\0" * 4096)  # the name, not the format

    class Folder(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __init__(self) -> None:
            self.root = str(tmp_path)

        def __len__(self) -> int:
            return 1

    assert lmdbfile.find(Folder()) is None


def test_its_records_are_read_at_their_places_in_the_file(database: Path) -> None:
    source = sources.find(_their_dataset(database))
    assert source is not None
    taken = sources.members_of(source, 20)
    assert len(taken) == 20 and len({offset for _, offset, _ in taken}) == 20
    env = lmdb.open(str(database), subdir=False, readonly=True, lock=False)
    values = set()
    with env.begin() as txn:
        for _, value in txn.cursor():
            values.add(bytes(value))
    env.close()
    with open(database, "rb") as f:
        for path, offset, size in taken:
            assert path == source.items[0]
            assert os.pread(f.fileno(), size, offset) in values  # a whole record, at its place


def test_locating_its_records_reads_those_records_and_its_index_only(database: Path) -> None:
    """py-lmdb reads a record's pages as it hands it over, and a page of every record a cursor
    steps over: where the sampled records lie is asked by their keys, never by stepping over the
    database (over a slow link, a page of each of a million records is gigabytes)."""
    from ioprof.host.pagecache import evict, residency

    source = sources.find(_their_dataset(database))
    assert source is not None and len(source.keys) == SAMPLES
    # what opening it reads: its header, read() with the kernel's readahead around it
    evict([database])
    env = lmdb.open(str(database), subdir=False, readonly=True, lock=False)
    stat = env.stat()
    env.close()
    opening = residency([database]).resident_pages
    evict([database])
    taken = sources.members_of(source, 8)
    pages = sum(-(-(offset % 4096 + size) // 4096) for _, offset, size in taken)
    index = int(stat["branch_pages"]) + int(stat["leaf_pages"])
    assert residency([database]).resident_pages <= opening + index + pages


def test_without_its_keys_by_position_its_storage_is_not_read_alone(tmp_path: Path) -> None:
    _folder_database(tmp_path / "db", 30, 5000)
    source = sources.find(_Held(str(tmp_path / "db")))
    assert source is not None and source.keys == ()
    with pytest.raises(OSError, match="no list of its LMDB keys by position"):
        sources.read_alone(source, 2, max_seconds=2)


class _Listed(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """A dataset of one's own that holds its keys by position and opens its database lazily."""

    def __init__(self, path: str, keys: list[bytes]) -> None:
        self.path, self.keys = path, keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int) -> bytes:
        if not hasattr(self, "env"):
            self.env = lmdb.open(self.path, readonly=True, lock=False)
        with self.env.begin() as txn:
            return bytes(txn.get(self.keys[i]))


def test_its_own_records_are_searched_for_no_further_than_a_copy_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record that is no sample's, its key sorting among the samples': found only by stepping
    over half the records (a page of each), more than a copy reads — so no copy, and why."""
    _folder_database(tmp_path / "db", 30, 5000)
    env = lmdb.open(str(tmp_path / "db"), map_size=2**26)
    with env.begin(write=True) as txn:
        txn.put(b"000015-meta", b"{}")  # between 000015 and 000016
    env.close()
    ds = _Listed(str(tmp_path / "db"), [b"%06d" % i for i in range(30)])
    source = sources.find(ds)
    assert source is not None
    monkeypatch.setattr(lmdbfile, "MEMORY_SAMPLE_BYTES", 8 * 4096)  # 8 steps: 4 in from each end
    why = sources.in_memory(source, ds, workers=2)
    assert isinstance(why, str) and "1 record(s) that are no sample's" in why, why
    monkeypatch.setattr(lmdbfile, "MEMORY_SAMPLE_BYTES", 40 * 4096)  # enough steps to reach it
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    view.close()


def _read_all(ds: Any, positions: list[int]) -> list[tuple[torch.Tensor, Any]]:
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, sampler=positions)
    out = []
    for x, y in loader:
        out.extend(zip(x, y, strict=True))
    return out


def test_a_large_database_is_copied_by_the_keys_its_positions_read(
    database: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Larger than a copy holds: the records of some positions, and its own records (its list of
    keys, its length), in a database of their own; the dataset opens that one lazily in each worker
    as it would its own."""
    # a few records' worth: its own records (``__keys__``, ``__len__``) sort after its samples'
    # keys, and are found a few steps in from that end
    monkeypatch.setattr(lmdbfile, "MEMORY_SAMPLE_BYTES", 40_000)
    before = _sha(database)
    ds = _their_dataset(database)
    source = sources.find(ds)
    assert source is not None
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    try:
        assert view.positions and len(view.positions) < SAMPLES
        assert "of your LMDB records" in view.source
        copied = _read_all(view.dataset, view.positions)
        theirs = [ds[i] for i in view.positions]
        for (x, y), (tx, ty) in zip(copied, theirs, strict=True):
            assert torch.equal(x, tx) and torch.equal(torch.as_tensor(y), torch.as_tensor(ty))
        assert view.dataset.db_path != ds.db_path and ds.db_path == str(database)
    finally:
        view.close()
    assert _sha(database) == before


class _Held(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """A dataset of one's own holding a folder database open from ``__init__`` (an
    ``Environment`` and a transaction), its keys computed from the position."""

    def __init__(self, path: str) -> None:
        self.env = lmdb.open(path, readonly=True, lock=False)
        self.txn = self.env.begin()
        self.n = int(self.txn.stat()["entries"])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> bytes:
        return bytes(self.txn.get(b"%06d" % i))


def _folder_database(path: Path, records: int, size: int) -> None:
    env = lmdb.open(str(path), map_size=2**26)
    with env.begin(write=True) as txn:
        for i in range(records):
            txn.put(b"%06d" % i, os.urandom(size))
    env.close()


def test_a_folder_database_held_open_is_copied_whole_when_it_is_small(tmp_path: Path) -> None:
    _folder_database(tmp_path / "db", 30, 5000)
    before = _sha(tmp_path / "db" / "data.mdb")
    ds = _Held(str(tmp_path / "db"))
    wrapper = torch.utils.data.Subset(ds, list(range(10)))
    source = sources.find(wrapper)
    assert source is not None and source.kind == "lmdb"
    assert source.items == (os.path.realpath(tmp_path / "db" / "data.mdb"),)
    assert source.root == os.path.realpath(tmp_path / "db")
    view = sources.in_memory(source, ds, workers=2)
    assert not isinstance(view, str), view
    try:
        assert view.source == "your LMDB database whole" and view.positions == list(range(30))
        assert view.dataset.env is not ds.env and view.dataset.env.path() != ds.env.path()
        assert [view.dataset[i] for i in range(30)] == [ds[i] for i in range(30)]
    finally:
        view.close()
    assert _sha(tmp_path / "db" / "data.mdb") == before


def test_a_large_database_without_its_keys_by_position_says_why_no_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _folder_database(tmp_path / "db", 30, 5000)
    ds = _Held(str(tmp_path / "db"))
    source = sources.find(ds)
    assert source is not None
    monkeypatch.setattr(lmdbfile, "MEMORY_SAMPLE_BYTES", 10_000)
    why = sources.in_memory(source, ds, workers=2)
    assert isinstance(why, str) and "no list of its LMDB keys by position" in why


_HOLD = """
import mmap, sys
f = open(sys.argv[1], "rb")
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
upto = int(len(m) * float(sys.argv[2])) // mmap.PAGESIZE * mmap.PAGESIZE
sum(m[i] for i in range(0, upto, mmap.PAGESIZE))  # each page faulted in, and mapped while it lives
print("held", flush=True)
sys.stdin.read()
"""


def _held_mapped(path: Path, share: float) -> subprocess.Popen[str]:
    """A process that maps ``path`` and touches its first ``share`` of pages, as a loader's
    workers map the database they read; its pages stay resident while it lives."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path), str(share)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_records_a_process_holds_mapped_are_left_out_of_the_cold_read(database: Path) -> None:
    from ioprof.host.pagecache import evict

    source = sources.find(_their_dataset(database))
    assert source is not None
    evict([database])
    holder = _held_mapped(database, 0.5)
    try:
        ceiling = sources.read_alone(
            source, 2, max_seconds=5, bytes_per_sample=sources.bytes_per_sample(source)
        )
    finally:
        holder.communicate("")
    # about half its records lie in the pages held: those are not read; the rest are read cold
    assert ceiling.cache.verified and "were left out" in ceiling.cache.note, ceiling.cache
    assert 0 < ceiling.files < SAMPLES
    assert ceiling.fetched.bytes is not None and ceiling.fetched.bytes >= ceiling.bytes


def test_a_database_held_mapped_whole_gives_no_storage_figure(database: Path) -> None:
    """Every record mapped by a process (a loader's workers that read them all): a read meant to
    be cold comes from memory, and is no figure of the storage's."""
    from ioprof.observe.probe import _probe_storage

    source = sources.find(_their_dataset(database))
    assert source is not None
    holder = _held_mapped(database, 1.0)
    try:
        settings = {"source": source, "num_workers": 2, "sampler": "RandomSampler"}
        storage, note = _probe_storage(settings, sources.bytes_per_sample(source), 0, 1, 5.0, None, {})
    finally:
        holder.communicate("")
    assert storage == [] and "could not be read alone cold" in note, note
