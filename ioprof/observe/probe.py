"""A user's own input pipeline measured alone, in a pause of their training (``observer``), and
split by difference (DS-Analyzer's method):

- **decode and augment**: their DataLoader's dataset, transforms and collate, with no model,
  over a sample of what it reads copied into memory (``ioprof.sources``) — never over the
  storage, so the storage cannot hide inside this ceiling — at their worker count and at more;
- **storage**: the same source read alone (files cold, URLs streamed), at the loader's
  concurrency; under torchrun once per host (by local rank 0) at all its ranks' readers
  together, each rank getting its share;
- **compute**: the step the script itself showed between batches (``result``).

The probe never hangs the user's training: its loaders have a deadline per batch, after which
their workers are ended and the probe is abandoned with the reason. Its workers start the way
the user's own start, except where theirs were forked once, early (persistent workers): a fork
now, from a process whose thread pools (OpenMP) are running, can deadlock in a worker that uses
them, so a fork server starts ours, where the dataset can be sent to one.
"""

from __future__ import annotations

import pickle
import pickletools
import random
import re
import sys
import time
import warnings
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import Any

from ioprof.core.config import TARGET_REL_HALF_WIDTH, LoaderSetting
from ioprof.core.counts import CacheInfo
from ioprof.core.percent import pct
from ioprof.core.results import DecodeCeiling, StorageCeiling
from ioprof.core.stats import LOOKS
from ioprof.host.pagecache import COLD_MAX_RESIDENT_FRACTION, PageRuns, filesystem_of, held_any, read_back
from ioprof.host.processes import end_loader_workers
from ioprof.measure import stage_rows, stages

# ``probe_seconds`` is the pause's length: the storage read alone gets this share of it, each
# worker count of the loader alone an equal part of the rest; each stops sooner once its interval
# is within ±5 % at a fixed look, and the loader alone runs at least this share of its part.
PROBE_STORAGE_SHARE = 0.35
PROBE_DECODE_MIN_SHARE = 0.3
# A batch of the probe's loader that takes longer than this ends the probe: its workers are ended.
PROBE_BATCH_TIMEOUT_S = 30.0
# the dataset's pickle is stopped after this long: a start that costs each worker seconds is shown
PICKLE_AT_MOST_S = 2.0
_GUARD = re.compile(r"""if\s+__name__\s*==\s*['"]__main__['"]""")


class ProbeAbandoned(RuntimeError):
    """The probe's loader delivered no batch within its deadline: its workers were ended."""


def probe_workers(num_workers: int, cores: int) -> list[int]:
    """The worker counts the user's loader is measured alone at: theirs, and more (twice theirs,
    at least 2, at most two per usable core)."""
    more = min(max(2, 2 * num_workers), 2 * cores)
    return sorted({num_workers, more})


class _Choices:
    """Positions drawn at random, with replacement, for as long as the probe asks."""

    def __init__(self, positions: Sequence[int], seed: int = 0) -> None:
        self.positions = list(positions)
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        rng = random.Random(self.seed)
        while True:
            yield rng.choice(self.positions)

    def __len__(self) -> int:
        return 10**9


def start_method(loader: Any, settings: dict[str, Any], dataset: Any) -> tuple[Any, str]:
    """The multiprocessing context the probe's workers start with, and why, when not the loader's
    own. Persistent workers started by fork were forked once, early; a fork now (the training's
    thread pools running) can deadlock a worker that uses them, so a fork server starts the
    probe's — where the dataset can be sent to one and the script would not run again in it."""
    own = loader.multiprocessing_context
    if not _forked_persistent(settings):
        return own, ""
    why, modules = _for_forkserver(loader, dataset)
    if why:
        return own, f"its workers were forked, as yours were, though later than yours ({why})"
    import multiprocessing

    _claim_fork_server()
    context = multiprocessing.get_context("forkserver")
    # what each worker would import to unpickle the dataset, imported once by the server instead:
    # without it every worker paid torch's and the dataset's imports (timm's: 3.3 s to start 2
    # workers and 7.4 s for 4 on 2 cores; with it 0.4 and 1.3 s, after the server's 3.2 s once).
    # No effect where the server is already running.
    context.set_forkserver_preload(modules)
    return context, "its workers were started by a fork server (yours were forked before training began)"


