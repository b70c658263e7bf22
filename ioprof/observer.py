"""Observing a user's own training, in their process: the DataLoader iterator and optimizer steps.

Attached by ``ioprof run`` (through a ``sitecustomize`` that calls ``attach_from_env``) or by
``ioprof.watch()`` in code. Nothing in the user's files changes: the observer wraps what every
PyTorch loop uses.

- ``DataLoader.__iter__`` tags each iterator with its loader; ``_BaseDataLoaderIter.__next__``
  is timed: the time blocked in it is the data wait of that batch, the time until the next call
  on the same iterator is the step (the user's forward, backward, update — whatever the loop
  does between batches). Pauses far longer than the usual step (an evaluation pass, a
  checkpoint) are left out and counted.
- ``torch.optim`` 's global step hook counts optimizer steps: a loader whose window saw them is
  the training loader; one that saw none is an evaluation loader. Each loader is reported apart.
- The window: per iterator, warm-up batches (the base plus one per worker: the start-up burst)
  are skipped, then ``steps`` batches or ``seconds`` are recorded; after that the loader is no
  longer timed (a flag check per batch), so the script goes on unchanged.
- Kernel I/O counters of the loader's processes (its workers, read from the iterator, or the
  training process for ``num_workers=0``) and the mount's own counters are read at the window's
  ends. After the first training window, the loader can be measured alone (no model): the same
  dataset, transforms and collate at its worker count and at more, and the storage under the
  files it lists, read cold — a bounded pause in the user's training, said in the report.

Observations are written as JSON into the folder ``ioprof run`` gave (atomically, at the
window's end and at exit), or kept in memory for ``ioprof.watch()``.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

ENV = "IOPROF_WATCH"
# A pause between batches longer than this many times the median step is not a step.
GAP_FACTOR = 20.0
GAP_MIN_STEPS = 5
# During a window the loader's processes' I/O counters are read at most this often.
IO_EVERY_S = 0.5


@dataclass(frozen=True)
class WatchConfig:
    """How ``ioprof run`` / ``ioprof.watch`` observe: the window and the probes after it."""

    out_dir: str = ""  # where observation files go ("" keeps them in memory)
    warmup_steps: int = 5
    steps: int = 100
    seconds: float | None = 60.0
    probe: bool = True
    probe_seconds: float = 5.0


def batch_images(batch: Any, default: int) -> int:
    """Samples in a batch: the leading dimension of its first tensor (however nested)."""
    x = batch
    for _ in range(4):
        shape = getattr(x, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(x, dict) and x:
            x = next(iter(x.values()))
        elif isinstance(x, (list, tuple)) and x:
            x = x[0]
        else:
            break
    return default


def dataset_files(dataset: Any, limit: int = 100_000) -> list[str]:
    """The files a dataset reads, where it names them (ImageFolder's ``samples``, ``imgs``,
    lists of paths; through ``Subset`` and ``ConcatDataset``); [] where it does not."""
    inner = getattr(dataset, "dataset", None)
    if inner is not None and hasattr(dataset, "indices"):  # Subset
        files = dataset_files(inner, limit)
        return [files[i] for i in list(dataset.indices)[:limit] if i < len(files)] if files else []
    parts = getattr(dataset, "datasets", None)
    if isinstance(parts, (list, tuple)):  # ConcatDataset
        return [f for d in parts for f in dataset_files(d, limit)][:limit]
    for name in ("samples", "imgs", "files", "paths", "image_paths", "img_paths"):
        items = getattr(dataset, name, None)
        if isinstance(items, (list, tuple)) and items:
            first = items[0]
            path = first[0] if isinstance(first, (list, tuple)) else first
            if isinstance(path, (str, os.PathLike)):
                return [str(i[0] if isinstance(i, (list, tuple)) else i) for i in items[:limit]]
    return []


@dataclass
class _Window:
    """What one loader's window recorded."""

    waits: list[float] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)
    images: list[int] = field(default_factory=list)
    started_at: float = 0.0
    ended_at: float = 0.0
    io_before: Any = None
    io_after: Any = None
    mount_before: Any = None
    mount_after: Any = None
    pids: list[int] = field(default_factory=list)
    optimizer_steps_at_start: int = 0
    optimizer_steps_at_end: int = 0
    gpu: Any = None  # the NVML sampler of the window (CUDA), or None
    telemetry: Any = None  # its GpuTelemetry once the window ended
    io_latest: Any = None  # the last snapshot taken during the window
    mount_latest: Any = None
    io_at: float = 0.0


