"""Observing a user's own training, in their process: the DataLoader iterator and optimizer steps.

Attached by ``ioprof run`` (through a ``sitecustomize`` that calls ``attach_from_env``) or by
``ioprof.watch()`` in code. Nothing in the user's files changes: the observer wraps what every
PyTorch loop uses.

- ``DataLoader.__iter__`` tags each iterator with its loader; ``_BaseDataLoaderIter.__next__``
  is timed: the time blocked in it is the data wait of that batch, the time until the next call
  on the same iterator is the step (the user's forward, backward, update — whatever the loop
  does between batches). ``window`` keeps the window: warm-up and the batches queued after
  a pause skipped, pauses (an evaluation pass, a checkpoint) left out and counted, the loader's
  processes' and its mount's I/O counters read over the same spans as the steps. On CUDA an
  event on the training stream at each call and return puts the data wait on the GPU's clock.
- ``torch.optim`` 's global step hook counts optimizer steps: a loader between whose batches
  optimizer steps ran (within one pass) is a training loader; one between whose batches none
  ran is an evaluation loader. Each loader is reported apart; the headline is training's.
- After the window of the first training loader (or at the end of its first pass, for a script
  shorter than the window), its pipeline is measured alone (``probe``): its dataset,
  transforms and collate over a sample held in memory (decode and augment only), and the same
  files read cold from their storage — a bounded pause in the user's training, said in the report.

Observations are written as JSON into the folder ``ioprof run`` gave (atomically, at the
window's end and at exit), or kept in memory for ``ioprof.watch()``.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib.abc
import importlib.machinery
import json
import os
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ioprof.measure.stages import batch_images
from ioprof.observe.producers import Producers

ENV = "IOPROF_WATCH"
# A training loader whose pass ended with at least this many measured batches is probed then,
# if its window has not completed before (a script shorter than the window).
PROBE_MIN_UNITS = 5


@dataclass(frozen=True)
class WatchConfig:
    """How ``ioprof run`` / ``ioprof.watch`` observe: the window and the probes after it."""

    out_dir: str = ""  # where observation files go ("" keeps them in memory)
    warmup_steps: int = 5
    steps: int = 100
    seconds: float | None = 60.0
    probe: bool = True
    probe_seconds: float = 10.0
    inside: bool = True  # stages timed in the workers, their memory and threads read


class _Loader:
    """The recorder of one DataLoader: its window (``window``), and what it needs from the
    process around it (the loader's processes, the mount's counters, the GPU's stream)."""

    def __init__(self, watcher: Watcher, loader: Any, index: int) -> None:
        from ioprof.observe.window import LoaderWindow

        self.watcher = watcher
        self.index = index
        self.loader = weakref.ref(loader)
        self.settings = _settings(loader)
        cfg = watcher.config
        workers = self.settings["num_workers"]
        self.window = LoaderWindow(
            steps=cfg.steps,
            seconds=cfg.seconds,
            warmup=cfg.warmup_steps,
            workers=workers,
            prefetch_depth=(self.settings["prefetch_factor"] or 0) * workers,
            read=lambda pids, at: watcher.read_counters(self, pids, at),
            marks=watcher.gpu_marks(),
        )
        self.counters = watcher.mount_counters(self.settings["dataset_root"])
        self.iface = _interface(self.settings["source"])  # a URL source: the interface its bytes arrive on
        self.opened: list[str] = []  # files its workers held open (a dataset that names none)
        self.producers = Producers()
        self._mark: Any = None  # the awaited producer's scheduler totals at the last call
        self.pass_batches = 0  # batches returned in the current pass
        self._pass_open = False  # a pass began and has not ended (by its length, StopIteration, iter())
        import psutil  # noqa: F401  (imported here, not in the first timed batch)

        self.inside = watcher.inside_recorder(self) if cfg.inside else None
        if self.inside is not None:
            self.inside.count_objects = self._dataset_objects
        self.window_start_s: float | None = None
        self.window_end_s: float | None = None
        self.window_started_at: float | None = None  # wall-clock (epoch) seconds, for ground truth outside
        self.window_ended_at: float | None = None
        self.pin_thread: int | None = None  # the pin-memory thread of its current iterator
        self.window_pids: set[int] = set()  # its processes while the window was open
        self.shm_warning = ""  # said as soon as the first batch showed its size
        self._inside_seen: Any = None  # the look inside, once the window ended
        self._undo_in_process: Callable[[], None] | None = None

        self.gpu: Any = None  # the NVML sampler of the window (CUDA), or None
        self.telemetry: Any = None  # its GpuTelemetry once the window ended
        self.thread_names: dict[int, str] = {}  # the threads that called next(), by ident
        self.own_s = 0.0  # time spent in ioprof's own code around next(), all batches
        self.own_calls = 0
        self._iterator: Any = None
        self.untime: Callable[[], None] | None = None  # gives the loader its own worker_init_fn back

    @property
    def done(self) -> bool:
        return self.window.done

    def _dataset_objects(self) -> tuple[int, int, bool]:
        """The Python objects the dataset holds, in this process (what its workers copied)."""
        from ioprof.measure.inside import python_objects

        loader = self.loader()
        return python_objects(loader.dataset) if loader is not None else (0, 0, False)

    # -- called from the patched iterator ------------------------------------------------------

    def before_new_pass(self) -> None:
        """``iter()`` on a loader whose last pass has not ended: trainers that count batches
        themselves (Lightning) never exhaust the iterator — and may have let it go already — so
        its pass ends here."""
        if self._pass_open:
            self._end_pass()

    def new_iterator(self, it: Any) -> None:
        self._iterator = weakref.ref(it)
        self._pass_open = True  # a new pass (persistent workers: the same iterator object, reset)
        self.pass_batches = 0
        workers = [p.pid for p in getattr(it, "_workers", []) or [] if getattr(p, "pid", None)]
        self.producers.forget(set(self.window._pids) - set(workers))
        self.window.pass_started(workers or [os.getpid()])
        if self.inside is not None:
            self.inside.pass_started(time.perf_counter())
        if not self.done:
            self.window_pids.update(workers or [os.getpid()])
        pin = getattr(it, "_pin_memory_thread", None)
        self.pin_thread = (
            pin.ident if pin is not None else (threading.get_ident() if self.settings["pin_memory"] else None)
        )
        loader = self.loader()
        if (
            self.inside is not None
            and not self.settings["num_workers"]
            and loader is not None
            and not self.done
        ):
            self._restore_in_process()
            from ioprof.measure.stages import time_in_process

            self._undo_in_process = time_in_process(it, self.inside.folder, self.index, loader.dataset)

    def untime_workers(self) -> None:
        self._restore_in_process()
        if self.untime is not None:
            untime, self.untime = self.untime, None
            untime()

    def _restore_in_process(self) -> None:
        """A loader without workers: its dataset and fetcher as they were."""
        if self._undo_in_process is not None:
            undo, self._undo_in_process = self._undo_in_process, None
            undo()

    def before_next(self, it: Any, t_call: float) -> None:
        if self._current() is not it:
            return
        w = self.window
        started = w.started
        ident = threading.get_ident()
        if ident not in self.thread_names:
            self.thread_names[ident] = threading.current_thread().name
        finished = w.call(t_call, self.watcher.optimizer_steps, ident)
        self._mark = self.producers.mark(it) if w.started and not w.done else None
        if w.started and not started:
            self.window_start_s = t_call
            self.window_started_at = time.time()
            if self.inside is not None:
                self.inside.start(lambda: list(self.window._pids))
            self.gpu = self.watcher.gpu_sampler()
            if self.gpu is not None:
                self.gpu.start()
        if finished:
            self._finished()

    def after_next(self, it: Any, t_call: float, t_return: float, batch: Any) -> None:
        if self._current() is not it:
            self.window.batches += 1
            return
        images = batch_images(batch, self.settings["batch_size"] or 1)
        split = self.producers.split(self._mark) if self._mark is not None else None
        self._mark = None
        self.window.returned(t_call, t_return, images, split)
        if self.inside is not None and not self.inside.batch_bytes:
            self._first_batch(batch)
        if not self.window.started and not self.opened and self.settings["source"] is None:
            self._discover()
        self.pass_batches += 1
        if self.pass_batches == self.settings["batches_per_pass"]:
            self.iterator_ended(it)  # its last batch: the pass is over, whether or not it is exhausted

    def _first_batch(self, batch: Any) -> None:
        """The first batch shows its size: warn now if the batches in flight cannot fit in /dev/shm."""
        from ioprof.measure.inside import shm_fits

        assert self.inside is not None
        size = self.inside.first_batch(batch)
        workers = self.settings["num_workers"]
        fits, line = shm_fits(size, self.settings["prefetch_factor"] or 0, workers)
        if not fits:
            self.shm_warning = line
            sys.stderr.write(f"ioprof: warning: loader {self.index}: {line}\n")

    def _discover(self) -> None:
        """During warm-up, for a dataset that does not say what it reads: the files its workers
        hold open, and so the mount whose counters count its bytes (made now, not in the window)."""
        if not self.settings["num_workers"]:
            return
        from ioprof.sources import files, opened

        found = opened.held_open(self.window._pids)
        if found:
            self.opened = found
            root = files.common_root(found)
            self.settings["dataset_root"] = root
            self.counters = self.watcher.mount_counters(root)

    def iterator_ended(self, it: Any) -> None:
        if self._current() is it and self._pass_open:
            self._end_pass()

    def _end_pass(self) -> None:
        self._pass_open = False
        self._restore_in_process()
        self.window.pass_ended(time.perf_counter())
        self.watcher.pass_ended(self)

    def _current(self) -> Any:
        return self._iterator() if self._iterator is not None else None

    def _finished(self) -> None:
        if self.gpu is not None:
            self.telemetry = self.gpu.stop()
            self.gpu = None
        self.window_end_s = time.perf_counter()
        self.window_ended_at = time.time()
        if self.inside is not None and not self._memory_goes_on():
            self.inside.stop(list(self.window._pids))
        self._restore_in_process()
        self._inside_seen = self.look_inside()
        self.watcher.window_finished(self)

    def _memory_goes_on(self) -> bool:
        """Persistent workers' memory is read on past the window, until the script ends: what they
        keep is judged from one epoch to the next, and a window rarely holds two epochs."""
        return bool(self.settings["persistent_workers"] and self.settings["num_workers"])

    def _inside_now(self) -> Any:
        """The look inside over the window, its memory over every reading since the window began
        where the readings go on past it (persistent workers: read until the script ends)."""
        seen = self.look_inside()
        if seen is None or self.inside is None or not self._memory_goes_on() or self.window_start_s is None:
            return seen
        memory = self.inside.memory(self.window_start_s, time.perf_counter(), self.window_pids)
        return dataclasses.replace(seen, memory=memory) if memory is not None else seen

    def look_inside(self) -> Any:
        """Stages, memory and threads over the window (so far, while it is open), or None."""
        if self._inside_seen is not None:
            return self._inside_seen
        if self.inside is None or self.window_start_s is None:
            return None
        from ioprof.measure.stages import PIN, WAIT

        end = self.window_end_s or time.perf_counter()
        pins = (
            self.watcher.pins.between(self.pin_thread, self.window_start_s, end) if self.watcher.pins else []
        )
        main = [(PIN, pins), (WAIT, list(self.window.waits))]
        return self.inside.result(
            self.window_start_s, end, main, pids=self.window_pids, cpu=self.cpu_totals()
        )

    def cpu_totals(self) -> Any:
        """The window's CPU, read with its byte counters over the same spans (pauses left out)."""
        from ioprof.measure.inside import CpuTotals

        t = self.window.totals if self.window.done else self.window.totals_now()
        return CpuTotals(
            cpu_s=t.cpu_s,
            window_s=t.cpu_window_s,
            thread_cpu_s=dict(t.thread_cpu_s),
            thread_runq_s=dict(t.thread_runq_s),
            main_pid=os.getpid(),
        )

    # -- what it saw ---------------------------------------------------------------------------

    @property
    def role(self) -> str:
        """training: optimizer steps ran between its batches within a pass; evaluation: none did,
        though the script steps an optimizer; no-optimizer: the script never stepped one."""
        w = self.window
        if w.intervals == 0:
            return "unknown"
        if w.optimizer_between > 0:
            return "training"
        return "evaluation" if self.watcher.optimizer_steps > 0 else "no-optimizer"

    def off_thread(self) -> str:
        """The name of a thread other than the optimizer's that iterated this loader, or ""."""
        steppers = self.watcher.step_threads
        others = self.window.threads - steppers if steppers else set()
        if not others:
            return ""
        return self.thread_names.get(min(others), "another thread")

    def dataset_info(self) -> Any:
        """The dataset's description (sizes from a sample of what it reads), where its source is
        known or its workers were seen holding files open; None where nothing is known."""
        from ioprof import sources

        source = self.settings["source"]
        if source is None and self.opened:
            source = sources.from_opened(self.opened)
        return sources.describe(source, self.settings["dataset_root"]) if source is not None else None

    def observed(self) -> dict[str, Any]:
        """This loader's window as plain data (``result.build_result`` reads it). A window the run
        left partial keeps the GPU's readings up to now: its sampler is stopped here."""
        if self.gpu is not None:
            self.telemetry = self.gpu.stop()
            self.gpu = None
        w = self.window
        waits, steps, clock = list(w.waits), list(w.step_times), "host"
        if w.marks is not None and w.units and len(w.units) == len(w.waits):
            from ioprof.observe.window import gpu_units

            waits, steps = gpu_units(w.marks, w.units)
            clock = "gpu-events"
        t = w.totals if w.done else w.totals_now()
        return {
            "index": self.index,
            "role": self.role,
            "settings": {k: v for k, v in self.settings.items() if k not in ("files", "source")},
            "files_known": len(self.settings["files"]),
            "source": _source_fields(self.settings["source"]),
            "opened": self.opened[:20],
            "producer": "worker" if self.settings["num_workers"] else "main",
            "splits": list(w.splits),
            "batches": w.batches,
            "passes": w.passes,
            "gaps_left_out": w.gaps,
            "segments": w.segments,
            "window": "complete" if w.done else ("partial" if w.step_times else "none"),
            "waits": waits,
            "steps": steps,
            "images": list(w.images),
            "clock": clock,
            "host_waits": list(w.waits),
            "host_steps": list(w.step_times),
            "optimizer_steps_between_batches": w.optimizer_between,
            "own_s_per_batch": self.own_s / self.own_calls if self.own_calls else 0.0,
            "off_thread": self.off_thread(),
            "io": {
                "read_bytes": t.read_bytes,
                "read_chars": t.read_chars,
                "processes": t.processes,
                "window_s": t.seconds,
                "own_read_chars": t.own_chars,
            },
            "pieces": [dataclasses.asdict(piece) for piece in w.pieces],
            "window_wall": [
                self.window_started_at,
                self.window_ended_at or (time.time() if self.window_started_at else None),
            ],
            "cpu": {
                "cpu_s": t.cpu_s,
                "window_s": t.cpu_window_s,
                "thread_cpu_s": t.thread_cpu_s,
                "thread_runq_s": t.thread_runq_s,
                "spans_wall": t.cpu_spans_wall,
            },
            "mount": {
                "nfs_bytes": t.nfs_bytes,
                "daemon_bytes": t.daemon_bytes,
                "daemon_pid": t.daemon[0] if t.daemon else None,
                "daemon_name": t.daemon[1] if t.daemon else "",
                "spans": t.spans,
                "net_bytes": t.net_bytes,
                "iface": self.iface,
            },
            "gpu": self.telemetry,
            "inside": self._inside_now(),
            "shm_warning": self.shm_warning,
            "before": self._before(),
        }

    def _before(self) -> dict[str, Any] | None:
        """The first pass up to the window, as plain data (None: the window never began)."""
        b = self.window.before
        if b is None or b.seconds is None:
            return None
        t = b.totals
        return {
            "seconds": b.seconds,
            "first_batch_s": b.first_batch_s,
            "batches": b.batches,
            "wait_s": b.wait_s,
            "io": {
                "read_bytes": t.read_bytes if t else 0,
                "read_chars": t.read_chars if t else 0,
                "processes": t.processes if t else 0,
                "window_s": t.seconds if t else 0.0,
                "own_read_chars": t.own_chars if t else None,
            },
            "cpu": {"cpu_s": t.cpu_s if t else 0.0, "window_s": t.cpu_window_s if t else 0.0},
            "mount": {
                "nfs_bytes": t.nfs_bytes if t else None,
                "daemon_bytes": t.daemon_bytes if t else None,
                "daemon_pid": t.daemon[0] if t and t.daemon else None,
                "daemon_name": t.daemon[1] if t and t.daemon else "",
                "spans": t.spans if t else 0,
                "net_bytes": t.net_bytes if t else None,
                "iface": self.iface,
            },
        }


def _interface(source: Any) -> str | None:
    """The interface an http(s) source's bytes arrive on (its host's route), or None."""
    if source is None or not source.urls or not source.items:
        return None
    import urllib.parse

    from ioprof.host.netdev import interface_for

    host = urllib.parse.urlparse(source.items[0]).hostname
    return interface_for(host) if host else None


def _source_fields(source: Any) -> dict[str, Any] | None:
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


def _settings(loader: Any) -> dict[str, Any]:
    from torch.utils.data import IterableDataset

    from ioprof import sources

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
        "dataset_root": source.root if source is not None else "",
        "files": list(source.items) if source is not None and source.root else [],
        "iterable": iterable,
        "batches_per_pass": per_pass,
        "source": source,
        "source_unknown": unknown,
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

    def __init__(
        self, config: WatchConfig, *, only: Any = None, marks: Callable[[], Any] | None = None
    ) -> None:
        self.config = config
        self.loaders: dict[int, _Loader] = {}
        self.optimizer_steps = 0
        self.step_threads: set[int] = set()
        self.probes: dict[str, Any] = {}
        self.probed_index = 0
        self.probe_pause_s = 0.0
        self.probe_refused = ""  # why the training loader was not probed, when it was not
        # the probe put off while a fork server imports the dataset's modules beside the training:
        # (its loader, the thread that ends once the server is ready, when the window ended)
        self._warming: tuple[_Loader, threading.Thread, float] | None = None
        self.infos: dict[int, Any] = {}
        self.errors: list[str] = []
        self._only = weakref.ref(only) if only is not None else None
        self._marks = marks  # tests: a fake GPU's events; None: CUDA events where the script uses CUDA
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []
        self._mounts: dict[str, Any] = {}
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self.world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
        self.local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        self.pins: Any = None  # the pin-memory copies' times (``stages.PinTimes``)
        self.shm_failure = ""  # the one line, when a worker died for want of /dev/shm
        self._rows = os.path.join(config.out_dir, "stages") if config.out_dir else ""

    # -- hooks ---------------------------------------------------------------------------------

    def install(self) -> None:
        """Patch the DataLoader iterator and hook optimizer steps (torch must be importable)."""
        import importlib

        # from sys.modules: install() may run while ``import torch`` is still under way
        dl = sys.modules.get("torch.utils.data.dataloader") or importlib.import_module(
            "torch.utils.data.dataloader"
        )
        opt = sys.modules.get("torch.optim.optimizer") or importlib.import_module("torch.optim.optimizer")
        watcher = self
        original_iter, original_next = dl.DataLoader.__iter__, dl._BaseDataLoaderIter.__next__

        def __iter__(loader: Any) -> Any:
            rec = watcher.recorder(loader)
            if rec is not None:
                watcher.guard(rec, rec.before_new_pass)
            if rec is not None and rec.inside is not None:
                watcher.guard(rec, watcher.time_workers, loader, rec)
            it = original_iter(loader)
            if rec is not None:
                it._ioprof_recorder = rec
                rec.new_iterator(it)
            return it

        def __next__(it: Any) -> Any:
            rec = getattr(it, "_ioprof_recorder", None)
            if rec is None:
                return original_next(it)
            t_call = time.perf_counter()
            paused = watcher.probe_pause_s  # a probe run from here is its own pause, not this cost
            if watcher._warming is not None:
                watcher.guard(rec, watcher.probe_when_ready, rec)
            watcher.guard(rec, rec.before_next, it, t_call)
            t_in = time.perf_counter()
            try:
                batch = original_next(it)
            except StopIteration:
                watcher.guard(rec, rec.iterator_ended, it)
                raise
            t_return = time.perf_counter()
            watcher.guard(rec, rec.after_next, it, t_call, t_return, batch)
            # ioprof's own cost; the probe's pause, when the pass's last batch set it off, is said apart
            rec.own_s += t_in - t_call + time.perf_counter() - t_return - (watcher.probe_pause_s - paused)
            rec.own_calls += 1
            return batch

        dl.DataLoader.__iter__ = __iter__
        dl._BaseDataLoaderIter.__next__ = __next__
        handle = opt.register_optimizer_step_post_hook(lambda *_: watcher._count_step())
        if self.config.inside:
            from ioprof.measure.stages import PinTimes

            self.pins = PinTimes()
            self.pins.install()

        def undo() -> None:
            dl.DataLoader.__iter__ = original_iter
            dl._BaseDataLoaderIter.__next__ = original_next
            handle.remove()
            if self.pins is not None:
                self.pins.uninstall()
            for rec in self.loaders.values():
                rec.untime_workers()
            self.stop_readings()

        self._undo.append(undo)

    def guard(self, rec: _Loader, fn: Callable[..., None], *a: Any) -> None:
        """Run a recorder's step; an error of ioprof's own stops watching that loader, never the script."""
        try:
            fn(*a)
        except Exception as e:
            rec.window.done = True
            self.errors.append(f"{type(e).__name__}: {e}"[:300])

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def stop_readings(self) -> None:
        """End every loader's memory and thread readings, with a last one now (the block or the
        script ends with windows still open)."""
        for rec in list(self.loaders.values()):
            if rec.inside is not None:  # an open window's, or persistent workers' read past theirs
                rec.inside.stop(list(rec.window._pids))

    def failed(self, error: BaseException) -> None:
        """The script failed with ``error``: one line where a loader's worker ran out of /dev/shm."""
        from ioprof.host.processes import shm_space
        from ioprof.measure.inside import shm_failure, shm_line, shm_note

        if not shm_failure(error):
            return
        shm = shm_space() or (0, 0)
        rec = next((r for r in self.loaders.values() if r.settings["num_workers"] and r.inside), None)
        if rec is not None and rec.inside is not None and rec.inside.batch_bytes:
            s = rec.settings
            line = shm_line(
                rec.inside.batch_bytes, s["prefetch_factor"] or 0, s["num_workers"], shm[1], shm[0]
            )
        else:
            line = shm_note()
        self.shm_failure = f"a DataLoader worker ran out of shared memory: {line}"
        sys.stderr.write(f"ioprof: {self.shm_failure}\n")

    def _count_step(self) -> None:
        self.optimizer_steps += 1
        self.step_threads.add(threading.get_ident())

    def recorder(self, loader: Any) -> _Loader | None:
        """The recorder of a loader about to be iterated (made at its first pass), or None when it
        is not watched."""
        if getattr(loader, "_ioprof_probe", False):
            return None  # ioprof's own probe of the user's pipeline
        if self._only is not None and self._only() is not loader:
            return None  # watch(loader) observes that loader only
        with self._lock:
            rec = self.loaders.get(id(loader))
            if rec is None or rec.loader() is not loader:
                rec = _Loader(self, loader, len(self.loaders) + 1)
                self.loaders[id(loader)] = rec
        return rec

    def time_workers(self, loader: Any, rec: _Loader) -> None:
        """Before the workers start: give them the stage timers (after the loader's own
        ``worker_init_fn``). Persistent workers already started keep theirs."""
        from ioprof.measure.stages import WorkerStages

        if not loader.num_workers or rec.done or isinstance(loader.worker_init_fn, WorkerStages):
            return
        assert rec.inside is not None
        own = loader.worker_init_fn
        loader.worker_init_fn = WorkerStages(rec.inside.folder, rec.index, own, memory=True)
        rec.untime = lambda: setattr(loader, "worker_init_fn", own)

    def rows_folder(self) -> str:
        """Where the workers write their stage rows: the run's folder, or a temporary one."""
        if not self._rows:
            import tempfile

            self._rows = tempfile.mkdtemp(prefix="ioprof-stages-")
            weakref.finalize(self, shutil_rmtree, self._rows)
        os.makedirs(self._rows, exist_ok=True)
        return self._rows

    def inside_recorder(self, rec: _Loader) -> Any:
        from ioprof.measure.inside import InsideRecorder

        s = rec.settings
        return InsideRecorder(
            folder=self.rows_folder(),
            tag=rec.index,
            workers=s["num_workers"],
            prefetch_factor=s["prefetch_factor"],
            pin_memory=s["pin_memory"],
            persistent_workers=s["persistent_workers"],
            samples_per_epoch=s["dataset_len"],
            ranks_on_host=self.local_world_size,
        )

    def device(self) -> str:
        """The device the script trains on, as far as torch says (CUDA once initialized)."""
        torch = sys.modules.get("torch")
        # is_initialized first: is_available() probes the driver, tens of ms where there is no GPU
        if torch is not None and torch.cuda.is_initialized() and torch.cuda.is_available():
            return f"cuda:{torch.cuda.current_device()}"
        return "cpu"

    def gpu_marks(self) -> Any:
        """Events on the script's GPU stream (``window.GpuMarks``), or None on the CPU."""
        if self._marks is not None:
            return self._marks()
        if not self.device().startswith("cuda"):
            return None
        return CudaMarks()

    def gpu_sampler(self) -> Any:
        """An NVML sampler for the script's GPU, or None on the CPU."""
        if not self.device().startswith("cuda"):
            return None
        import torch

        from ioprof.host.telemetry import nvml_for_device, open_gpu_sampler

        return open_gpu_sampler(nvml_for_device(torch.device(self.device()))[1])

    def read_counters(self, rec: _Loader, pids: Sequence[int], at_s: float) -> Any:
        """The I/O and CPU counters of a loader's processes (and of the training process: its CPU),
        and its mount's counters, now."""
        from ioprof.host import procstat
        from ioprof.observe.window import Reading

        procs, own, cpu, threads = {}, {}, {}, {}
        for pid in {*pids, os.getpid()}:
            got = procstat.sample(pid)
            if got is None:  # gone (a worker reaped), or not readable
                continue
            cpu[pid] = got.cpu_s + got.children_cpu_s
            threads[pid] = {tid: (t.cpu_s, t.runq_s) for tid, t in got.threads.items()}
            if pid in pids:
                procs[pid] = (got.read_bytes, got.rchar)
                own[pid] = got.own_rchar
        snap = rec.counters.snapshot() if rec.counters is not None else None
        nfs = daemon = None
        if snap is not None:
            nfs = snap.nfs_server_read_bytes
            if snap.daemon_pid is not None and snap.daemon_read_chars is not None:
                daemon = (snap.daemon_pid, snap.daemon_name, snap.daemon_read_chars)
        net = None
        if rec.iface is not None:
            from ioprof.host.netdev import rx_bytes

            net = rx_bytes(rec.iface)
        return Reading(
            at_s,
            procs,
            nfs,
            daemon,
            own_chars=own,
            cpu=cpu,
            threads=threads,
            wall_s=time.time(),
            net_bytes=net,
        )

    def mount_counters(self, root: str) -> Any:
        """The counters of the mount under ``root`` (made once per root, when a loader is first
        iterated: their imports and the FUSE daemon's search stay out of the timed batches)."""
        if not root:
            return None
        from ioprof.host.fetched import MountCounters
        from ioprof.host.pagecache import filesystem_of

        counters = self._mounts.get(root)
        if counters is None:
            counters = self._mounts[root] = MountCounters(filesystem_of(root))
        return counters

    # -- after a window or a pass --------------------------------------------------------------

    def window_finished(self, rec: _Loader) -> None:
        """A window is complete: the first training loader's pipeline is measured alone — at once,
        or, where its probe's workers must come from a fork server, once that server has imported
        the dataset's modules while the training went on (they were most of timm's pause)."""
        if self._may_probe(rec) and self._warming is None:
            loader = rec.loader()
            from ioprof.observe.probe import warm_fork_server

            thread = warm_fork_server(loader, rec.settings) if loader is not None else None
            if thread is not None:
                self._warming = (rec, thread, time.perf_counter())
                self.write("window")
                return
        self._probe(rec, "after its window")
        self.write("window")

    def probe_when_ready(self, rec: _Loader) -> None:
        """Before a batch of the loader whose probe was put off: probe once its fork server is
        ready (or has been starting for PROBE_BATCH_TIMEOUT_S: then the probe waits for it)."""
        if self._warming is None or self._warming[0] is not rec:
            return
        from ioprof.observe.probe import PROBE_BATCH_TIMEOUT_S

        _, thread, since = self._warming
        if thread.is_alive() and time.perf_counter() - since < PROBE_BATCH_TIMEOUT_S:
            return
        self._probe_warmed("after its window")

    def _probe_warmed(self, when: str) -> bool:
        """The probe that was put off, now (the server ready or not: its workers wait for it)."""
        assert self._warming is not None
        rec, _, since = self._warming
        self._warming = None
        warmed_s = time.perf_counter() - since
        if not self._probe(rec, when):
            return False
        if "fork server" in self.probes.get("start_note", ""):
            self.probes["start_note"] += (
                f"; it was started when the window ended and imported your dataset's modules in the "
                f"{warmed_s:.1f} s your training went on before the pause"
            )
        self.write("window")
        return True

    def pass_ended(self, rec: _Loader) -> None:
        """A pass ended before the window completed: a script shorter than the window is probed
        with what there is, between its passes (and a probe put off for a fork server, now)."""
        if self._warming is not None and self._warming[0] is rec:
            self._probe_warmed("after its window")
        elif not rec.done and self._probe(rec, "at the end of its first training pass"):
            self.write("pass")

    def at_exit(self) -> None:
        """The script ends: a training loader never probed (its window and passes too short, or
        never ended) is probed now, if it still exists."""
        self.stop_readings()  # the readings read on past a window end with the script, not in a probe
        if self._warming is not None and self._probe_warmed("after its window"):
            return
        for rec in sorted(self.loaders.values(), key=lambda r: r.index):
            if self._probe(rec, "when your script ended"):
                break

    def _may_probe(self, rec: _Loader) -> bool:
        """Whether ``rec`` is the loader to probe and has steps enough (without saying why not)."""
        return self._probe_wanted(rec) and len(rec.window.step_times) >= PROBE_MIN_UNITS

    def _probe_wanted(self, rec: _Loader) -> bool:
        """The training loader, probes asked for, and none taken yet."""
        return rec.role == "training" and bool(self.config.probe) and not self.probes

    def _probe(self, rec: _Loader, when: str) -> bool:
        """Measure the training loader's pipeline alone, once; otherwise note why not."""
        if not self._probe_wanted(rec):
            return False
        if len(rec.window.step_times) < PROBE_MIN_UNITS:
            self.probe_refused = (
                f"loader {rec.index}: only {len(rec.window.step_times)} batches were measured {when} "
                f"(the probe needs {PROBE_MIN_UNITS} to know the batch and the step)"
            )
            return False
        loader = rec.loader()
        if loader is None:
            self.probe_refused = (
                f"loader {rec.index} no longer existed {when} (freed before it could be probed)"
            )
            return False
        t0 = time.perf_counter()
        from ioprof.observe.probe import probe_pipeline

        self.probes = probe_pipeline(
            loader,
            rec.settings,
            self.config.probe_seconds,
            batch_images=rec.window.images[0] if rec.window.images else 0,
            local_rank=self.local_rank,
            local_world_size=self.local_world_size,
        )
        self.probes["when"] = when
        self.probed_index = rec.index
        # the dataset described now, inside the pause it states, not by the first save after it: a
        # description reads files (a sample's sizes, whether the filesystem keeps pages), which on
        # an 8 Mbit/s sshfs link stopped the training 4.4 s longer than the 10.9 s the probe said
        self._info(rec)
        self.probe_pause_s = time.perf_counter() - t0
        self.probe_refused = ""
        return True

    def observation(self) -> dict[str, Any]:
        """Everything observed so far, as plain data (see ``result.build_result``)."""
        from ioprof.core.resultfile import to_jsonable
        from ioprof.host.machine import versions

        loaders = []
        for rec in sorted(self.loaders.values(), key=lambda r: r.index):
            seen = rec.observed()
            seen["gpu"] = to_jsonable(seen["gpu"])
            seen["inside"] = to_jsonable(seen["inside"])
            seen["dataset_info"] = to_jsonable(self._info(rec))
            loaders.append(seen)
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "rank": self.rank,
            "world_size": self.world_size,
            "local_rank": self.local_rank,
            "local_world_size": self.local_world_size,
            "optimizer_steps": self.optimizer_steps,
            "device": self.device(),
            "versions": versions(),
            "loaders": loaders,
            "probes": to_jsonable(self.probes),
            "probed_index": self.probed_index,
            "probe_pause_s": self.probe_pause_s,
            "probe_refused": self.probe_refused,
            "errors": self.errors,
            "shm_failure": self.shm_failure,
            "config": asdict(self.config),
            "written_at": time.time(),
        }

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