# The preload list multiprocessing's fork server had where ioprof started it for the probe (the
# script ran none): present while that server is ioprof's to stop
_OURS: list[list[str]] = []


def _claim_fork_server() -> None:
    """Before ioprof first asks for the fork server: where none runs yet, the one it starts is
    ioprof's, to stop after the probe (``release_fork_server``)."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    if not _OURS and getattr(server, "_forkserver_pid", 0) is None:
        _OURS.append(list(getattr(server, "_preload_modules", ["__main__"])))


def release_fork_server() -> bool:
    """Stop the fork server ioprof started for the probe, once the probe's workers are gone, where
    nothing of the script's runs from it: what it imported (torch's and the dataset's modules,
    about half a GB) would otherwise stay beside the training to its end. A fork server the script
    asks for later starts afresh, with the preload list it had. True where it was stopped."""
    from multiprocessing import forkserver

    import psutil

    server = forkserver._forkserver
    pid, stop = getattr(server, "_forkserver_pid", None), getattr(server, "_stop", None)
    if not _OURS or pid is None or stop is None:
        return False
    try:
        if psutil.Process(pid).children():  # the script's own, started from it since: left running
            return False
    except psutil.Error:
        pass
    stop()
    server.set_forkserver_preload(_OURS.pop())
    return True


def _forked_persistent(settings: dict[str, Any]) -> bool:
    """Whether the loader's workers are persistent and were forked (so a fork server must start the
    probe's: see ``start_method``)."""
    method = settings["start_method"]
    return bool(settings["num_workers"] and settings["persistent_workers"]) and (
        method.startswith("fork") and not method.startswith("forkserver")
    )


def _nothing() -> None:
    """A process that does nothing: the first one a fork server starts says it is ready."""


def warm_fork_server(loader: Any, settings: dict[str, Any]) -> Any | None:
    """Start now the fork server the probe's workers will come from, where they will (see
    ``start_method``): it imports the dataset's modules (timm's: seconds) while the training goes
    on, instead of inside the pause. The thread returned ends once the server has started a first
    process (the imports done); None where the probe needs no fork server. Only the dataset's and
    collate's own modules are named (not a pickle of the whole dataset, which may hold its data):
    what the probe's view needs beyond them, its workers import themselves."""
    if settings.get("source") is None or not _forked_persistent(settings) or _unguarded_main():
        return None  # no source: the probe decodes nothing, and starts no workers
    import multiprocessing
    import threading

    names = {
        "torch.utils.data",
        getattr(type(loader.dataset), "__module__", ""),
        getattr(loader.collate_fn, "__module__", ""),
    }
    _claim_fork_server()
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(sorted(n for n in names if n and n not in _NOT_PRELOADED))

    def ready() -> None:
        process = context.Process(target=_nothing, daemon=True)
        process.start()
        process.join(PROBE_BATCH_TIMEOUT_S)

    thread = threading.Thread(target=ready, name="ioprof-fork-server", daemon=True)
    thread.start()
    return thread