class _Loader:
    """The recorder of one DataLoader."""

    def __init__(self, watcher: Watcher, loader: Any, index: int) -> None:
        self.watcher = watcher
        self.index = index
        self.loader = weakref.ref(loader)
        self.settings = _settings(loader)
        self.window = _Window()
        self.batches = 0
        self.passes = 0
        self.gaps = 0
        self.done = False
        self._iterator: Any = None
        self._skip = 0
        self._last_return: float | None = None
        self._pending: tuple[float, int] | None = None  # (wait, images) of the last batch, awaiting its step

    # -- called from the patched iterator ------------------------------------------------------

    def new_iterator(self, it: Any) -> None:
        self.passes += 1
        self._iterator = weakref.ref(it)
        self._skip = (self.watcher.config.warmup_steps if self.passes == 1 else 1) + self.settings[
            "num_workers"
        ]
        self._last_return = None
        self._pending = None

    def before_next(self, it: Any, t_call: float) -> None:
        """A call to next(): the time since the previous batch returned was that batch's step."""
        if self._pending is None or self._last_return is None or self._current() is not it:
            return
        wait, images = self._pending
        self._pending = None
        step = t_call - self._last_return
        w = self.window
        if len(w.steps) >= GAP_MIN_STEPS and step > GAP_FACTOR * sorted(w.steps)[len(w.steps) // 2]:
            self.gaps += 1  # an evaluation pass, a checkpoint: not a training step
            return
        w.waits.append(wait)
        w.steps.append(step)
        w.images.append(images)
        cfg = self.watcher.config
        full = len(w.steps) >= cfg.steps
        timed_out = cfg.seconds is not None and t_call - w.started_at >= cfg.seconds
        if full or timed_out:
            self.finish(t_call)

    def after_next(self, it: Any, t_call: float, t_return: float, batch: Any) -> None:
        self.batches += 1
        if self.done or self._current() is not it:
            return
        if self._skip > 0:
            self._skip -= 1
            if self._skip == 0 and not self.window.started_at:
                self.start(it, t_return)
            self._last_return = t_return
            return
        self._pending = (t_return - t_call, batch_images(batch, self.settings["batch_size"] or 1))
        self._last_return = t_return
        w = self.window
        if t_return - w.io_at >= IO_EVERY_S:  # a window cut short (the loader ran out) keeps its counters
            from ioprof import iocounters

            w.io_latest, w.io_at = iocounters.snapshot(w.pids, t_return), t_return
            w.mount_latest = self.watcher.mount_snapshot(self)

    def iterator_ended(self, it: Any) -> None:
        if self._current() is it:
            self._pending = None
            self._last_return = None

    # -- the window ----------------------------------------------------------------------------

    def _current(self) -> Any:
        return self._iterator() if self._iterator is not None else None

    def start(self, it: Any, at: float) -> None:
        from ioprof import iocounters

        w = self.window
        w.started_at = at
        workers = [p.pid for p in getattr(it, "_workers", []) or [] if getattr(p, "pid", None)]
        w.pids = workers or [os.getpid()]
        w.io_before = iocounters.snapshot(w.pids, at)
        w.mount_before = self.watcher.mount_snapshot(self)
        w.optimizer_steps_at_start = self.watcher.optimizer_steps
        w.gpu = self.watcher.gpu_sampler()
        if w.gpu is not None:
            w.gpu.start()

    def finish(self, at: float) -> None:
        from ioprof import iocounters

        if self.done:
            return
        self.done = True
        w = self.window
        w.ended_at = at
        w.io_after = iocounters.snapshot(w.pids, at)
        w.mount_after = self.watcher.mount_snapshot(self)
        w.optimizer_steps_at_end = self.watcher.optimizer_steps
        if w.gpu is not None:
            w.telemetry = w.gpu.stop()
        self.watcher.window_finished(self)

    def io(self) -> Any:
        """The window's kernel I/O counters (up to now, for a window that has not ended)."""
        from ioprof import iocounters

        w = self.window
        if w.io_before is None:
            return None
        now = iocounters.snapshot(w.pids, time.perf_counter())
        after = w.io_after or (now if len(now.counters) >= len(w.io_before.counters) else w.io_latest) or now
        return iocounters.delta(w.io_before, after)

    def dataset_info(self) -> Any:
        """The dataset's description (sizes from a sample of its files), when it lists them."""
        files = self.settings["files"]
        if not files:
            return None
        from ioprof.datasets.discover import ImageList, describe

        images = ImageList(self.settings["dataset_root"], tuple(files), (0,) * len(files), ("",), "listed")
        return describe(images, self.settings["dataset_root"], generated=False, stat_limit=2000)

    @property
    def role(self) -> str:
        w = self.window
        if not w.steps:
            return "unknown"
        return (
            "training"
            if w.optimizer_steps_at_end > w.optimizer_steps_at_start
            or (not self.done and self.watcher.optimizer_steps > w.optimizer_steps_at_start)
            else "evaluation"
        )


def _settings(loader: Any) -> dict[str, Any]:
    ctx = getattr(loader, "multiprocessing_context", None)
    ds = loader.dataset
    try:
        length: int | None = len(ds)
    except TypeError:
        length = None
    files = dataset_files(ds)
    root = getattr(ds, "root", "") or (os.path.commonpath(files[:1000]) if files else "")
    return {
        "num_workers": int(loader.num_workers),
        "batch_size": loader.batch_size,
        "pin_memory": bool(loader.pin_memory),
        "prefetch_factor": loader.prefetch_factor if loader.num_workers else None,
        "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
        "drop_last": bool(loader.drop_last),
        "sampler": type(loader.sampler).__name__,
        "start_method": _start_method(ctx, int(loader.num_workers)),
        "dataset_class": type(ds).__name__,
        "dataset_len": length,
        "dataset_root": str(root),
        "files": files,
    }


def _start_method(ctx: Any, workers: int) -> str:
    """How the loader's workers start: its multiprocessing context, or the platform's default."""
    if not workers:
        return ""
    if ctx is None:
        import multiprocessing

        return f"{multiprocessing.get_start_method()} (default)"
    return ctx.get_start_method() if hasattr(ctx, "get_start_method") else str(ctx)


class Watcher:
    """The observer of one process: every DataLoader it iterates and its optimizer steps."""

    def __init__(self, config: WatchConfig) -> None:
        self.config = config
        self.loaders: dict[int, _Loader] = {}
        self.optimizer_steps = 0
        self.probes: dict[str, Any] = {}
        self.probed_index = 0
        self.probe_pause_s = 0.0
        self.infos: dict[int, Any] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []
        self._mounts: dict[str, Any] = {}
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self.world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)

    # -- hooks ---------------------------------------------------------------------------------

    def install(self) -> None:
        """Patch the DataLoader iterator and hook optimizer steps (torch must be importable)."""
        import importlib

        # from sys.modules: install() may run while ``import torch`` is still under way
        dl = sys.modules.get("torch.utils.data.dataloader") or importlib.import_module(
            "torch.utils.data.dataloader"
        )
        opt = sys.modules.get("torch.optim.optimizer") or importlib.import_module("torch.optim.optimizer")
        register_optimizer_step_post_hook = opt.register_optimizer_step_post_hook
        watcher = self
        original_iter, original_next = dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__

        def __iter__(loader: Any) -> Any:
            it = original_iter(loader)
            watcher.iterating(loader, it)
            return it

        def __next__(it: Any) -> Any:
            rec = getattr(it, "_ioprof_recorder", None)
            if rec is None:
                return original_next(it)
            if rec.done:  # after the window: only count
                batch = original_next(it)
                rec.batches += 1
                return batch
            t_call = time.perf_counter()
            watcher.guard(rec, rec.before_next, it, t_call)
            try:
                batch = original_next(it)
            except StopIteration:
                watcher.guard(rec, rec.iterator_ended, it)
                raise
            watcher.guard(rec, rec.after_next, it, t_call, time.perf_counter(), batch)
            return batch

        dl.DataLoader.__iter__ = __iter__
        dl._BaseDataLoaderIter.__next__ = __next__
        handle = register_optimizer_step_post_hook(lambda *_: watcher._count_step())

        def undo() -> None:
            dl.DataLoader.__iter__ = original_iter
            dl._BaseDataLoaderIter.__next__ = original_next
            handle.remove()

        self._undo.append(undo)

    def guard(self, rec: _Loader, fn: Callable[..., None], *a: Any) -> None:
        """Run a recorder's step; an error of ioprof's own stops watching that loader, never the script."""
        try:
            fn(*a)
        except Exception as e:
            rec.done = True
            self.errors.append(f"{type(e).__name__}: {e}"[:300])

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def _count_step(self) -> None:
        self.optimizer_steps += 1

    def iterating(self, loader: Any, it: Any) -> None:
        if getattr(loader, "_ioprof_probe", False):
            return  # ioprof's own probe of the user's pipeline
        with self._lock:
            rec = self.loaders.get(id(loader))
            if rec is None or rec.loader() is not loader:
                rec = _Loader(self, loader, len(self.loaders) + 1)
                self.loaders[id(loader)] = rec
        it._ioprof_recorder = rec
        rec.new_iterator(it)

    def device(self) -> str:
        """The device the script trains on, as far as torch says (CUDA once initialized)."""
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return f"cuda:{torch.cuda.current_device()}"
        return "cpu"

    def gpu_sampler(self) -> Any:
        """An NVML sampler for the script's GPU, or None on the CPU."""
        if not self.device().startswith("cuda"):
            return None
        import torch

        from ioprof.telemetry import nvml_for_device, open_gpu_sampler

        return open_gpu_sampler(nvml_for_device(torch.device(self.device()))[1])

    def mount_snapshot(self, rec: _Loader) -> Any:
        root = rec.settings["dataset_root"]
        if not root:
            return None
        from ioprof.fetched import MountCounters
        from ioprof.pagecache import filesystem_of

        counters = self._mounts.get(root)
        if counters is None:
            counters = self._mounts[root] = MountCounters(filesystem_of(root))
        return counters.snapshot()

    # -- after a window ------------------------------------------------------------------------

    def window_finished(self, rec: _Loader) -> None:
        """The first training window in this process: measure the pipeline alone, then say so."""
        if rec.role == "training" and self.config.probe and not self.probes:
            t0 = time.perf_counter()
            loader = rec.loader()
            if loader is not None:
                from ioprof.userpipeline import probe_pipeline

                self.probes = probe_pipeline(loader, rec.settings, self.config.probe_seconds)
                self.probed_index = rec.index
            self.probe_pause_s = time.perf_counter() - t0
        self.write("window")

    def observation(self) -> dict[str, Any]:
        """Everything observed so far, as plain data (see ``userpipeline.build_result``)."""
        from ioprof.resultfile import to_jsonable

        loaders = []
        for rec in sorted(self.loaders.values(), key=lambda r: r.index):
            settings = {k: v for k, v in rec.settings.items() if k != "files"}
            w = rec.window
            loaders.append(
                {
                    "index": rec.index, "role": rec.role, "settings": settings, "files_known": len(rec.settings["files"]),
                    "batches": rec.batches, "passes": rec.passes, "gaps_left_out": rec.gaps,
                    "window": "complete" if rec.done else ("partial" if w.steps else "none"),
                    "waits": w.waits, "steps": w.steps, "images": w.images,
                    "window_s": (w.ended_at or time.perf_counter()) - w.started_at if w.started_at else 0.0,
                    "pids": w.pids, "io": to_jsonable(rec.io()),
                    "mount_before": to_jsonable(w.mount_before), "mount_after": to_jsonable(w.mount_after or w.mount_latest),
                    "gpu": to_jsonable(w.telemetry), "dataset_info": to_jsonable(self._info(rec)),
                    "optimizer_steps_in_window": max(0, (w.optimizer_steps_at_end or self.optimizer_steps) - w.optimizer_steps_at_start),
                }
            )  # fmt: skip
        return {
            "pid": os.getpid(), "rank": self.rank, "world_size": self.world_size, "optimizer_steps": self.optimizer_steps,
            "device": self.device(), "loaders": loaders, "probes": to_jsonable(self.probes),
            "probed_index": self.probed_index, "probe_pause_s": self.probe_pause_s, "errors": self.errors,
            "config": asdict(self.config), "written_at": time.time(),
        }  # fmt: skip

    def _info(self, rec: _Loader) -> Any:
        if rec.index not in self.infos:
            try:
                self.infos[rec.index] = rec.dataset_info()
            except Exception:  # a description is a nicety: never let it break the user's run
                self.infos[rec.index] = None
        return self.infos[rec.index]

    def write(self, stage: str) -> None:
        """Save the observation where ``ioprof run`` looks for it (nothing in memory-only mode)."""
        if not self.config.out_dir:
            return
        data = self.observation() | {"stage": stage}
        path = os.path.join(self.config.out_dir, f"observed-{os.getpid()}.json")
        tmp = f"{path}.{stage}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)


