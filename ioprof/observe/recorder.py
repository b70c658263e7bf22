"""One DataLoader as the watcher records it: its iterators timed, its window, its pass ends, its
settings and what its dataset reads — and the look inside its workers."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ioprof.core.inside import LoaderInside
from ioprof.measure.batchtree import images_in
from ioprof.observe.observation import BeforeFields, LoaderObservation, ProducerFields
from ioprof.observe.producers import Producers, out_of_data
from ioprof.observe.settings import interface, loader_settings, source_fields
from ioprof.observe.watching import Watching

if TYPE_CHECKING:
    from ioprof.core.results import DatasetInfo
    from ioprof.measure.inside import CpuTotals
    from ioprof.observe.window import Totals

PASS_MARKS_KEPT = 1000  # each pass's start and end kept: the first pass and the latest passes


class LoaderRecorder:
    """The recorder of one DataLoader: its window (``window``), and what it needs from the
    process around it (the loader's processes, the mount's counters, the GPU's stream)."""

    def __init__(self, watcher: Watching, loader: Any, index: int) -> None:
        from ioprof.observe.window import LoaderWindow

        self.watcher = watcher
        self.index = index
        self.loader = weakref.ref(loader)
        self.settings = loader_settings(loader)
        cfg = watcher.config
        workers = self.settings["num_workers"]
        self.window = LoaderWindow(
            steps=cfg.steps,
            seconds=cfg.seconds,
            warmup=cfg.warmup_steps,
            workers=workers,
            prefetch_depth=(self.settings["prefetch_factor"] or 0) * workers,
            read=lambda pids, at, cpu: watcher.read_counters(self, pids, at, cpu),
            marks=watcher.gpu_marks(),
        )
        self.counters = watcher.mount_counters(self.settings["dataset_root"])
        self.iface = interface(self.settings["source"])  # a URL source: the interface its bytes arrive on
        self.opened: list[str] = []  # files its workers held open (a dataset that names none)
        # whether they still held all of them a turn of the workers later (None: not looked again):
        # an archive or a table held for the run is the dataset; a file opened for one sample is not
        self.opened_held: bool | None = None
        self._opened_at = 0  # the batches returned when they were seen
        self._seen: DatasetInfo | None = None  # the files seen, described
        self.peers: list[str] = []  # or the hosts its workers' TCP connections reached
        self.producers = Producers()
        self._mark: Any = None  # the awaited producer's scheduler totals at the last call
        self.pass_batches = 0  # batches returned in the current pass
        self.moves = 0  # batches returned and passes begun: what a late mark checks nothing moved by
        self.pass_marks: list[dict[str, Any]] = []  # each pass: iter() called, returned, first batch, end
        self._pass_open = False  # a pass began and has not ended (by its length, StopIteration, iter())
        import psutil  # noqa: F401  (imported here, not in the first timed batch)

        self.inside = watcher.inside_recorder(self) if cfg.inside else None
        if self.inside is not None:
            self.inside.count_objects = self._dataset_objects
        self.window_start_s: float | None = None
        self.window_end_s: float | None = None
        self.window_started_at: float | None = None  # wall-clock (epoch) seconds, for ground truth outside
        self.window_ended_at: float | None = None
        self.workers_out: int | None = None  # its workers out of data as the window began
        self.pin_thread: int | None = None  # the pin-memory thread of its current iterator
        self.window_pids: set[int] = set()  # its processes while the window was open
        self.shm_warning = ""  # said as soon as the first batch showed its size
        self._inside_seen: Any = None  # the look inside, once the window ended
        self._produced: list[tuple[float, float, int]] = []  # its workers' batches in the window
        self._undo_in_process: Callable[[], None] | None = None

        self.gpu: Any = None  # the NVML sampler of the window (CUDA), or None
        self.gpu_t0 = 0.0  # perf_counter when it started: its readings' clock begins there
        self.telemetry: Any = None  # its GpuTelemetry once the window ended
        self.thread_names: dict[int, str] = {}  # the threads that called next(), by ident
        self.own_s = 0.0  # time spent in ioprof's own code around next(), batch by batch
        self.own_calls = 0
        # work that comes once, not with each batch (the window's start and end, a pass's end, the
        # first batch's look, the files found open, the first waits' split): its time is said apart, not
        # spread per batch
        self.once = False  # the call under way did such work
        self.in_iter = (
            False  # inside the loader's iter(): an override's call of DataLoader's own is part of it
        )
        self.once_s = 0.0
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

    def new_iterator(self, it: Any, t_enter: float, t_iter: float) -> None:
        """A new pass began: the loop called ``iter()`` at ``t_enter``, ioprof's own part of it
        (the last pass ended, the workers' clocks set) took it to ``t_iter``, the loader's own
        returned now. ioprof's part and what it does here are its own time in the pass, and in
        its first batch."""
        now = time.perf_counter()
        self.pass_marks.append(
            {
                "iter_s": t_enter,
                "started_s": now,
                "startup_s": now - t_iter,  # the loader's own iter()
                "first_own_s": 0.0,  # ioprof's own time before the first batch (in ``own_s`` too)
                "first_after_s": 0.0,  # and after it came back, before the loop had it (the same)
                "first_s": None,
                "end_s": None,
                "stop_s": 0.0,  # the call that ran the iterator out, or its collection (``pass_dropped``)
                "ran_out": False,  # the loop took the whole pass (its length, or StopIteration)
                "own_s": 0.0,  # ioprof's own time in the pass's calls (``pass_own``)
                "paused_s": self.watcher.probe_pause_s,  # a probe's pause inside the pass is left out
            }
        )
        self._iterator = weakref.ref(it)
        self._pass_open = True  # a new pass (persistent workers: the same iterator object, reset)
        self.pass_batches = 0
        self.moves += 1
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
        mark = self.pass_marks[-1]
        mark["own_s"] = mark["first_own_s"] = t_iter - t_enter + time.perf_counter() - now

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
        if not self._pass_open and self.pass_marks and self.pass_marks[-1]["ran_out"]:
            # its length ended the pass at its last batch, and this call finds it run out: the
            # loop's steps since were the pass's; no batch comes, so nothing of a window begins here
            w.steps_since_last_call(self.watcher.optimizer_steps)
            return
        started = w.started
        ident = threading.get_ident()
        if ident not in self.thread_names:
            self.thread_names[ident] = threading.current_thread().name
        finished = w.call(t_call, self.watcher.optimizer_steps, ident)
        taken = w.started and not w.done and self.producers.wanted(w.median_unit_s, w.busy_share)
        self._mark = self.producers.mark(it) if taken else None
        if w.started and not started:
            self.once = True
            self.window_start_s = t_call
            self.window_started_at = time.time()
            self.workers_out = out_of_data(it)
            if self.inside is not None:
                self.inside.start(lambda: list(self.window._pids))
            self.gpu = self.watcher.gpu_sampler()
            if self.gpu is not None:
                self.gpu_t0 = time.perf_counter()
                self.gpu.start()
        if finished:
            self.once = True
            self._finished()

    def after_next(self, it: Any, t_call: float, t_return: float, batch: Any) -> None:
        if self._current() is not it:
            self.window.batches += 1
            return
        # a finished window counts no more images (the batch's tree walked for nothing)
        images = images_in(batch, self.settings["batch_size"] or 1) if not self.window.done else 0
        split = self.producers.split(self._mark) if self._mark is not None else None
        self._mark = None
        self.window.returned(t_call, t_return, images, split)
        if self.inside is not None and not self.inside.batch_bytes:
            self.once = True
            self._first_batch(batch)
        if not self.window.started and not self.opened and self.settings["source"] is None:
            self.once = True
            self._discover()
        elif self.opened and self.opened_held is None and self.window.batches > self._look_again_at():
            self.once = True
            self._look_again()
        if self.pass_marks and self.pass_marks[-1]["first_s"] is None:
            mark = self.pass_marks[-1]
            mark["first_s"] = t_return - (self.watcher.probe_pause_s - mark["paused_s"])
        self.pass_batches += 1
        self.moves += 1
        if self.pass_batches == self.settings["batches_per_pass"]:
            if self.pass_marks:
                self.pass_marks[-1]["ran_out"] = True
            self.iterator_ended(it)  # its last batch: the pass is over, whether or not it is exhausted

    def _first_batch(self, batch: Any) -> None:
        """The first batch shows its size: warn now if the batches in flight cannot fit in /dev/shm."""
        from ioprof.measure.shm import shm_fits

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
            self.opened, self._opened_at = found, self.window.batches
            root = files.common_root(found)
            self.settings["dataset_root"] = root
            self.counters = self.watcher.mount_counters(root)
        elif self.iface is None:
            self._reached()

    def _look_again_at(self) -> int:
        """The batches returned after which the workers have each made one since the files were seen."""
        return self._opened_at + self.settings["num_workers"]

    def _look_again(self) -> None:
        """A turn of the workers after they were seen holding files open: whether they hold them
        all still. Where they do not, each was opened for a sample, and those seen are a sample of
        what the dataset reads: its root is their folder, not a file, and its size is not theirs."""
        from ioprof.sources import opened

        again = set(opened.held_open(self.window._pids))
        self.opened_held = all(f in again for f in self.opened)
        root = self.settings["dataset_root"]
        if not self.opened_held and os.path.isfile(root):
            self.settings["dataset_root"] = os.path.dirname(root)

    def _reached(self) -> None:
        """For a dataset whose workers hold no file open: the hosts their own TCP connections reach
        (an object store's client in each worker; none inherited from this process) and, where the kernel routes them all through one
        interface, that interface, whose received bytes count what they fetched (host-wide)."""
        from ioprof.host.netdev import interface_for, peers

        reached = peers(self.window._pids, os.getpid())
        routes = {interface_for(host) for host in reached}
        if len(routes) == 1 and None not in routes:
            self.peers = reached
            self.iface = routes.pop()

    def iterator_ended(self, it: Any) -> None:
        if self._current() is it and self._pass_open:
            self._end_pass()

    def pass_stopped(self, it: Any, began: float, seconds: float) -> None:
        """The call begun at ``began`` ran the pass's iterator out in ``seconds``: where the
        workers are not persistent, they were stopped and joined there — a cost of each pass that
        kept workers would not pay. The pass ends as that call returns (where its length ended it
        at its last batch, the last step and this call are its too)."""
        if self._current() is not it or not self.pass_marks:
            return
        mark = self.pass_marks[-1]
        end = began + seconds - (self.watcher.probe_pause_s - mark["paused_s"])  # before a probe it sets off
        if self._pass_open:
            self._end_pass()
        mark["end_s"], mark["stop_s"], mark["ran_out"] = end, seconds, True

    def pass_dropped(self, it: Any, began: float) -> None:
        """The pass's iterator, collected before it ran out (the loop let it go:
        ``next(iter(loader))``, a ``break``), has run its ``__del__`` begun at ``began``: its
        workers, not persistent, were stopped and joined there — the pass's stop, as the call
        that runs an iterator out is. Its own attributes (the workers' queues, pipes and handles)
        are freed after ``__del__`` returns, in the same moment of the loop: a mark set last among
        them adds that time as it is freed, where nothing of the loader moved since."""
        mark = self._open_mark(it)
        if mark is None:
            return
        ended = time.perf_counter()
        mark["stop_s"] += ended - began
        moves = self.moves

        def freed() -> None:
            if self.moves == moves:
                mark["stop_s"] += time.perf_counter() - ended

        vars(it)["_ioprof_freed"] = _Freed(freed)

    def pass_own(self, it: Any, seconds: float, before: float) -> None:
        """ioprof's own time in a call of the pass's iterator, ``before`` of it ahead of the
        loader's own ``next()``: no part of the loop's (nor, in the pass's first call, of its wait
        for the first batch). The rest of the first call's — what it does once, after the pass's
        first batch came back — is said apart: the loop waited for it too."""
        mark = self._open_mark(it)
        if mark is not None:
            mark["own_s"] += seconds
            if self.pass_batches == 1:
                mark["first_own_s"] += before
                mark["first_after_s"] += seconds - before

    def _open_mark(self, it: Any) -> dict[str, Any] | None:
        """The open pass's mark, where ``it`` is that pass's iterator."""
        return self.pass_marks[-1] if self._pass_open and self.pass_marks and self._current() is it else None

    def _end_pass(self) -> None:
        self.once = True
        self._pass_open = False
        if self.pass_marks and self.pass_marks[-1]["end_s"] is None:
            mark = self.pass_marks[-1]
            mark["end_s"] = time.perf_counter() - (self.watcher.probe_pause_s - mark["paused_s"])
            mark["batches"] = self.pass_batches
            if len(self.pass_marks) > PASS_MARKS_KEPT:
                del self.pass_marks[1]  # the first pass and the latest: a run of any length stays small
        self._restore_in_process()
        if self.inside is not None:
            self.inside.read_soon()
        self.window.pass_ended(time.perf_counter())
        self.watcher.pass_ended(self)

    def stop_gpu(self) -> None:
        """The NVML sampler stopped (the window full, or the run over), its readings cut to the
        window's measured stretches."""
        if self.gpu is not None:
            self.telemetry = self._cut(self.gpu.stop())
            self.gpu = None

    def _cut(self, telemetry: Any) -> Any:
        """The readings taken in the window's measured stretches: a window paused (evaluation, a
        checkpoint, the probe), carried on into a later pass or left partial had its sampler
        reading on through what it leaves out."""
        t0 = self.gpu_t0
        return telemetry.within([(a - t0, b - t0) for a, b in self.window.spans])

    def _current(self) -> Any:
        return self._iterator() if self._iterator is not None else None

    def _finished(self) -> None:
        self.stop_gpu()
        self.producers.close()  # no wait is split past the window: its files of /proc are closed
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

    def _inside_now(self) -> LoaderInside | None:
        """The look inside over the window, its memory over every reading since the window began
        where the readings go on past it (persistent workers: read until the script ends)."""
        seen = self.look_inside()
        if seen is None or self.inside is None or not self._memory_goes_on() or self.window_start_s is None:
            return seen
        memory = self.inside.memory(self.window_start_s, time.perf_counter(), self.window_pids)
        return dataclasses.replace(seen, memory=memory) if memory is not None else seen

    def look_inside(self) -> LoaderInside | None:
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
        rows = self.inside.rows(self.window_pids)  # read once: its stages, its hand-over, its makings
        self._produced = self._made_in_window(rows)
        seen = self.inside.result(
            self.window_start_s, end, main, pids=self.window_pids, cpu=self.cpu_totals(), rows=rows
        )
        return self._with_handover(seen, rows)

    def _made_in_window(self, rows: list[dict[str, Any]]) -> list[tuple[float, float, int]]:
        """Each batch its workers completed within the window's segments (``rates.Produced``), a
        cycle counted only from a batch the same worker completed in that segment: one begun
        before it held a pause, or a worker's idle wait while the window had not begun."""
        from ioprof.measure.stage_rows import produced_in

        if not self.settings["num_workers"]:
            return []
        made: list[tuple[float, float, int]] = []
        for start, end in self.window.spans:
            made.extend(produced_in([r for r in rows if start <= float(r["t"]) <= end], start, end))
        return made

    def _with_handover(self, seen: LoaderInside, rows: list[dict[str, Any]]) -> LoaderInside:
        """The look inside with what the slow samples cost the loop, where its batches are handed
        over in order (``in_order=False`` takes them as they come: nothing to replay)."""
        if self.inside is None or not self.settings["in_order"]:
            return seen
        iters = [m["iter_s"] for m in self.pass_marks]
        w = self.window
        return self.inside.with_handover(seen, iters, w.handed, w.unit_keys, self.window_pids, rows=rows)

    def cpu_totals(self) -> CpuTotals:
        """The window's CPU, read with its byte counters over the same spans (pauses left out)."""
        from ioprof.measure.inside import CpuTotals

        t = self.window.totals if self.window.done else self.window.totals_now()
        return CpuTotals(
            cpu_s=t.cpu_s,
            window_s=t.cpu_window_s,
            threads_window_s=t.threads_window_s,
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

    def dataset_info(self) -> DatasetInfo | None:
        """The dataset's description (sizes from a sample of what it reads), where its source is
        known or its workers were seen holding files open; None where nothing is known."""
        from ioprof import sources

        source = self.settings["source"]
        if source is not None:
            return sources.describe(source, self.settings["dataset_root"])
        if not self.opened:
            return None
        if self._seen is None:
            self._seen = sources.describe(sources.from_opened(self.opened), self.settings["dataset_root"])
        return self._seen if self.opened_held else sources.seen_in_passing(self._seen)

    def observed(self) -> LoaderObservation:
        """This loader's window as plain data (``result.build_result`` reads it). A window still
        open (partial, or to go on in a later pass) has the GPU's readings of its measured time
        so far; its sampler reads on until the window fills or the run ends (``stop_gpu``)."""
        if self.gpu is not None:
            self.telemetry = self._cut(self.gpu.so_far())
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
            "source": source_fields(self.settings["source"]),
            "opened": self.opened[:20],
            "opened_held": self.opened_held,
            "peers": self.peers[:5],
            "producer": "worker" if self.settings["num_workers"] else "main",
            "workers_out": self.workers_out,
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
            "own_once_s": self.once_s,
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
                "threads_window_s": t.threads_window_s,
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
            "produced": list(self._produced),
            "shm_warning": self.shm_warning,
            "before": self._before(),
            "pass_marks": self._pass_marks_now(),
        }

    def _pass_marks_now(self) -> list[dict[str, Any]]:
        """Each pass's marks; the open pass's with its batches so far."""
        if not (self._pass_open and self.pass_marks):
            return list(self.pass_marks)
        return [*self.pass_marks[:-1], {**self.pass_marks[-1], "batches": self.pass_batches}]

    def _before(self) -> BeforeFields | None:
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
            "producers": _producers(t, self.window.workers) if t else None,
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


def _producers(t: Totals, workers: int) -> ProducerFields | None:
    """The time the processes making the batches (the workers; without them, the training process)
    were on a CPU or waiting for one, each its threads' sum up to the span's seconds, over the spans
    whose every thread was read at both ends; None where there were none."""
    if t.threads_window_s <= 0:
        return None
    mine = os.getpid()
    per_pid: dict[int, float] = {}
    for key, cpu in t.thread_cpu_s.items():
        pid = int(key.split("/", 1)[0])
        per_pid[pid] = per_pid.get(pid, 0.0) + cpu + t.thread_runq_s.get(key, 0.0)
    making = [pid for pid in per_pid if (pid != mine) == bool(workers)]
    if not making:
        return None
    return {
        "runnable_s": sum(min(t.threads_window_s, per_pid[pid]) for pid in making),
        "processes": len(making),
        "window_s": t.threads_window_s,
    }


class _Freed:
    """Set last among a let-go iterator's attributes: freed after all of them, it calls back."""

    __slots__ = ("call",)

    def __init__(self, call: Callable[[], None]) -> None:
        self.call = call

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # never raised into the loop's collection of its iterator
            self.call()