def _unguarded_main() -> str:
    """Why a fork server cannot start workers for this script ("" where it can): a script run
    without a ``__main__`` guard would run again in each of them."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path and not getattr(main, "__spec__", None):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                guarded = bool(_GUARD.search(f.read()))
        except OSError:
            guarded = False
        if not guarded:
            return 'your script has no `if __name__ == "__main__":` guard: a fork server would run it again'
    return ""


# Not imported into the fork server: its own, and the script's (which the server cannot import:
# Python 3.11's fork server never runs the main module, whatever its preload list says).
_NOT_PRELOADED = frozenset({"__main__", "__mp_main__", "builtins", "copyreg", "_codecs"})


def _for_forkserver(loader: Any, dataset: Any) -> tuple[str, list[str]]:
    """Why the probe's workers cannot come from a fork server ("" where they can), and the modules
    the server should import before it forks them (``modules_to_preload``)."""
    why = _unguarded_main()
    if why:
        return why, []
    handed = (dataset, loader.collate_fn, getattr(loader.worker_init_fn, "own", loader.worker_init_fn))
    try:
        return "", modules_to_preload(pickle.dumps(handed, protocol=2, fix_imports=False))
    except Exception:  # protocol 2 names its modules in the open; the default protocol may still do
        pass
    try:
        pickle.dumps(handed)
    except Exception as e:  # any failure to pickle: the fork server cannot be handed the dataset
        return f"your dataset cannot be sent to another process ({type(e).__name__})", []
    return "", modules_to_preload(b"")


def modules_to_preload(pickled: bytes) -> list[str]:
    """The modules a fork server imports before it forks workers: torch's DataLoader, and every
    module a pickle (protocol 2) of what the workers are handed names."""
    names = {"torch.utils.data"}
    for op, arg, _ in pickletools.genops(pickled) if pickled else ():
        if op.name == "GLOBAL" and isinstance(arg, str):
            names.add(arg.split(" ", 1)[0])
    return sorted(n for n in names if n not in _NOT_PRELOADED)


def _loader_alone(
    loader: Any, view: Any, workers: int, seconds: float, batch: int, context: Any, early: bool = True
) -> DecodeCeiling:
    """The user's dataset (its in-memory view), collate and batch size in a fresh DataLoader, no model:
    its rate, and the work a sample took in its workers (their stages timed as a cell's)."""
    kwargs: dict[str, Any] = {
        "num_workers": workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": False,  # decode and augment only: pinning is the main process's copy
        "worker_init_fn": getattr(loader.worker_init_fn, "own", loader.worker_init_fn),  # the user's own
        "batch_size": loader.batch_size,
        "drop_last": loader.drop_last,
    }
    if view.positions is not None:  # map-style: drawn at random from what is in memory
        kwargs["sampler"] = _Choices(view.positions)
        kwargs["batch_size"] = loader.batch_size or batch or 1
    if workers:
        kwargs["multiprocessing_context"] = context
        kwargs["prefetch_factor"] = loader.prefetch_factor or 2
        kwargs["timeout"] = PROBE_BATCH_TIMEOUT_S
    with stages.folder_for() as folder:
        if workers:  # the work a sample took in its workers, timed as a cell's (``decode_pace_of``)
            kwargs["worker_init_fn"] = stages.WorkerStages(folder, 0, kwargs["worker_init_fn"])
        images, spans, stopped_by, end_s = _read_alone(view, workers, seconds, batch, early, kwargs)
        # each batch the workers made in the window, with its cycle: where the window holds few turns
        # of them, its interval rests on their batches, as a sweep's ceiling's does (``DecodeCeiling.rate``)
        window = (end_s - sum(spans), end_s)
        made, work = stage_rows.made_and_work(folder, *window, workers) if workers else ((), None)
    setting = LoaderSetting.multiprocess(workers) if workers else LoaderSetting.serial()
    ceiling = replace(_ceiling(setting, view, images, spans, stopped_by), produced=made)
    return replace(ceiling, work_s_per_sample=work[0], work_seen=work[1]) if work else ceiling


def _read_alone(
    view: Any, workers: int, seconds: float, batch: int, early: bool, kwargs: dict[str, Any]
) -> tuple[list[int], list[float], str, float]:
    """A fresh DataLoader over the view timed (``_time_batches``), then its workers ended; and when."""
    from torch.utils.data import DataLoader

    with warnings.catch_warnings():  # torch's warning about more workers than cores: ioprof's choice
        warnings.simplefilter("ignore", UserWarning)
        probe = DataLoader(view.dataset, **kwargs)
        probe._ioprof_probe = True  # not one of the user's loaders
        it = iter(probe)
    try:
        images, spans, stopped_by = _time_batches(
            it, workers, seconds, kwargs["batch_size"] or batch or 1, early
        )
        end_s = time.perf_counter()
    except RuntimeError as e:
        if "timed out" in str(e):
            raise ProbeAbandoned(
                f"at {workers} worker(s) no batch came within {PROBE_BATCH_TIMEOUT_S:.0f} s; its workers "
                "were ended (a worker stuck at start, or in a thread pool it inherited)"
            ) from e
        raise
    finally:
        end_loader_workers(it)  # the training waits for the probe: its workers' batches in hand are dropped
        del it
    return images, spans, stopped_by, end_s


def _ceiling(
    setting: LoaderSetting, view: Any, images: list[int], spans: list[float], stopped_by: str
) -> DecodeCeiling:
    """The user's pipeline alone from memory, as timed at ``setting``: its batches' images and spans."""
    elapsed = max(sum(spans), 1e-9)
    return DecodeCeiling(
        loader=setting.kind,
        workers=setting.workers,
        img_per_s=sum(images) / elapsed,
        images=sum(images),
        elapsed_s=elapsed,
        cache=CacheInfo(
            "memory",
            1.0,
            True,
            "memfd",
            f"in memory: {view.source} ({view.bytes / 1e6:,.1f} MB) copied into RAM",
        ),
        batch_images=tuple(images),
        batch_s=tuple(spans),
        sample_files=view.files,
        sample_bytes=view.bytes,
        stopped_by=stopped_by,
        looks=LOOKS,
    )


def _threads_alone(
    loader: Any, view: Any, workers: int, seconds: float, batch: int, early: bool = True
) -> DecodeCeiling:
    """The same dataset (its in-memory view), collate and batch size made by ``workers`` threads of
    this one process (a thread pool, ``2 × workers`` samples in flight, taken in order), no model:
    beside the worker processes at the same count, whether the pipeline's work releases the GIL.
    The pool is shut down before this returns: nothing of the probe lingers in the training."""
    import collections
    from concurrent.futures import ThreadPoolExecutor

    size = loader.batch_size or batch or 1
    collate = loader.collate_fn

    def batches(pool: ThreadPoolExecutor) -> Generator[Any, None, None]:
        indices = iter(_Choices(view.positions))
        flight = collections.deque(
            pool.submit(view.dataset.__getitem__, next(indices)) for _ in range(2 * workers)
        )
        while True:
            samples = []
            for _ in range(size):
                samples.append(flight.popleft().result())
                flight.append(pool.submit(view.dataset.__getitem__, next(indices)))
            yield collate(samples)

    with ThreadPoolExecutor(workers, thread_name_prefix="ioprof-probe") as pool:
        it = batches(pool)
        try:
            images, spans, stopped_by = _time_batches(it, workers, seconds, size, early)
        finally:
            it.close()
            pool.shutdown(wait=True, cancel_futures=True)
    return _ceiling(LoaderSetting("threads", workers), view, images, spans, stopped_by)


def _time_batches(
    it: Any, workers: int, seconds: float, batch: int, early: bool = True
) -> tuple[list[int], list[float], str]:
    """Batches after the start-up burst, for ``seconds`` at most: from a share of it on
    (``PROBE_DECODE_MIN_SHARE``), until ±5 % at a fixed look (``stats.is_look``) where ``early``."""
    from ioprof.core.stats import Looks, ratio_interval
    from ioprof.measure.batchtree import images_in

    for _ in range(max(1, workers)):  # the start-up burst
        next(it)
    images: list[int] = []
    spans: list[float] = []
    looks = Looks(4 * max(1, workers), seconds * PROBE_DECODE_MIN_SHARE)
    started = last = time.perf_counter()
    for b in it:
        now = time.perf_counter()
        images.append(images_in(b, batch))
        spans.append(now - last)
        last = now
        if now - started >= seconds:
            return images, spans, "seconds"
        if early and looks.due(len(spans), now - started):
            interval = ratio_interval([float(n) for n in images], spans, max(1, workers), LOOKS)
            if interval.known and interval.rel_half_width <= TARGET_REL_HALF_WIDTH:
                return images, spans, "interval"
    return images, spans, "batches"


def probe_pipeline(
    loader: Any,
    settings: dict[str, Any],
    seconds: float,
    *,
    batch_images: int = 0,
    local_rank: int = 0,
    local_world_size: int = 1,
) -> dict[str, Any]:
    """The user's loader alone over an in-memory sample, and its source read alone, in a pause of
    about ``seconds`` (its phases share it). Loose files are read alone first, cold, and the copy
    in memory is made from those same reads; a stream's copy comes first (it tells the bytes of a
    sample, which turn the stream's MB/s into samples/s)."""
    from ioprof.sources import bytes_per_sample

    phases: dict[str, float] = {}
    source = settings["source"]
    storage_s = seconds * PROBE_STORAGE_SHARE
    decode_s = seconds - storage_s
    kept: dict[str, bytes] = {}
    found: PageRuns = {}  # the pages of your files the storage read evicted while cached
    storage: list[StorageCeiling] = []
    storage_note = ""
    files_first = source is not None and source.file_a_sample and local_rank == 0
    if files_first:
        storage, storage_note = _timed(
            phases,
            "storage read alone",
            _probe_storage,
            settings,
            None,
            local_rank,
            local_world_size,
            storage_s,
            kept,
            found,
        )
    decode, note, start, error, per_sample = _probe_decode(
        loader, settings, decode_s, batch_images, phases, kept
    )
    # the bytes a sample takes: all of them ÷ all its samples where the dataset states both (an
    # index), else those of the samples copied, else its files' own count of samples
    stated = source.stated_bytes_per_sample if source is not None else None
    per_sample = stated or per_sample or bytes_per_sample(source)
    stopped = release_fork_server()
    if not files_first:
        storage, storage_note = _timed(
            phases,
            "storage read alone",
            _probe_storage,
            settings,
            per_sample,
            local_rank,
            local_world_size,
            storage_s,
            None,
            found,
        )
    # what your training had in the page cache, it has again: read back, in no more time than the
    # storage read itself took (what is left is said)
    back = (
        _timed(phases, "cached pages read back", read_back, found, phases["storage read alone"])
        if held_any(found)
        else None
    )
    return {
        "phases_s": phases,
        "read_back": back,
        "fork_server_stopped": stopped,
        "decode": decode,
        "storage": storage,
        "sent": _timed(phases, "dataset pickled", sent_to_each_worker, loader, settings),
        "decode_note": note,
        "start_note": start,
        "storage_note": storage_note,
        "error": error,
        "bytes_per_sample": per_sample,
    }


class _Counted:
    """A pickle's sink that keeps nothing: its bytes counted, and stopped once it has taken
    ``at_most_s`` (``_TooLong``)."""

    def __init__(self, at_most_s: float) -> None:
        self.bytes = 0
        self.until = time.perf_counter() + at_most_s

    def write(self, b: Any) -> int:
        self.bytes += len(b)
        if time.perf_counter() > self.until:
            raise _TooLong
        return len(b)


class _TooLong(Exception):
    pass


def sent_to_each_worker(
    loader: Any, settings: dict[str, Any], at_most_s: float = PICKLE_AT_MOST_S
) -> dict[str, Any] | None:
    """What a worker started by spawn or a fork server is handed at every start: the dataset
    pickled (its bytes, and the seconds pickling took here; each worker unpickles as many),
    counted as written and kept nowhere; a pickle still going after ``at_most_s`` is stopped, and
    its bytes so far are a lower bound (``whole``: False). None where workers are forked (they
    share the training process's memory: nothing is sent) or there are none."""
    from multiprocessing.reduction import ForkingPickler

    method = settings["start_method"]
    if not settings["num_workers"] or not (method.startswith("spawn") or method.startswith("forkserver")):
        return None
    sink = _Counted(at_most_s)
    t0 = time.perf_counter()
    try:
        ForkingPickler(sink).dump(loader.dataset)  # as a worker's start pickles it (torch's tensors: handles)
    except _TooLong:
        return {"bytes": sink.bytes, "seconds": time.perf_counter() - t0, "whole": False, "error": ""}
    except Exception as e:  # the loader's own start would have failed the same way: say so, go on
        return {"bytes": None, "seconds": None, "error": f"{type(e).__name__}: {e}"[:200]}
    return {"bytes": sink.bytes, "seconds": time.perf_counter() - t0, "whole": True, "error": ""}


def _timed(phases: dict[str, float], name: str, fn: Any, *args: Any) -> Any:
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - t0  # a reading in halves: both


def _probe_decode(
    loader: Any,
    settings: dict[str, Any],
    seconds: float,
    batch: int,
    phases: dict[str, float],
    read: dict[str, bytes],
) -> tuple[list[DecodeCeiling], str, str, str, float | None]:
    """Decode ceilings at the probe's worker counts, why they were not measured, how its workers
    started (where not as the loader's), an error that stopped them, and the source's bytes per
    sample as the copy in memory showed them."""
    from ioprof import sources
    from ioprof.host.machine import usable_cores

    if getattr(loader, "batch_size", None) is None and not batch and not settings.get("iterable"):
        return [], "your loader has no batch size ioprof could read (a batch sampler)", "", "", None
    source = settings["source"]
    if source is None or (
        source.kind == sources.opened.KIND and settings["source_unknown"]
    ):  # seen, not said
        return [], f"decode alone not measured: {settings['source_unknown']}", "", "", None
    view = _timed(
        phases,
        "copy into memory",
        lambda: sources.in_memory(source, loader.dataset, workers=max(1, settings["num_workers"]), read=read),
    )
    if isinstance(view, str):
        return [], f"decode alone not measured: {view}", "", "", None
    # bytes per sample: per file copied, or — rows of a table (Arrow), which are no files — per row
    rows = len(view.positions) if view.positions else 0
    per_sample = view.bytes / view.files if view.files else (view.bytes / rows if rows else None)
    context, note = start_method(loader, settings, view.dataset)
    decode: list[DecodeCeiling] = []
    counts = probe_workers(settings["num_workers"], usable_cores())
    # the loader's own count in threads too, where its samples can be drawn by position (map-style)
    # and it has two workers or more (one thread is one process alone), beside one process alone
    # (the rate of one at a time: what threads make where the GIL is held); the same seconds shared
    # among them all, and the seconds a reading did not need (its interval narrow early) left to
    # the readings after it
    threads = settings["num_workers"] if view.positions is not None and settings["num_workers"] >= 2 else 0
    if threads:
        counts = sorted({0, *counts})
    shards = settings.get("shards") if settings.get("iterable") else None
    readings = [(w, "processes") for w in sorted({_fed(w, shards) for w in counts})]
    readings += [(threads, "threads")] if threads else []
    error = ""
    try:
        _read_decode(
            decode, readings, seconds, lambda *a: _read_one(phases, loader, view, batch, context, *a)
        )
    except ProbeAbandoned as e:
        error = f"the probe was abandoned: {e}"
    except Exception as e:  # the user's dataset may not survive a second loader: say so, go on
        error = f"{type(e).__name__}: {e}"[:300]
    finally:
        view.close()
    return _dealt_out(decode, counts, shards), "", note, error, per_sample


def _fed(workers: int, shards: int | None) -> int:
    """The workers of a loader that have data to make batches from: no more than the shards its
    dataset deals out among them (``sources.shards.shard_count``)."""
    return min(workers, shards) if shards else workers


def _dealt_out(decode: list[DecodeCeiling], counts: list[int], shards: int | None) -> list[DecodeCeiling]:
    """The readings as the worker counts they stand for: a loader with more workers than its dataset
    has shards is read at as many workers as shards — the rest would have nothing to make, and a
    worker out of data costs no CPU — and its ceiling is that reading, saying how many had data."""
    if not shards:
        return decode
    read = {d.workers: d for d in decode if d.loader == "multiprocess"}
    dealt = [d for d in decode if d.loader != "multiprocess"]
    for w in (w for w in counts if w and _fed(w, shards) in read):
        d = read[_fed(w, shards)]
        dealt.append(d if w == d.workers else replace(d, workers=w, fed=d.workers))
    return dealt


def _read_one(
    phases: dict[str, float],
    loader: Any,
    view: Any,
    batch: int,
    context: Any,
    w: int,
    kind: str,
    s: float,
    early: bool,
) -> DecodeCeiling:
    """One decode reading: ``w`` worker processes (0: one process alone) or ``w`` threads, ``s`` seconds
    at most (``early``: less, where its interval is narrow before)."""
    if kind == "threads":
        return _timed(phases, f"decode in {w} thread(s)", _threads_alone, loader, view, w, s, batch, early)
    name = f"decode at {w} worker(s)" if w else "decode in one process"
    return _timed(phases, name, _loader_alone, loader, view, w, s, batch, context if w else None, early)


def _read_decode(
    decode: list[DecodeCeiling], readings: list[tuple[int, str]], seconds: float, read: Any
) -> None:
    """The readings in turn, into ``decode``, sharing ``seconds``: what one did not need (its
    interval narrow early) is left to those after it. Where threads are read, the call between
    threads, one process and the processes (``conclude.threads``) compares readings taken one after
    another on a host whose pace moves between them (CI read the same processes at 159 and 180):
    they are read in a palindrome instead — each in two halves, on the way there and back, the
    threads' two in the middle, every half started afresh and given its whole share — and each
    reading's halves pooled, so that all of them are centred on the same moment and a steady drift
    of the host's pace moves them alike."""
    threads = next((w for w, kind in readings if kind == "threads"), 0)
    if not threads:
        left_s = seconds
        for i, (w, kind) in enumerate(readings):
            each_s = left_s / (len(readings) - i)
            decode.append(read(w, kind, each_s, True))
            left_s -= min(each_s, decode[-1].elapsed_s)
        return
    half_s = seconds / (2 * len(readings))
    order = [r for r in readings if r[1] != "threads"] + [(threads, "threads")]
    there = [read(w, kind, half_s, False) for w, kind in order]
    back = [read(w, kind, half_s, False) for w, kind in reversed(order)]
    decode.extend(a.pooled(b) for a, b in zip(there, reversed(back), strict=True))


def _probe_storage(
    settings: dict[str, Any],
    per_sample: float | None,
    local_rank: int,
    local_world_size: int,
    seconds: float,
    keep: dict[str, bytes] | None,
    found: PageRuns,
) -> tuple[list[StorageCeiling], str]:
    """The source read alone, once per host, at every local rank's readers together."""
    from ioprof import sources

    source = settings["source"]
    if source is None:
        return [], "the storage was not read alone: your dataset does not say what it reads"
    if local_rank != 0:
        return [], "the storage is read alone once per host, by local rank 0, for all its ranks"
    readers = max(1, settings["num_workers"]) * local_world_size
    try:
        ceiling = sources.read_alone(
            source,
            readers,
            max_seconds=seconds,
            bytes_per_sample=per_sample if source.urls or not source.file_a_sample else None,
            keep=keep,
            found=found,
            in_order=settings.get("sampler") == "SequentialSampler",
        )
    except OSError as e:
        return [], f"the storage was not read alone: {source.where} could not be read ({e})"
    if _served_by_cache(source, ceiling):
        return [], (
            f"the storage could not be read alone cold: {pct(ceiling.cache.resident_fraction, 0)} of what "
            "it read stayed in the page cache after eviction (pages mapped by a process, such as the "
            "loader's workers that read them: a memory-mapped file's), so what it read came from memory"
        )
    return [replace(ceiling, shared_by=local_world_size)], ""


def _served_by_cache(source: Any, ceiling: StorageCeiling) -> bool:
    """Whether a read alone meant to be cold came from the page cache: its pages stayed after
    eviction, on storage that is not memory itself (a tmpfs's figure is its storage's). Its
    figure is then the cache's, not the storage's, and is no storage ceiling."""
    cache = ceiling.cache
    if not source.root or ceiling.emulated or cache.regime != "cold" or cache.verified:
        return False
    if cache.resident_fraction <= COLD_MAX_RESIDENT_FRACTION:
        return False
    return not filesystem_of(source.items[0]).ram_backed
