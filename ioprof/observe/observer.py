"""Observing a user's own training, in their process: the DataLoader iterator and optimizer steps.

Attached by ``ioprof run`` (through a ``sitecustomize`` that calls ``attach_from_env``) or by
``ioprof.watch()`` in code. Nothing in the user's files changes: the observer wraps what every
PyTorch loop uses.

- ``DataLoader.__iter__`` tags each iterator with its loader; ``_BaseDataLoaderIter.__next__``
  is timed (and so a subclass's own of either, as torchdata's ``StatefulDataLoader`` has): the
  time blocked in it is the data wait of that batch, the time until the next call
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

import json
import os
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, cast

from ioprof.observe.observation import Observation
from ioprof.observe.recorder import LoaderRecorder
from ioprof.observe.watching import WatchConfig

if TYPE_CHECKING:
    from ioprof.core.results import DatasetInfo
    from ioprof.host.fetched import MountCounters
    from ioprof.host.telemetry import GpuSampler
    from ioprof.measure.inside import InsideRecorder
    from ioprof.observe.window import GpuMarks, Reading

# A training loader whose pass ended with at least this many measured batches is probed then,
# if its window has not completed before (a script shorter than the window).
PROBE_MIN_UNITS = 5


class Watcher:
    """The observer of one process: every DataLoader it iterates and its optimizer steps."""

    def __init__(
        self, config: WatchConfig, *, only: Any = None, marks: Callable[[], Any] | None = None
    ) -> None:
        self.config = config
        self.loaders: dict[int, LoaderRecorder] = {}  # by its index: every loader seen, gone or not
        # a loader's recorder by id(loader): a loader made after another was freed can take its id,
        # and is a loader of its own (a script that makes its DataLoader again at every epoch)
        self._by_id: dict[int, LoaderRecorder] = {}
        self.optimizer_steps = 0
        self.step_threads: set[int] = set()
        self.probes: dict[str, Any] = {}
        self.probed_index = 0
        self.probe_pause_s = 0.0
        self.probe_refused = ""  # why the training loader was not probed, when it was not
        # the probe put off while a fork server imports the dataset's modules beside the training:
        # (its loader, the thread that ends once the server is ready, when the window ended)
        self._warming: tuple[LoaderRecorder, threading.Thread, float] | None = None
        self.infos: dict[int, DatasetInfo | None] = {}
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
        self.pins: Any = None  # the pin-memory copies' times (``pins.PinTimes``)
        self._iter_kind: type = object  # torch's base of DataLoader iterators, once installed
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
        self._iter_kind = dl._BaseDataLoaderIter
        # on DataLoader and its iterator, and on every subclass with its own (torchdata's
        # StatefulDataLoader overrides both), those defined already and those defined later
        self._undo.append(patch_everywhere(dl.DataLoader, "__iter__", self._timed_iter))
        self._undo.append(patch_everywhere(dl._BaseDataLoaderIter, "__next__", self._timed_next))
        self._undo.append(patch_everywhere(dl._MultiProcessingDataLoaderIter, "__del__", self._timed_del))
        handle = opt.register_optimizer_step_post_hook(lambda *_: self._count_step())
        if self.config.inside:
            from ioprof.measure.pins import PinTimes

            self.pins = PinTimes()
            self.pins.install()

        def undo() -> None:
            handle.remove()
            if self.pins is not None:
                self.pins.uninstall()
            for rec in self.loaders.values():
                rec.untime_workers()
            self.stop_readings()

        self._undo.append(undo)

    def _timed_iter(self, original_iter: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """A loader's ``__iter__`` that begins a pass of its recorder and tags the iterator."""

        def __iter__(loader: Any) -> Any:
            t_enter = time.perf_counter()
            rec = self.recorder(loader)  # made at the loader's first iter(): its settings read
            if rec is None or rec.in_iter:  # an override's call of the one it overrides
                return original_iter(loader)
            self.guard(rec, rec.before_new_pass)
            if rec.inside is not None:
                self.guard(rec, self.time_workers, loader, rec)
            t_iter = time.perf_counter()
            rec.in_iter = True
            try:
                it = original_iter(loader)
            finally:
                rec.in_iter = False
            if isinstance(it, self._iter_kind):
                cast(Any, it)._ioprof_recorder = rec
                rec.new_iterator(it, t_enter, t_iter)
            return it

        return __iter__

    def _timed_next(self, original_next: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """An iterator's ``__next__`` whose batch is timed once (not again where it calls the one
        it overrides)."""

        def __next__(it: Any) -> Any:
            rec = getattr(it, "_ioprof_recorder", None)
            if rec is None or getattr(it, "_ioprof_in_next", False):
                return original_next(it)
            it._ioprof_in_next = True
            try:
                return self._timed_batch(it, rec, original_next)
            finally:
                it._ioprof_in_next = False

        return __next__

    def _timed_del(self, original_del: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """An iterator's ``__del__``: where the loop let go of a pass's iterator before running it
        out, its workers (not persistent) are stopped and joined here, in the loop's time."""

        def __del__(it: Any) -> None:
            rec, t0 = None, 0.0
            try:
                rec = getattr(it, "_ioprof_recorder", None)
                t0 = time.perf_counter()
            except Exception:  # at the interpreter's end, half its modules gone: stop the workers
                rec = None
            original_del(it)
            if rec is not None:
                self.guard(rec, rec.pass_dropped, it, t0)

        return __del__

    def _timed_batch(self, it: Any, rec: LoaderRecorder, original_next: Callable[[Any], Any]) -> Any:
        """One batch from ``it``: its wait, the step before it, and ioprof's own cost."""
        t_call = time.perf_counter()
        paused = self.probe_pause_s  # a probe run from here is its own pause, not this cost
        rec.once = False  # set by what this call does once (``iter()`` may have ended a pass)
        if self._warming is not None:
            self.guard(rec, self.probe_when_ready, rec)
        self.guard(rec, rec.before_next, it, t_call)
        t_in = time.perf_counter()
        try:
            batch = original_next(it)
        except StopIteration:
            # workers not kept are stopped and joined in this call: the pass ends where it began
            self.guard(rec, rec.pass_stopped, it, t_in, time.perf_counter() - t_in)
            raise
        t_return = time.perf_counter()
        self.guard(rec, rec.after_next, it, t_call, t_return, batch)
        first = rec.producers.first_cost()  # the first waits' split: the window pays it once
        # ioprof's own cost; the probe's pause, when the pass's last batch set it off, is said apart
        own = t_in - t_call + time.perf_counter() - t_return - (self.probe_pause_s - paused)
        if rec.once:
            rec.once, rec.once_s = False, rec.once_s + own
        else:
            rec.own_s, rec.own_calls = rec.own_s + own - first, rec.own_calls + 1
            rec.once_s += first
        self.guard(rec, rec.pass_own, it, own, t_in - t_call)
        return batch

    def guard(self, rec: LoaderRecorder, fn: Callable[..., None], *a: Any) -> None:
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
        script ends with windows still open), and its GPU sampler."""
        for rec in list(self.loaders.values()):
            if rec.inside is not None:  # an open window's, or persistent workers' read past theirs
                rec.inside.stop(list(rec.window._pids))
            rec.producers.close()  # the files of /proc its waits were split with
        self.stop_samplers()

    def stop_samplers(self) -> None:
        """Stop every loader's NVML sampler: a window left open keeps what it read."""
        for rec in list(self.loaders.values()):
            rec.stop_gpu()

    def failed(self, error: BaseException) -> None:
        """The script failed with ``error``: one line where a loader's worker ran out of /dev/shm."""
        from ioprof.host.processes import shm_space
        from ioprof.measure.shm import shm_failure, shm_line, shm_note

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

    def recorder(self, loader: Any) -> LoaderRecorder | None:
        """The recorder of a loader about to be iterated (made at its first pass), or None when it
        is not watched."""
        if getattr(loader, "_ioprof_probe", False):
            return None  # ioprof's own probe of the user's pipeline
        if self._only is not None and self._only() is not loader:
            return None  # watch(loader) observes that loader only
        with self._lock:
            rec = self._by_id.get(id(loader))
            if rec is None or rec.loader() is not loader:
                rec = LoaderRecorder(self, loader, len(self.loaders) + 1)
                self.loaders[rec.index] = rec
                self._by_id[id(loader)] = rec
        return rec

    def time_workers(self, loader: Any, rec: LoaderRecorder) -> None:
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

    def inside_recorder(self, rec: LoaderRecorder) -> InsideRecorder:
        from ioprof.measure.inside import InsideRecorder

        s = rec.settings
        return InsideRecorder(
            folder=self.rows_folder(),
            tag=rec.index,
            workers=s["num_workers"],
            prefetch_factor=s["prefetch_factor"],
            pin_memory=s["pin_memory"],
            persistent_workers=s["persistent_workers"],
            dataset_items=s["dataset_len"],
            batches_per_pass=s["batches_per_pass"],
            ranks_on_host=self.local_world_size,
        )

    def device(self) -> str:
        """The device the script trains on, as far as torch says (CUDA once initialized)."""
        torch = sys.modules.get("torch")
        # is_initialized first: is_available() probes the driver, tens of ms where there is no GPU
        if torch is not None and torch.cuda.is_initialized() and torch.cuda.is_available():
            return f"cuda:{torch.cuda.current_device()}"
        return "cpu"

    def gpu_marks(self) -> GpuMarks | None:
        """Events on the script's GPU stream (``window.GpuMarks``), or None on the CPU."""
        if self._marks is not None:
            return self._marks()
        if not self.device().startswith("cuda"):
            return None
        return CudaMarks()

    def gpu_sampler(self) -> GpuSampler | None:
        """An NVML sampler for the script's GPU, or None on the CPU."""
        if not self.device().startswith("cuda"):
            return None
        import torch

        from ioprof.host.telemetry import nvml_for_device, open_gpu_sampler

        return open_gpu_sampler(nvml_for_device(torch.device(self.device()))[1])

    def read_counters(
        self, rec: LoaderRecorder, pids: Sequence[int], at_s: float, cpu: bool = True
    ) -> Reading:
        """The I/O counters of a loader's processes and its mount's, now; with ``cpu``, the CPU
        of those processes and of the training process, and each of their threads' totals (the
        costly part: a training process has dozens of threads)."""
        from ioprof.host import procstat
        from ioprof.observe.window import Reading

        t0 = time.perf_counter()
        procs, own, cpus, threads, parents, reaped = {}, {}, {}, {}, {}, set()
        for pid in {*pids, os.getpid()} if cpu else pids:
            if not cpu:
                io = procstat.reads(pid)
                if io is not None:  # None: gone (a worker reaped), or not readable
                    procs[pid], own[pid] = (io[1], io[0]), io[2]
                continue
            got = procstat.sample(pid, own=pid in pids)
            if got is None:
                if not os.path.exists(f"/proc/{pid}"):  # not even a zombie: its parent reaped it
                    reaped.add(pid)
                continue
            cpus[pid] = got.cpu_s + got.children_cpu_s
            parents[pid] = got.ppid
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
        from ioprof.host.netdev import rx_all, rx_bytes

        # the interface its source arrives on; while no source is known, every interface's count
        # (its workers' connections may name one at the first batch)
        net, rx = None, {}
        if rec.iface is not None:
            net = rx_bytes(rec.iface)
        elif not rec.settings["dataset_root"] and rec.settings["source"] is None:
            rx = rx_all()
        took = time.perf_counter() - t0
        return Reading(
            at_s,
            procs,
            nfs,
            daemon,
            own_chars=own,
            cpu=cpus,
            threads=threads,
            parents=parents,
            reaped=reaped,
            wall_s=time.time() - took / 2,
            read_s=t0 + took / 2,
            net_bytes=net,
            iface=rec.iface,
            rx=rx,
            took_s=took,
        )

    def mount_counters(self, root: str) -> MountCounters | None:
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

    def window_finished(self, rec: LoaderRecorder) -> None:
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

    def probe_when_ready(self, rec: LoaderRecorder) -> None:
        """Before a batch of the loader whose probe was put off: probe once its fork server is
        ready (or has been starting for PROBE_BATCH_TIMEOUT_S: then the probe waits for it)."""
        if self._warming is None or self._warming[0] is not rec:
            return
        from ioprof.observe.probe import PROBE_BATCH_TIMEOUT_S

        _, thread, since = self._warming
        if thread.is_alive() and time.perf_counter() - since < PROBE_BATCH_TIMEOUT_S:
            return
        rec.once = True
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

    def pass_ended(self, rec: LoaderRecorder) -> None:
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

    def _may_probe(self, rec: LoaderRecorder) -> bool:
        """Whether ``rec`` is the loader to probe and has steps enough (without saying why not)."""
        return self._probe_wanted(rec) and len(rec.window.step_times) >= PROBE_MIN_UNITS

    def _probe_wanted(self, rec: LoaderRecorder) -> bool:
        """The training loader, probes asked for, and none taken yet."""
        return rec.role == "training" and bool(self.config.probe) and not self.probes

    def _probe(self, rec: LoaderRecorder, when: str) -> bool:
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

        _zips_held(rec)
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
        if rec.iface is not None:  # the probe's reads over the network: in flight no more
            self._quiet(rec.iface)
        # the dataset described now, inside the pause it states, not by the first save after it: a
        # description reads files (a sample's sizes, whether the filesystem keeps pages), which on
        # an 8 Mbit/s sshfs link stopped the training 4.4 s longer than the 10.9 s the probe said
        self._info(rec)
        self.probe_pause_s = time.perf_counter() - t0
        self.probe_refused = ""
        return True

    def _quiet(self, iface: str) -> None:
        """Wait for the bytes the probe's own reads left in flight on ``iface`` (``netdev.wait_quiet``):
        arriving after the pause, they would be counted as the loader's."""
        from ioprof.host.netdev import wait_quiet

        rates = [c.read_mb_per_s * 1e6 for c in self.probes.get("storage") or []]
        phases = self.probes.setdefault("phases_s", {})
        phases["the link falling quiet"] = wait_quiet(iface, max(rates, default=0.0))

    def observation(self) -> Observation:
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

    def _info(self, rec: LoaderRecorder) -> DatasetInfo | None:
        if rec.index in self.infos:
            return self.infos[rec.index]
        try:
            info = rec.dataset_info()
        except Exception:  # a description is a nicety: never let it break the user's run
            info = None
        if not rec.opened or rec.opened_held is not None:  # files seen open: once looked at again
            self.infos[rec.index] = info
        return info

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


def patch_everywhere(
    base: Any, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Callable[[], None]:
    """``base.<name>`` replaced by ``wrap`` of it, and so on every subclass that defines its own:
    those defined already and those a script defines later. Returns the undo."""
    patched: list[tuple[type, Any]] = []

    def patch(cls: type) -> None:
        own = cls.__dict__.get(name)
        if own is None or getattr(own, "_ioprof", False):
            return
        wrapped = wrap(own)
        wrapped._ioprof = True  # type: ignore[attr-defined]
        setattr(cls, name, wrapped)
        patched.append((cls, own))

    def walk(cls: type) -> None:
        patch(cls)
        subs: list[type] = cls.__subclasses__()
        for sub in subs:
            walk(sub)

    walk(base)
    before = base.__dict__.get("__init_subclass__")

    def __init_subclass__(cls: type, **kwargs: Any) -> None:
        if before is not None:
            before.__get__(None, cls)(**kwargs)
        else:
            super(base, cls).__init_subclass__(**kwargs)
        patch(cls)

    base.__init_subclass__ = classmethod(__init_subclass__)

    def undo() -> None:
        for cls, own in reversed(patched):
            setattr(cls, name, own)
        if before is None:
            del base.__init_subclass__
        else:
            base.__init_subclass__ = before

    return undo


def shutil_rmtree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


class CudaMarks:
    """``window.GpuMarks`` on CUDA: timing events on the current stream of the current device."""

    def mark(self) -> Any:  # a torch.cuda.Event
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def settle(self, event: Any) -> None:
        event.synchronize()

    def seconds(self, start: Any, end: Any) -> float:
        return max(0.0, float(start.elapsed_time(end)) / 1e3)


def _zips_held(rec: LoaderRecorder) -> None:
    """A dataset that says nothing of what it reads, whose workers held zip archives open all
    along: its source is those archives, read by member in the probe, where their images are as
    many as its samples (their central directories read now, in the probe's pause)."""
    if rec.settings["source"] is not None or not rec.opened or not rec.opened_held:
        return
    from ioprof import sources

    found = sources.zips_held(rec.opened, rec.settings["dataset_len"])
    if found is not None:
        rec.settings["source"] = found
