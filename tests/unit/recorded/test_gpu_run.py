"""A run recorded on a GPU (an H200): the PyTorch examples' ImageNet script, unchanged, one epoch
of 48 batches over 256x192 JPEGs just generated on the local disk, 8 workers forked at the pass's
start (``tests/data/recorded/gpu-imagenet/recorded.json`` says how). Its first pass waited mostly
for its first batch, the workers starting; nothing came from the disk meanwhile."""

from __future__ import annotations

from replay import replay

from ioprof.render import words


def test_a_first_pass_that_fetched_nothing_is_not_blamed_on_the_storage() -> None:
    r, _ = replay("gpu-imagenet/one-epoch")
    lo = next(lo for lo in r.loaders if lo.role == "training")
    b = lo.before
    # its processes were mostly off a CPU before the window, as a loader waiting on its storage is,
    # but the block devices' counters of those processes, which see this ext4 disk, counted nothing
    assert b is not None and b.busy_share is not None and b.busy_share < 0.5
    assert (b.fetched.method, b.fetched.bytes) == ("block-io", 0)
    fp = r.analysis.first_pass
    assert fp is not None and fp.by == "start", fp
    line = words.verdict_line(r.analysis)
    assert "the bottleneck is storage" not in line and "waiting on I/O" not in line
    assert "over its first pass — the bottleneck is its loader's start" in line
    assert "nothing came from the dataset's storage (block-io counted none)" in line
