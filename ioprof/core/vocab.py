"""The closed sets of words ioprof's results use for kinds of things. Each is a ``Literal``, so
that mypy checks every value made and every comparison against the set, and ``results.json``
holds the same strings."""

from __future__ import annotations

from typing import Literal, get_args

# what limits a cell: an input stage, the step, or an input stage not told apart
Bottleneck = Literal["storage", "decode", "transfer", "compute", "undetermined"]
# the stages that bring a batch to the step, each of which can be measured alone
InputStage = Literal["storage", "decode", "transfer"]
INPUT_STAGES: tuple[InputStage, ...] = get_args(InputStage)
# the run's or a dataset's bottleneck, where nothing could be judged
OverallBottleneck = Literal["storage", "decode", "transfer", "compute", "undetermined", "unknown"]
# a data-wait share's class (TensorFlow's): one decided, or borderline between two
InputClass = Literal["highly", "moderately", "not"]
InputBound = Literal["highly", "moderately", "not", "borderline"]
OverallInputBound = Literal["highly", "moderately", "not", "borderline", "unknown"]
# which method decided a bottleneck: the stage ceilings, the kernel's split of the waits, neither
DecidedBy = Literal["ceilings", "kernel", ""]
# what the awaited producer mostly did while the loop waited ("" where there was nothing to judge;
# "idle": off-CPU while the window fetched nothing from its storage — not its source)
KernelCall = Literal["source", "cpu", "cores", "receive", "mixed", "idle", ""]
# where a measurement's reads came from
CacheRegime = Literal["cold", "warm", "as-is", "memory"]
# the loader a cell ran: in the training process, worker processes, or a pool of threads (whatif)
LoaderKind = Literal["serial", "multiprocess", "threads"]

CACHE_REGIMES: tuple[CacheRegime, ...] = get_args(CacheRegime)


def cache_regime(name: str) -> CacheRegime:
    """A regime named by an option or a file, checked against the set."""
    for regime in CACHE_REGIMES:
        if regime == name:
            return regime
    raise ValueError(f"cache regime must be one of {', '.join(CACHE_REGIMES)}; got {name!r}")
