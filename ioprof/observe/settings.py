"""What a loader is, read off it once at its first ``iter()``: its settings as the report's table
gives them (a batch sampler's batch size and sampler where it was given one), and its source."""

from __future__ import annotations

from typing import Any


def interface(source: Any) -> str | None:
    """The interface a source's bytes arrive on over the network (its host's route), or None."""
    if source is None or not source.urls or not source.items:
        return None
    from ioprof.host.netdev import interface_for
    from ioprof.sources.shards import host_of

    host = host_of(source.items[0])
    return interface_for(host) if host else None


def source_fields(source: Any) -> dict[str, Any] | None:
    """A source as plain data: what it is and where, not its list of items."""
    if source is None:
        return None
    return {
        "kind": source.kind,
        "label": source.label,
        "root": source.root,
        "where": source.where,
        "counted_by": source.counted_by,
        "items": source.count if source.count is not None else len(source.items),
    }


def loader_settings(loader: Any) -> dict[str, Any]:
    from torch.utils.data import IterableDataset

    from ioprof import sources
    from ioprof.sources.shards import shard_count

    ctx = getattr(loader, "multiprocessing_context", None)
    ds = loader.dataset
    try:
        length: int | None = len(ds)
    except TypeError:
        length = None
    iterable = isinstance(ds, IterableDataset)
    try:
        per_pass = None if iterable else len(loader)
    except TypeError:
        per_pass = None
    try:
        source = sources.find(ds)
        unknown = "" if source is not None else sources.unknown(ds)
    except Exception as e:  # a dataset's own properties may raise: then nothing is known of its source
        source, unknown = (
            None,
            f"what {type(ds).__name__} reads could not be read off it ({type(e).__name__}: {e})",
        )
    batch_size, sampler, drop_last = batching(loader)
    return {
        "num_workers": int(loader.num_workers),
        "batch_size": batch_size,
        "pin_memory": bool(loader.pin_memory),
        "prefetch_factor": loader.prefetch_factor if loader.num_workers else None,
        "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
        "in_order": bool(getattr(loader, "in_order", True)),
        "drop_last": drop_last,
        "sampler": sampler,
        "start_method": _start_method(ctx, int(loader.num_workers)),
        "dataset_class": type(ds).__name__,
        "dataset_len": length,
        "dataset_root": source.root if source is not None else "",
        "files": list(source.items) if source is not None and source.root else [],
        "iterable": iterable,
        "shards": shard_count(ds) if iterable else None,
        "batches_per_pass": per_pass,
        "source": source,
        "source_unknown": unknown,
    }


def batching(loader: Any) -> tuple[int | None, str, bool]:
    """The batch size, sampler and ``drop_last`` a loader's batches are drawn with: its own where it
    batches them itself (``batch_size=``); where it was given a batch sampler (its own ``sampler``
    and ``drop_last`` are then defaults it never uses), those of that batch sampler, followed
    through the batch samplers that wrap one (accelerate's ``BatchSamplerShard``) to the sampler
    inside, named with the batch sampler that holds it; None where no batch size is declared."""
    outer = getattr(loader, "batch_sampler", None)
    if loader.batch_size is not None or outer is None:
        return loader.batch_size, type(loader.sampler).__name__, bool(loader.drop_last)
    size: int | None = None
    drop: bool | None = None
    chain: list[Any] = []
    at = outer
    while at is not None and all(at is not c for c in chain):
        chain.append(at)
        if size is None and isinstance(getattr(at, "batch_size", None), int):
            size = at.batch_size
        if drop is None and isinstance(getattr(at, "drop_last", None), bool):
            drop = at.drop_last
        at = getattr(at, "batch_sampler", None)
    inner = getattr(chain[-1], "sampler", None)
    named = f"{type(inner).__name__} in {type(outer).__name__}" if inner is not None else type(outer).__name__
    return size, named, bool(drop)


def _start_method(ctx: Any, workers: int) -> str:
    """How the loader's workers start: its multiprocessing context, or the platform's default."""
    if not workers:
        return ""
    if ctx is None:
        import multiprocessing

        return f"{multiprocessing.get_start_method()} (default)"
    return ctx.get_start_method() if hasattr(ctx, "get_start_method") else str(ctx)
