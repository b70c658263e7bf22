"""Time per stage of one sample, inside a DataLoader's workers as they really run.

Each worker (fork, spawn or forkserver alike) is given a ``worker_init_fn`` (``WorkerStages``)
that, after the loader's own, times in that worker only — the training process's objects are
never changed:

- the batch's fetch (every ``__getitem__`` of the batch and the collate) and the collate apart,
  by wrapping torch's fetcher in that process;
- in an ImageFolder-like dataset (a ``loader`` and a ``transform``): the file read and the
  decode apart — PIL decodes lazily (``Image.open`` reads the header, ``convert()`` reads and
  decodes the pixels), so the file object's reads are timed and the rest is decode, and a slow
  network read is never charged to decode — then each transform of a ``transforms.Compose``
  (v1 or v2) under its class name, and ``target_transform``;
- what is left of the fetch is ``rest of __getitem__`` (the dataset's own code, the sampler's
  indices). A dataset that is not ImageFolder-like is timed as ``__getitem__`` and collate, and
  the report says so.

A loader without workers (``num_workers=0``) is timed the same way in the training process for
as long as it is watched, then restored. Each worker appends one JSON line per batch to
``stages-<pid>-<tag>.jsonl`` in a folder the caller owns (written as each batch is made);
``summarize`` turns the lines of a window into shares with intervals. In the training process
the pin-memory copy is timed per batch (``pins.PinTimes``). What the timers cost is measured in
each worker (``calibrate``) and reported.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ioprof.core.inside import PIN_MEMORY_COPY, READ, REST_OF_GETITEM, WAIT_FOR_THE_BATCH
from ioprof.measure.batchtree import images_in
from ioprof.measure.stageclock import StageClock

ROWS_GLOB = "stages-*.jsonl"
DECODE, COLLATE, GETITEM = "decode", "collate", "__getitem__"
NEXT = "next(iterator)"  # an iterable dataset's stage: its pipeline's next sample (or batch)
# What is left of a sample's fetch, by what could be timed apart (a row's "seen")
REST_NAMES = {
    "stages": REST_OF_GETITEM,  # the file loader (read, decode) and the transforms timed
    "reads": "decode + rest of __getitem__",  # its reader's file reads and the transforms timed
    "transforms": "read + decode + rest of __getitem__",  # only the transforms timed
    "getitem": GETITEM,
    "iterator": NEXT,
}
PIN, WAIT = PIN_MEMORY_COPY, WAIT_FOR_THE_BATCH

_CLOCK: StageClock | None = None  # this process's clock while its loader is timed


def current() -> StageClock | None:
    """This process's clock, while its loader's stages are timed."""
    return _CLOCK


def mark() -> tuple[float, float | None]:
    """Now, for ``since``: on this process's clock where its stages are timed, else the wall's."""
    clock = _CLOCK
    return clock.mark() if clock is not None else (time.perf_counter(), None)


def since(start: tuple[float, float | None]) -> float:
    """Seconds since ``start`` (``mark``) that were a stage's own: less the thread's wait for a core
    and the collector's pauses in between, where ``start`` was read on the stage clock (a stage
    timed by the wall clock alone holds whatever wait the scheduler put in it: with 8 workers on 2
    cores, most of a decode's time)."""
    clock, (t0, q0) = _CLOCK, start
    if clock is None or q0 is None:
        return time.perf_counter() - t0
    return clock.since((t0, q0))