# -- attaching to a process started by ``ioprof run`` --------------------------------------------

_ACTIVE: Watcher | None = None
_PATCH_AFTER = ("torch.utils.data.dataloader", "torch.optim.optimizer")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Installs the watcher as soon as torch's DataLoader and optimizer modules are imported,
    without importing torch itself into every process ``ioprof run`` starts."""

    def __init__(self, on_ready: Callable[[], None]) -> None:
        self._on_ready = on_ready
        self._seen: set[str] = set()
        self._wrapped: set[str] = set()

    def complete(self, name: str) -> bool:
        """Fully imported: through this finder, or before it was installed."""
        return name in self._seen or (name in sys.modules and name not in self._wrapped)

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: Any = None) -> Any:
        if name not in _PATCH_AFTER or name in self._wrapped:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module
        self._wrapped.add(name)

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            self._seen.add(name)
            if all(self.complete(m) for m in _PATCH_AFTER):
                self._on_ready()

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def attach_from_env() -> Watcher | None:
    """Attach to this process if ``ioprof run`` asked for it (``IOPROF_WATCH``)."""
    global _ACTIVE
    raw = os.environ.get(ENV)
    if not raw or _ACTIVE is not None:
        return _ACTIVE
    try:
        import psutil  # noqa: F401  (the observer reads the loader's processes through it)
    except ImportError:
        sys.stderr.write("ioprof: cannot observe this process: psutil is not installed in this Python\n")
        return None
    watcher = Watcher(WatchConfig(**json.loads(raw)))
    _ACTIVE = watcher
    installed = threading.Event()

    def ready() -> None:
        if not installed.is_set():
            installed.set()
            watcher.install()

    if all(m in sys.modules for m in _PATCH_AFTER):
        ready()
    else:
        sys.meta_path.insert(0, _AfterImport(ready))
    atexit.register(lambda: watcher.write("exit") if watcher.loaders or watcher.optimizer_steps else None)
    return watcher


# -- watching from code: ``with ioprof.watch(): train()`` ----------------------------------------


class Watch:
    """Observes the DataLoaders and optimizer steps of a block of code (or of one loader)."""

    def __init__(self, loader: Any = None, config: WatchConfig | None = None) -> None:
        self._only = loader
        self.config = config or WatchConfig()
        self.watcher = Watcher(replace(self.config, out_dir=""))
        self._started = time.time()

    def __enter__(self) -> Watch:
        self.watcher.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.watcher.uninstall()

    def __iter__(self) -> Iterator[Any]:
        """``for batch in ioprof.watch(loader)``: iterate that loader, watched."""
        if self._only is None:
            raise TypeError(
                "ioprof.watch() without a loader is used as a context manager: with ioprof.watch(): ..."
            )
        with self:
            yield from self._only

    def result(self) -> Any:
        """The observed run as a result (like ``ioprof run``'s results.json), analyzed."""
        from ioprof.analysis import analyze
        from ioprof.userpipeline import build_result

        observations = [self.watcher.observation()]
        return analyze(build_result(observations, command="ioprof.watch()", exit_code=None, ended="running",
                                    config=self.config, started=self._started))  # fmt: skip

    def write_report(self, out_dir: str) -> str:
        """Write results.json, report.md and plots into ``out_dir``; returns report.md's path."""
        from pathlib import Path

        from ioprof import resultfile
        from ioprof.render import write_report

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        result = self.result()
        resultfile.save(result, out / "results.json")
        return str(write_report(result, out))

    def verdict(self) -> str:
        """The verdict in one line."""
        from ioprof.render.words import verdict_line

        return verdict_line(self.result().analysis).replace("**", "")


def watch(loader: Any = None, *, steps: int = 100, seconds: float | None = 60.0, probe: bool = True) -> Watch:
    """Watch your own training from code.

    ``with ioprof.watch() as w: train()`` observes every DataLoader and optimizer step inside the
    block; ``for batch in ioprof.watch(loader)`` observes one loader. Then ``w.verdict()``,
    ``w.result()`` or ``w.write_report(folder)``.
    """
    return Watch(loader, WatchConfig(steps=steps, seconds=seconds, probe=probe))
