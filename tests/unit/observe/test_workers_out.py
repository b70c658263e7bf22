"""Workers that run out of data: an IterableDataset that deals its shards out among the loader's
workers, as Hugging Face streaming datasets and WebDataset do, with fewer shards than workers —
the workers without a shard yield nothing, and the window runs on the others alone. Torch's own
count, read off the iterator as the window began, against what the look inside saw make batches
and what the dataset itself says of its shards."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

import ioprof
from ioprof.core.findings import WorkersOutOfData
from ioprof.observe.producers import out_of_data
from ioprof.sources.shards import shard_count

SAMPLE_S = 0.002


class Sharded(IterableDataset):  # type: ignore[type-arg]
    """``shards`` shards of ``per_shard`` samples, dealt out among the workers by worker id."""

    def __init__(self, shards: int, per_shard: int) -> None:
        self.num_shards = shards
        self.per_shard = per_shard

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        info = get_worker_info()
        mine = range(self.num_shards) if info is None else range(info.id, self.num_shards, info.num_workers)
        for shard in mine:
            for i in range(self.per_shard):
                time.sleep(SAMPLE_S)
                yield torch.full((3, 8, 8), float(shard)), i % 2


def _rows(shards: int, per_shard: int) -> IterableDataset:  # type: ignore[type-arg]
    """A Hugging Face streaming dataset of ``shards`` shards (a list in ``gen_kwargs``, the
    datasets documentation's way to shard a generator) of ``per_shard`` rows: it deals its shards
    out among the loader's workers and stops those beyond its ``num_shards``."""
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (pip install -e '.[test]')")

    def rows(shard: list[int]) -> Iterator[dict[str, object]]:
        for s in shard:
            for i in range(per_shard):
                time.sleep(SAMPLE_S)
                yield {"x": [float(s)] * (3 * 8 * 8), "y": i % 2}

    ds = datasets.IterableDataset.from_generator(rows, gen_kwargs={"shard": list(range(shards))})
    return ds.with_format("torch")  # type: ignore[no-any-return]


def _trained(loader: DataLoader) -> ioprof.SweepResult:  # type: ignore[type-arg]
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with ioprof.watch(steps=8, seconds=None, probe=False) as w:
        for batch in loader:
            x, y = (batch["x"], batch["y"]) if isinstance(batch, dict) else batch
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.result()


def test_workers_without_a_shard_are_counted_out_and_said() -> None:
    """One shard, two workers: one is out of data before the window, the look inside sees one
    process make its batches, and the report says so with the shards the dataset declares."""
    from ioprof.render.findings import finding

    r = _trained(DataLoader(_rows(1, 160), batch_size=8, num_workers=2))
    (lo,) = r.loaders
    assert (lo.iterable, lo.shards, lo.workers_out) == (True, 1, 1), lo
    cell = next(c for c in r.cells if c.dataset == lo.key)
    assert cell.inside is not None and cell.inside.stages is not None
    assert cell.inside.stages.processes == 1  # the look inside agrees: one worker made them all
    (found,) = [x for x in r.analysis.findings if isinstance(x, WorkersOutOfData)]
    assert (found.workers, found.out, found.shards, found.seen_making) == (2, 1, 1, 1)
    text = finding(found)
    assert "1 of its 2 workers had run out of data" in text and "more shards can" in text, text


def test_workers_that_each_have_shards_are_not_said_out_of_data() -> None:
    """Two shards for two workers, each as long: none is out of data as the window begins."""
    r = _trained(DataLoader(_rows(2, 80), batch_size=8, num_workers=2))
    (lo,) = r.loaders
    assert (lo.shards, lo.workers_out) == (2, 0), lo
    assert not [x for x in r.analysis.findings if isinstance(x, WorkersOutOfData)]


def test_out_of_data_reads_torchs_own_count() -> None:
    """Off a real iterator: None without workers; a persistent loader's in a later pass; a
    map-style loader's workers never run out."""
    serial = iter(DataLoader(Sharded(1, 8), batch_size=4))
    next(serial)
    assert out_of_data(serial) is None
    it = iter(DataLoader(Sharded(1, 64), batch_size=4, num_workers=2))
    for _ in range(3):
        next(it)
    assert out_of_data(it) == 1
    # persistent workers: a later pass asks every worker again, and the one without a shard is
    # counted out again (torch resets its count at each iter())
    kept = DataLoader(Sharded(1, 16), batch_size=4, num_workers=2, persistent_workers=True)
    assert len(list(kept)) == 4
    again = iter(kept)
    for _ in range(3):
        next(again)
    assert out_of_data(again) == 1
    mapped = iter(DataLoader(list(range(64)), batch_size=4, num_workers=2))
    for _ in range(3):
        next(mapped)
    assert out_of_data(mapped) == 0


def test_shard_counts_are_what_the_dataset_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Hugging Face streaming dataset's num_shards, a WebDataset pipeline's URLs where it splits
    them by worker (a rank's share, where it splits them by node first) — not one that resamples or
    that every worker reads whole — and nothing for a dataset that says nothing."""
    datasets = pytest.importorskip("datasets")
    wds = pytest.importorskip("webdataset")

    def rows(n: int) -> Iterator[dict[str, int]]:
        yield from ({"i": i} for i in range(n))

    # a list in gen_kwargs is its shards (the datasets documentation's way to shard a generator)
    assert shard_count(datasets.IterableDataset.from_generator(rows, gen_kwargs={"n": 4})) == 1
    assert shard_count(datasets.IterableDataset.from_generator(rows, gen_kwargs={"n": [2, 2, 2]})) == 3
    four = datasets.IterableDataset.from_generator(rows, gen_kwargs={"n": [2, 2, 2, 2]})
    from datasets.distributed import split_dataset_by_node

    assert shard_count(split_dataset_by_node(four, rank=1, world_size=2)) == 2  # this node's
    assert shard_count(wds.WebDataset(["/x/a.tar", "/x/b.tar"], shardshuffle=False)) == 2
    assert shard_count(wds.WebDataset(["/x/a.tar", "/x/b.tar"], resampled=True, shardshuffle=False)) is None
    # a pipeline deals its URLs out only where a stage after the list splits them by worker
    urls = wds.SimpleShardList(["/x/a.tar", "/x/b.tar", "/x/c.tar"])
    assert shard_count(wds.DataPipeline(urls, wds.split_by_worker, wds.tarfile_to_samples())) == 3
    assert shard_count(wds.DataPipeline(urls, wds.tarfile_to_samples())) is None  # each worker reads all
    every = wds.WebDataset(["/x/a.tar", "/x/b.tar"], shardshuffle=False, workersplitter=None)
    assert shard_count(every) is None
    # split by node first: this rank's share of them, as WebDataset reads its rank
    five = [f"/x/{k}.tar" for k in range(5)]
    for rank, mine in ((0, 3), (1, 2)):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert shard_count(wds.WebDataset(five, shardshuffle=False, nodesplitter=wds.split_by_node)) == mine
    assert shard_count(Unsaid()) is None
    # a num_shards of a dataset not known to deal its shards out by worker says nothing of how
    # its data is dealt: it may count files every worker reads from
    assert shard_count(Sharded(1, 8)) is None


class Unsaid(IterableDataset):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[int]:
        yield 0