class TimedStage:
    """A callable timed as one stage under its name: a transform, a custom file loader."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        clock = _CLOCK
        if clock is None:
            return self.fn(*args, **kwargs)
        mark = clock.mark()
        out = self.fn(*args, **kwargs)
        clock.add(self.name, clock.since(mark))
        return out

    def __getattr__(self, name: str) -> Any:  # code that inspects its transforms still sees theirs
        if name == "fn":
            raise AttributeError(name)
        return getattr(self.fn, name)

    def __repr__(self) -> str:
        return repr(self.fn)


class _TimedReads:
    """A file whose reads are timed (PIL reads the header at open and the pixels at convert())."""

    def __init__(self, f: Any, clock: StageClock | None = None) -> None:
        self._f = f
        self._clock = clock
        self.read_s = 0.0
        self.calls = 0  # timed reads: each costs a timer, counted with the others

    def _timed(self, method: str, *args: Any) -> Any:
        assert self._clock is not None  # made with the loader's clock (a subclass reads its own)
        mark = self._clock.mark()
        out = getattr(self._f, method)(*args)
        self.read_s += self._clock.since(mark)
        self.calls += 1
        return out

    def read(self, *args: Any) -> Any:
        return self._timed(READ, *args)

    def readinto(self, *args: Any) -> Any:
        return self._timed("readinto", *args)

    def read1(self, *args: Any) -> Any:
        return self._timed("read1", *args)

    def readline(self, *args: Any) -> Any:
        return self._timed("readline", *args)

    def __getattr__(self, name: str) -> Any:
        if name == "_f":
            raise AttributeError(name)
        return getattr(self._f, name)


class _ClockedReads(_TimedReads):
    """A file handed out by a dataset's reader: each read is added to this process's clock as
    ``read`` (PIL reads lazily, inside the dataset's own code)."""

    def _timed(self, method: str, *args: Any) -> Any:
        clock = _CLOCK
        if clock is None:
            return getattr(self._f, method)(*args)
        mark = clock.mark()
        out = getattr(self._f, method)(*args)
        clock.add(READ, clock.since(mark))
        return out


def _with_getitem(obj: Any, marker: str, wrap: Callable[[Any, Any, Any], Any]) -> Callable[[], None] | None:
    """Give this one object (this process's copy) a ``__getitem__`` that calls ``wrap(original,
    self, index)``, through a subclass of its own class marked ``marker``. Returns the undo, or
    None where it already has one or its class cannot be changed (slots, a C type)."""
    cls = type(obj)
    if getattr(cls, marker, False) or not hasattr(cls, "__getitem__"):
        return None

    def __getitem__(self: Any, index: Any) -> Any:
        return wrap(cls.__getitem__, self, index)

    try:
        obj.__class__ = type(cls.__name__, (cls,), {"__getitem__": __getitem__, marker: True})
    except TypeError:
        return None
    return lambda: setattr(obj, "__class__", cls)


def _clocked_file(getitem: Any, self: Any, index: Any) -> Any:
    item = getitem(self, index)
    if isinstance(item, tuple) and item and hasattr(item[0], "read") and hasattr(item[0], "seek"):
        return (_clocked(item[0]), *item[1:])
    return item


def _clocked(f: Any) -> Any:
    """A file whose reads are timed where they reach the file system: a buffered file not read yet
    (``open(path, "rb")``) is taken apart, its raw file timed and a buffer put back above it, so
    that PIL's header reads of a byte or two come from the buffer untimed; any other file has each
    of its reads timed."""
    if isinstance(f, io.BufferedReader) and not f.closed:
        with contextlib.suppress(OSError, ValueError):
            if f.tell() == f.raw.tell():  # nothing buffered: the raw file is where the reader is
                return io.BufferedReader(_ClockedReads(f.detach()))
    return _ClockedReads(f)


def _time_reader(reader: Any) -> Callable[[], None] | None:
    """Time the reads of the files a dataset's reader hands out (timm's ``reader[index]`` gives
    ``(open file, target)``), in this process's copy only. Returns the undo, or None."""
    return _with_getitem(reader, "_ioprof_timed", _clocked_file)


def _time_samples(dataset: Any) -> Callable[[], None] | None:
    """Time each sample's whole ``__getitem__`` on the dataset the loader indexes (this process's
    copy only), by its index. None where the fetcher never calls it one sample at a time (a
    dataset with ``__getitems__``) or its class cannot be changed."""
    if getattr(dataset, "__getitems__", None):
        return None
    return _with_getitem(dataset, "_ioprof_samples", _timed_sample)


def _timed_sample(getitem: Any, self: Any, index: Any) -> Any:
    c = _CLOCK
    if c is None:
        return getitem(self, index)
    mark = c.sample_mark()
    item = getitem(self, index)
    c.sample(index, mark)
    return item


def sample_name(dataset: Any, index: Any) -> str:
    """The file a sample comes from, where the dataset says (ImageFolder's ``samples``, ioprof's
    own ``paths``, timm's ``filename``), through ``Subset``; "" where it does not."""
    for _ in range(8):
        indices = getattr(dataset, "indices", None)
        inner = getattr(dataset, "dataset", None)
        if indices is None or inner is None:
            break
        dataset, index = inner, indices[index]
    samples = (
        getattr(dataset, "samples", None) or getattr(dataset, "imgs", None) or getattr(dataset, "paths", None)
    )
    if isinstance(samples, list) and isinstance(index, int) and 0 <= index < len(samples):
        entry = samples[index]
        return str(entry[0] if isinstance(entry, tuple) else entry)
    filename = getattr(dataset, "filename", None)
    if callable(filename):
        return str(filename(index))
    return ""


def timed_pil_loader(path: str) -> Any:
    """torchvision's ``pil_loader`` (open, then ``convert("RGB")``) with the read and the decode
    timed apart: the file's open and reads are ``read``, the rest is ``decode``."""
    from PIL import Image

    clock = _CLOCK
    if clock is None:
        with open(path, "rb") as raw:
            return Image.open(raw).convert("RGB")
    mark = clock.mark()
    with open(path, "rb", buffering=0) as raw:
        t_open = clock.since(mark)
        f = _TimedReads(raw, clock)
        # PIL parses a header a byte or two at a time: served from a buffer, as ``open(path, "rb")``
        # serves them, only the buffer's refills reach the file system, and only they are timed
        with io.BufferedReader(f) as buffered:
            out = Image.open(buffered).convert("RGB")
    total = clock.since(mark)
    read = t_open + f.read_s
    clock.add(READ, read)
    clock.add(DECODE, max(0.0, total - read))
    clock.calls += f.calls
    return out


class _TimedCollate:
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.last_s = 0.0

    def __call__(self, data: Any) -> Any:
        clock = _CLOCK
        if clock is None:  # no longer timed: its time is read only while a clock is
            return self.fn(data)
        mark = clock.mark()
        out = self.fn(data)
        self.last_s = clock.since(mark)
        return out


def _timed_fetch(original: Callable[[Any, Any], Any], clock: Callable[[], StageClock | None]) -> Any:
    """A fetcher's ``fetch`` that times the batch and its collate, when ``clock()`` gives one."""

    def fetch(fetcher: Any, index: Any) -> Any:
        c = clock()
        if c is None:
            return original(fetcher, index)
        collate = fetcher.collate_fn
        if not isinstance(collate, _TimedCollate):
            collate = fetcher.collate_fn = _TimedCollate(collate)
        collate.last_s = 0.0
        t0, q0 = c.mark()
        g0 = c.gc_s
        data = original(fetcher, index)
        t1, q1 = c.mark()
        collected = c.gc_s - g0  # the mark's waits hold it too: the queue's share is the rest
        if getattr(fetcher, "auto_collation", False) and hasattr(index, "__len__"):
            samples = items = len(index)
        else:  # batch_size=None: the dataset makes whole batches itself (WebDataset's .batched())
            samples = images_in(data, 1)
            items = len(index) if hasattr(index, "__len__") else 1  # the dataset's items it took
        first = not getattr(fetcher, "_ioprof_seen", False)  # torch makes a fetcher for every pass
        if first:
            fetcher._ioprof_seen = True
        queued = q1 - q0 - collected if c.queue.here() else None
        c.batch(samples, t1 - t0, collate.last_s, t1, first, queued, collected, items)
        return data

    fetch._ioprof = True  # type: ignore[attr-defined]
    return fetch


def _patch_fetcher_classes() -> None:
    """In a worker process: time every fetch of this process (only this process is changed)."""
    from torch.utils.data._utils import fetch as fetch_mod

    for cls in (fetch_mod._MapDatasetFetcher, fetch_mod._IterableDatasetFetcher):
        if not getattr(cls.fetch, "_ioprof", False):
            cls.fetch = _timed_fetch(cls.fetch, lambda: _CLOCK)  # type: ignore[method-assign]


# -- the dataset's loader and transforms --------------------------------------------------------


def _innermost(dataset: Any) -> Any:
    """The dataset that loads and transforms (through ``Subset``-like wrappers' ``.dataset``)."""
    seen: set[int] = set()
    while id(dataset) not in seen:
        seen.add(id(dataset))
        if hasattr(dataset, "transform") or hasattr(dataset, "loader") or _composes(dataset):
            return dataset
        inner = getattr(dataset, "dataset", None)
        if inner is None:
            return dataset
        dataset = inner
    return dataset


def _names(transforms: Sequence[Any]) -> list[str]:
    """Class names, numbered where one class appears more than once ("Resize", "Resize (2)")."""
    out: list[str] = []
    for t in transforms:
        base = type(t).__name__
        n = sum(1 for o in out if o == base or o.startswith(f"{base} ("))
        out.append(base if n == 0 else f"{base} ({n + 1})")
    return out


def instrument(dataset: Any) -> tuple[str, Callable[[], None]]:
    """Time the file loader and each transform of ``dataset`` (or what it wraps). Returns what
    could be seen (``stages`` | ``getitem``) and how to undo it."""
    ds = _innermost(dataset)
    undo: list[Callable[[], None]] = []
    seen = "getitem"
    if getattr(ds, "ioprof_stages", False):  # ioprof's own dataset times its read and decode itself
        seen = "stages"
    loader = getattr(ds, "loader", None)
    if callable(loader) and not isinstance(loader, TimedStage):
        ds.loader = timed_pil_loader if _is_pil_loader(loader) else TimedStage("load (read + decode)", loader)
        undo.append(lambda: setattr(ds, "loader", loader))
        seen = "stages"
    reader = getattr(ds, "reader", None)
    if seen == "getitem" and reader is not None:
        untime = _time_reader(reader)
        if untime is not None:
            undo.append(untime)
            seen = "reads"
    transform = getattr(ds, "transform", None)
    if isinstance(getattr(transform, "transforms", None), list):
        _time_each(transform, undo)
    elif callable(transform) and not isinstance(transform, TimedStage):
        ds.transform = TimedStage(type(transform).__name__, transform)
        undo.append(lambda: setattr(ds, "transform", transform))
    others = [c for c in _composes(ds) if c is not transform]
    for compose in others:
        _time_each(compose, undo)
    if seen == "getitem" and (transform is not None or others):
        seen = "transforms"
    target = getattr(ds, "target_transform", None)
    if callable(target) and not isinstance(target, TimedStage):
        ds.target_transform = TimedStage("target_transform", target)
        undo.append(lambda: setattr(ds, "target_transform", target))

    def undo_all() -> None:
        for u in reversed(undo):
            u()

    return seen, undo_all


def _time_each(compose: Any, undo: list[Callable[[], None]]) -> None:
    """Time each transform of ``compose`` (a list in its ``transforms``) under its class name."""
    inner = compose.transforms
    if any(isinstance(t, TimedStage) for t in inner):
        return
    compose.transforms = [TimedStage(n, t) for n, t in zip(_names(inner), inner, strict=True)]
    undo.append(lambda: setattr(compose, "transforms", inner))


def _composes(dataset: Any) -> list[Any]:
    """torchvision's ``Compose`` pipelines a dataset holds under any name (``self.tf``,
    ``self.train_transforms``), not only ``transform``: each is timed, and only the one the
    dataset calls shows. Other libraries' Compose classes (albumentations') look at their
    transforms' types, which a timer would hide: they stay untouched. Only the modules already
    imported are looked in: a class never loaded has no instance, and importing torchvision's v2
    (it loads sympy and triton) in every worker a loader starts would cost each epoch's start that much."""
    kinds = _loaded("torchvision.transforms", "Compose") + _loaded("torchvision.transforms.v2", "Compose")
    if not kinds:
        return []
    held = getattr(dataset, "__dict__", {})
    return [
        v for v in held.values() if isinstance(v, kinds) and isinstance(getattr(v, "transforms", None), list)
    ]


def _is_pil_loader(loader: Any) -> bool:
    """torchvision's default loader with the PIL backend, or its pil_loader: read with PIL. (Where
    torchvision's datasets were never imported, the loader is neither.)"""
    folder = sys.modules.get("torchvision.datasets.folder")
    if folder is None:
        return False
    if loader is folder.pil_loader:
        return True
    return loader is folder.default_loader and sys.modules["torchvision"].get_image_backend() == "PIL"


def _loaded(module: str, name: str) -> tuple[type, ...]:
    """``module.name`` where ``module`` is imported already, else nothing."""
    found = getattr(sys.modules.get(module), name, None)
    return (found,) if isinstance(found, type) else ()


def calibrate(clock: StageClock, calls: int = 2000) -> float:
    """Seconds one stage timer adds to the call it wraps, measured here (the no-op's own cost
    taken off), so that the report can say what timing cost."""
    global _CLOCK
    noop = TimedStage("calibration", lambda x: x)
    saved, _CLOCK = _CLOCK, clock
    try:
        # each loop's own time, its wait for a core taken off as from every stage: a preemption
        # inside these few milliseconds would otherwise be charged to every call
        mark = clock.mark()
        for i in range(calls):
            noop(i)
        timed = clock.since(mark)
        bare = noop.fn
        mark = clock.mark()
        for i in range(calls):
            bare(i)
        untimed = clock.since(mark)
    finally:
        _CLOCK = saved
        clock.current.pop("calibration", None)
        clock.calls = 0
    return max(0.0, (timed - untimed) / calls)


def start(
    folder: str,
    tag: int,
    dataset: Any,
    memory: bool = False,
    samples: bool = True,
    worker: int | None = None,
) -> Callable[[], None]:
    """Time this process's stages (in a worker, ``worker`` its id: its copy of the dataset), reading
    its own memory now and then where ``memory``, and each sample where ``samples`` (never in the
    training process: the dataset there may still be pickled for a probe's workers). Returns the
    undo."""
    global _CLOCK
    from torch.utils.data import IterableDataset

    seen, undo = instrument(dataset)
    untime = None
    if isinstance(dataset, IterableDataset):
        seen = "iterator" if seen != "stages" else seen
    elif dataset is not None and samples:
        untime = _time_samples(dataset)
    clock = StageClock(folder, tag, seen, memory, worker)
    clock.name_of = lambda index: sample_name(dataset, index)
    clock.cost_s_per_call = calibrate(clock)
    _CLOCK = clock

    def stop() -> None:
        global _CLOCK
        clock.flush()
        if _CLOCK is clock:
            _CLOCK = None
        if untime is not None:
            untime()
        undo()

    return stop


class WorkerStages:
    """A loader's ``worker_init_fn``: runs the loader's own, then times this worker's stages.
    Picklable, so that spawn and forkserver workers get it too."""

    def __init__(
        self, folder: str, tag: int, own: Callable[[int], None] | None, memory: bool = False
    ) -> None:
        self.folder = folder
        self.tag = tag
        self.own = own
        self.memory = memory  # each worker reads its own memory (``StageClock``)

    def __call__(self, worker_id: int) -> None:
        if self.own is not None:
            self.own(worker_id)
        if not os.path.isdir(self.folder):
            return  # no longer watched
        try:
            from multiprocessing.util import Finalize

            from torch.utils.data import get_worker_info

            info = get_worker_info()
            stop = start(
                self.folder,
                self.tag,
                info.dataset if info is not None else None,
                self.memory,
                worker=info.id if info is not None else worker_id,
            )
            _patch_fetcher_classes()
            Finalize(None, stop, exitpriority=10)  # the last rows, when the worker exits
        except Exception:  # timing is a nicety: a worker must never fail for it
            return


def time_in_process(iterator: Any, folder: str, tag: int, dataset: Any) -> Callable[[], None]:
    """A loader without workers: time its fetcher and dataset in this process. Returns the undo."""
    fetcher = getattr(iterator, "_dataset_fetcher", None)
    if fetcher is None:
        return lambda: None
    stop = start(folder, tag, dataset, samples=False)
    original = type(fetcher).fetch
    timed = _timed_fetch(original, lambda: _CLOCK)
    fetcher.fetch = lambda index: timed(fetcher, index)

    def undo() -> None:
        fetcher.__dict__.pop("fetch", None)
        if isinstance(fetcher.collate_fn, _TimedCollate):
            fetcher.collate_fn = fetcher.collate_fn.fn
        stop()

    return undo


@contextlib.contextmanager
def folder_for(parent: str | None = None) -> Iterator[str]:
    """A fresh folder for a loader's rows, removed afterwards."""
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="ioprof-stages-", dir=parent)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