def shutil_rmtree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


class CudaMarks:
    """``window.GpuMarks`` on CUDA: timing events on the current stream of the current device."""

    def mark(self) -> Any:
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def settle(self, event: Any) -> None:
        event.synchronize()

    def seconds(self, start: Any, end: Any) -> float:
        return max(0.0, float(start.elapsed_time(end)) / 1e3)


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
    own_hook = sys.excepthook

    def excepthook(kind: Any, error: BaseException, tb: Any) -> None:
        own_hook(kind, error, tb)
        watcher.failed(error)

    sys.excepthook = excepthook

    attached_in = os.getpid()

    def probe_at_exit() -> None:
        if os.getpid() != attached_in:
            return  # a forked worker ending (multiprocessing runs threading's exit hooks in it)
        try:
            watcher.at_exit()
        except Exception as e:  # a probe at exit must never change how the script ends
            watcher.errors.append(f"{type(e).__name__}: {e}"[:300])

    def at_exit() -> None:
        if os.getpid() == attached_in and (watcher.loaders or watcher.optimizer_steps):
            watcher.stop_readings()
            watcher.write("exit")

    # The probe at exit runs while the interpreter is still whole: threading's own exit hooks
    # run before any atexit function, multiprocessing's among them (a probe starts workers).
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(probe_at_exit)
        atexit.register(at_exit)
    else:  # a Python without it: both at exit, the probe first (atexit runs them last in, first out)
        atexit.register(at_exit)
        atexit.register(probe_at_exit)
    return watcher


