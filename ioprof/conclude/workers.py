"""Workers that make nothing (``ioprof run``): an IterableDataset's loader whose workers had run out
of data before its window began.

An IterableDataset gives each worker what its own iterator yields. One that deals its shards out
among the workers (a Hugging Face streaming dataset by its ``num_shards``, WebDataset by its URL
list) leaves a worker with no shard nothing to yield: torch hears its StopIteration and asks it
for no more batches that pass. The window then runs on the others alone, whatever ``num_workers``
says — so more workers cannot make it faster. The count is torch's own, read off the iterator as
the window began; the look inside, where it ran, says how many processes made the window's batches.
"""

from __future__ import annotations

from ioprof.conclude.stalls import pace_limits
from ioprof.core.findings import WorkersOutOfData
from ioprof.core.results import SweepResult


def out_of_data(result: SweepResult) -> tuple[WorkersOutOfData, ...]:
    """Each measured loader with workers out of data as its window began."""
    if result.kind != "run":
        return ()
    cells = {c.dataset: c for c in result.cells if c.status == "ok" and c.steps}
    found = []
    for lo in result.loaders:
        cell = cells.get(lo.key)
        if cell is None or not lo.num_workers or not lo.workers_out:
            continue
        stages = cell.inside.stages if cell.inside is not None else None
        found.append(
            WorkersOutOfData(
                lo.key,
                lo.num_workers,
                lo.workers_out,
                lo.shards,
                stages.processes if stages is not None else None,
                the_limit=pace_limits(cell),
            )
        )
    return tuple(found)
