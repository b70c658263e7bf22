"""A streaming dataset that downloads its shards whole before it yields — WebDataset with
``cache_dir`` — on recorded runs: two tar shards of 640 photographs over an 8 Mbit/s link, one a
worker, two epochs, the second read from the cache; the shards served over HTTP (``python
tests/support/record.py cached-shards``; ``cached-pipe`` with the ``pipe:curl …`` URLs written
out) or from an S3-API store, read with boto3 in the workers (``cached-objects``), as MosaicML
Streaming and LitData download theirs. Its first pass is
storage-bound, its steady state is not; its bytes are counted on the link; nothing in the report
says that every epoch reads the storage, and the pass is as long as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from replay import recorded, replay

from ioprof.conclude.checks import fetched_nothing
from ioprof.render import words
from ioprof.render.kinds import kind_of

RUNS = ["cached-shards", "cached-objects", "cached-pipe"]


def _margins(name: str) -> dict[str, float]:
    return json.loads((recorded(name) / "recorded.json").read_text())["margins"]


@pytest.mark.parametrize("name", RUNS)
def test_the_pass_that_downloads_is_storage_bound_and_its_steady_state_is_said_beside_it(name: str) -> None:
    r, _ = replay(f"{name}/two-epochs")
    (lo,) = r.loaders
    first = lo.pass_starts[0]
    fp = r.analysis.first_pass
    assert fp is not None and (fp.by, fp.pass_class) == ("storage", "highly") and fp.window_class != "highly"
    # told by its workers (blocked on their downloads), not by the training process waiting for them
    assert fp.busy_of == "workers" and fp.busy_share is not None and fp.busy_share < 0.5, fp
    # an IterableDataset has no len(): the pass is as long as the first pass was once it ended,
    # not as long as the window, which ran on into the second epoch
    assert lo.batches_per_pass is None and first.pass_s is not None
    assert fp.pass_batches == first.batches, (fp.pass_batches, first)
    assert fp.pass_s == pytest.approx(first.pass_s, rel=0.1)
    # the bytes it fetched before its window: the shards the server holds, counted on the link
    # (the interface the server's host is reached by: for s3://, the store's endpoint, not the bucket)
    assert fp.fetched_method == "interface-rx"
    assert fp.fetched_bytes == pytest.approx(_margins(name)["shard_bytes"], rel=0.2)
    line = words.verdict_line(r.analysis)
    assert line.startswith("**Verdict: highly input-bound over its first pass — the bottleneck is storage**")
    assert "In its window after them, the steady state: " in line


@pytest.mark.parametrize("name", RUNS)
def test_a_loader_that_keeps_its_own_copy_is_not_told_that_every_epoch_reads_the_storage(
    name: str, tmp_path: Path
) -> None:
    r, _ = replay(f"{name}/two-epochs")
    (info,) = r.datasets
    assert info.keeps_pages is False  # a URL's bytes: the host keeps none of them
    (cell,) = r.cells
    miss = cell.verdict.storage_miss_ratio if cell.verdict is not None else None
    assert miss is not None and miss < 0.1, miss  # its window read the cache, mostly
    assert [f.kind for f in r.analysis.findings if f.kind == "pages-not-kept"] == []
    report = kind_of(r).write(r, tmp_path).read_text()
    assert "every epoch reads the storage" not in report
    # what a pass that reads from storage would draw is still said, with what the window fetched
    assert (
        "would draw" in report and "in a pass that reads it from storage: in its window it fetched" in report
    )
    # "none" where the window fetched no more than a share of it that counts as nothing (the
    # interface counts the whole host's traffic: 34 kB of 8 MB in one recording)
    fetched = "none of what it read" if fetched_nothing(cell) else "of what it read (a copy served the rest"
    assert fetched in report