# -- watching from code: ``with ioprof.watch(): train()`` ----------------------------------------


class Watch:
    """Observes the DataLoaders and optimizer steps of a block of code (or of one loader)."""

    def __init__(
        self, loader: Any = None, config: WatchConfig | None = None, *, marks: Callable[[], Any] | None = None
    ) -> None:
        self._only = loader
        self.config = config or WatchConfig()
        self.watcher = Watcher(replace(self.config, out_dir=""), only=loader, marks=marks)
        self._started = time.time()

    def __enter__(self) -> Watch:
        self.watcher.install()
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        self.watcher.uninstall()
        if isinstance(error, BaseException):
            self.watcher.failed(error)

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
        from ioprof.observe.result import build_result
        from ioprof.render import kinds

        observations = [self.watcher.observation()]
        result = build_result(
            observations,
            command="ioprof.watch()",
            exit_code=None,
            ended="running",
            config=self.config,
            started=self._started,
        )
        return kinds.conclude(result)

    def write_report(self, out_dir: str) -> str:
        """Write results.json, report.md and plots into ``out_dir``; returns report.md's path."""
        from pathlib import Path

        from ioprof.core import resultfile
        from ioprof.render import kinds

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        result = self.result()
        resultfile.save(result, out / "results.json")
        return str(kinds.write(result, out))

    def verdict(self) -> str:
        """The verdict in one line."""
        from ioprof.render import kinds

        return kinds.headline(self.result())


def watch(loader: Any = None, *, steps: int = 100, seconds: float | None = 60.0, probe: bool = True) -> Watch:
    """Watch your own training from code.

    ``with ioprof.watch() as w: train()`` observes every DataLoader and optimizer step inside the
    block; ``for batch in ioprof.watch(loader)`` observes one loader. Then ``w.verdict()``,
    ``w.result()`` or ``w.write_report(folder)``.
    """
    return Watch(loader, WatchConfig(steps=steps, seconds=seconds, probe=probe))
