"""One rank of ``ioprof scale`` or ``ioprof devices``, started by torchrun.

``scale``: its own DataLoader with a DistributedSampler and workers, its own (simulated or real)
step with DDP's all-reduce, all ranks reading one dataset. Every rank runs the same number of
steps (DDP requires it), times each one as a sweep cell does — the time blocked in ``next()`` is
its data wait — and counts the bytes its loader read and the CPU its process and workers used.

``devices``: the model on synthetic input under DDP, one GPU (or CPU process) per rank.

The ranks' records are gathered on rank 0 (over gloo, which also works across nodes), which
writes them where the command looks:

    python -m torch.distributed.run --nproc-per-node N -m ioprof.runners.rank CONFIG.json

A rank that fails prints one ``RANK_ERROR_MARK`` line with its reason before it exits.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psutil
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from ioprof.core.config import PREFETCH_FACTOR, ComputeSpec, LoaderSetting
from ioprof.core.counts import CacheInfo, Fetched, IoCounts
from ioprof.core.resultfile import from_jsonable, to_jsonable
from ioprof.core.results import CellResult
from ioprof.core.stats import data_wait_share
from ioprof.datasets.discover import find_images
from ioprof.host import iocounters
from ioprof.host.fetched import FetchReadings, MountCounters, bytes_read, decide
from ioprof.host.machine import usable_cores
from ioprof.host.pagecache import cut_reads, filesystem_of, prepare, verify_after, verify_warm_after
from ioprof.host.processes import end_loader_workers, quick_exit
from ioprof.measure.loader import ImageFiles, collate, train_transform, worker_pids
from ioprof.measure.storage import check_storage

RANK_ERROR_MARK = "ioprof-rank-error:"


class AllReduceStep:
    """A step followed by DDP's synchronization: a simulated step's wait, or a real DDP step."""

    def __init__(self, cfg: dict[str, Any], device: torch.device, classes: int) -> None:
        self.device = device
        spec = ComputeSpec(**cfg["compute"])
        if spec.kind == "sim":
            from ioprof.measure.compute import SimulatedStep

            self.sim: Any = SimulatedStep(spec)
            self.grad = torch.zeros(cfg["allreduce_floats"], device=device)  # lockstep, as DDP's all-reduce
        else:
            from ioprof.measure.compute import build_model

            self.sim = None
            model = build_model(cfg["model"], max(classes, 1000)).to(device)
            self.model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None
            )
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
            self.loss = torch.nn.CrossEntropyLoss()

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        if self.sim is not None:
            self.sim(images, labels)
            dist.all_reduce(self.grad)
            return
        self._train(images, labels)

    def _train(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        x, y = images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)
        self.opt.zero_grad(set_to_none=True)
        self.loss(self.model(x), y).backward()  # DDP all-reduces the gradients here
        self.opt.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def compute_s(self, batch_size: int, crop_px: int, steps: int = 3) -> float:
        """The accelerator's work per step without waiting for another rank: the simulated step's
        own time, or real steps on a batch already in memory under DDP's ``no_sync`` (no
        all-reduce, so no wait for a late rank; NVML would count NCCL's spinning as busy)."""
        if self.sim is not None:
            return batch_size / float(self.sim.img_per_s)
        images = torch.randn(batch_size, 3, crop_px, crop_px)
        labels = torch.zeros(batch_size, dtype=torch.long)
        with self.model.no_sync():
            self._train(images, labels)  # warm-up
            times = []
            for _ in range(steps):
                t0 = time.perf_counter()
                self._train(images, labels)
                times.append(time.perf_counter() - t0)
        self.opt.zero_grad(set_to_none=True)  # the unsynchronized gradients are not applied further
        return sorted(times)[len(times) // 2]


def _batches(loader: DataLoader, sampler: DistributedSampler) -> Any:
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def _tree_cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += t.user + t.system
    return total


def _gpu_sampler(device: torch.device) -> Any:
    """NVML for this rank's own GPU (each rank samples its own), or the reason there is none."""
    from ioprof.host.telemetry import UnavailableSampler, nvml_for_device, open_gpu_sampler

    if device.type != "cuda":
        return UnavailableSampler("this rank trains on the CPU")
    _, status = nvml_for_device(device)
    return open_gpu_sampler(status)


def _prepared(paths: Sequence[str], regime: str, fs: Any, local: int, world: int, group: Any) -> CacheInfo:
    """One eviction (or warming) per node, before any of its ranks reads; every rank keeps its node's record."""
    prepared = prepare(paths, regime, fs) if local == 0 else None
    everyone: list[Any] = [None] * world
    here = os.uname().nodename
    dist.all_gather_object(everyone, (here, to_jsonable(prepared) if prepared else None), group=group)
    return from_jsonable(CacheInfo, next(c for host, c in everyone if host == here and c is not None))


def _loader(
    cfg: dict[str, Any], ds: ImageFiles, sampler: Any, setting: LoaderSetting, device: torch.device
) -> DataLoader:
    kwargs: dict[str, Any] = {}
    if setting.workers and cfg.get("start_method"):
        kwargs["multiprocessing_context"] = cfg["start_method"]
    return DataLoader(
        ds,
        batch_size=cfg["batch_size"],
        sampler=sampler,
        num_workers=setting.workers,
        collate_fn=collate,
        drop_last=True,
        persistent_workers=setting.workers > 0,
        pin_memory=device.type == "cuda",
        **kwargs,
    )


@dataclass
class _RankWindow:
    """What one rank's measured window recorded, step by step, and its counters at both ends."""

    waits: list[float] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    io: Any = None
    mounts: tuple[Any, Any] = (None, None)
    readings: FetchReadings | None = None  # the fetch counters, read at step boundaries
    made: list[float] = field(default_factory=list)  # when each batch was made, s from the open
    cpu_s: float = 0.0
    wall_s: float = 0.0
    telemetry: Any = None


def _measure(
    cfg: dict[str, Any], loader: DataLoader, it: Any, step: Any, root: str, fs: Any, device: Any, warmup: int
) -> _RankWindow:
    """Warm-up, then ``cfg["steps"]`` steps timed as a sweep cell's: the wait in ``next()``, the step."""
    w = _RankWindow()
    mount, gpu = MountCounters(fs), _gpu_sampler(device)
    pids = [os.getpid()]
    io_before, mount_before, cpu_before, t_start = None, None, 0.0, time.perf_counter()
    for i in range(warmup + cfg["steps"]):
        if i == warmup:
            workers = worker_pids(getattr(loader, "_iterator", None))
            pids = [os.getpid(), *workers]
            # the processes that read the files, as a sweep cell counts them: the workers, or this one
            readings = w.readings = FetchReadings(workers or [os.getpid()], mount)
            io_before, mount_before = readings.open(time.perf_counter())
            cpu_before, t_start = _tree_cpu_s(pids), time.perf_counter()
            opened = time.monotonic()  # the clock the workers stamp their batches with
            gpu.start()
        t_a = time.perf_counter()
        batch = next(it)
        t_b = time.perf_counter()
        if batch.lost is not None:
            path, code = batch.lost
            check_storage(root, fs, OSError(code, os.strerror(code), path))
        if batch.images is None:
            reason = batch.failures[0][1] if batch.failures else "?"
            raise RuntimeError(f"a whole batch could not be decoded: {reason}")
        step(batch.images, batch.labels)
        if i >= warmup:
            w.waits.append(t_b - t_a)
            w.steps.append(time.perf_counter() - t_b)
            w.counts.append(int(batch.images.shape[0]))
            w.nbytes.append(batch.bytes_read)
            w.paths.extend(batch.paths)
            w.made.append(batch.made_s - opened)
            readings.step(len(w.steps), time.perf_counter())
    assert io_before is not None and w.readings is not None
    io_after, mount_after = w.readings.close(len(w.steps), time.perf_counter())
    w.io = iocounters.delta(io_before, io_after)
    w.mounts = (mount_before, mount_after)
    w.wall_s = time.perf_counter() - t_start
    closed = time.monotonic()
    w.cpu_s = _tree_cpu_s(pids) - cpu_before
    w.telemetry = gpu.stop()
    w.made.extend(_held_at_close(it, int(cfg["workers"]), opened, closed))
    return w


def _held_at_close(it: Any, workers: int, opened: float, closed: float) -> list[float]:
    """When each batch the workers had made by the window's close but not handed over was made (s
    from the open): taken after it without a step, until each worker's next batch was made after
    the close — at most every batch they may hold, and one more each. A loader without workers
    makes its batch inside ``next()``, so holds none."""
    held: list[float] = []
    after = 0  # batches in a row made after the close: one a worker, and no worker holds another
    for _ in range(workers * (PREFETCH_FACTOR + 1)):
        batch = next(it)
        if batch.made_s > closed:
            after += 1
            if after == workers:
                break
            continue
        after = 0
        held.append(batch.made_s - opened)
    return held


def _rank_cell(
    rank: int,
    cfg: dict[str, Any],
    setting: LoaderSetting,
    w: _RankWindow,
    cache: CacheInfo,
    fs: Any,
    warmup: int,
    cut: list[str],
) -> CellResult:
    cache = verify_after(cache, w.paths, cut)

    by_workers = setting.processes > 0 and not fs.object_store

    def count(io: IoCounts, steps: tuple[int, int], ends: tuple[Any, Any]) -> Fetched:
        requested = bytes_read(sum(w.nbytes[slice(*steps)]), io, by_workers)
        return decide(
            fs, cache, read_bytes=io.read_bytes, requested_bytes=requested, before=ends[0], after=ends[1]
        )

    fetched = count(w.io, (0, len(w.nbytes)), w.mounts)
    cache = verify_warm_after(cache, fetched, bytes_read(sum(w.nbytes), w.io, by_workers), fs)
    elapsed = sum(w.waits) + sum(w.steps)
    method = (cfg.get("start_method") or multiprocessing.get_start_method()) if setting.workers else ""
    return CellResult(
        dataset=f"rank {rank}",
        loader=setting.kind,
        workers=setting.workers,
        batch_size=cfg["batch_size"],
        warmup_steps=warmup,
        steps=len(w.steps),
        images=sum(w.counts),
        elapsed_s=elapsed,
        img_per_s=sum(w.counts) / elapsed if elapsed > 0 else 0.0,
        wait_s=tuple(w.waits),
        step_s=tuple(w.steps),
        data_wait_share=data_wait_share(w.waits, w.steps),
        startup_s=0.0,
        io=w.io,
        cache=cache,
        gpu=w.telemetry,
        stopped_by="steps",
        images_per_step=tuple(w.counts),
        bytes_per_step=tuple(w.nbytes),
        fetched=fetched,
        start_method=method,
        fetched_segments=w.readings.segments(count, fetched) if w.readings is not None else (),
        reads_counted="workers" if by_workers else "batches",
    )


def run_scale_rank(cfg: dict[str, Any], group: Any) -> dict[str, Any]:
    rank, world, local = dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local}") if cfg["backend"] == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if cfg.get("threads_per_rank"):
        torch.set_num_threads(cfg["threads_per_rank"])
    images = find_images(cfg["data"])
    fs = filesystem_of(images.root)
    cache = _prepared(images.paths, cfg["regime"], fs, local, world, group)
    ds = ImageFiles(
        images.paths, images.labels, train_transform(cfg["crop_px"]), evict_after_read=cfg["regime"] == "cold"
    )
    sampler: DistributedSampler[Any] = DistributedSampler(
        ds, num_replicas=world, rank=rank, shuffle=True, seed=cfg["seed"], drop_last=True
    )
    setting = LoaderSetting.multiprocess(cfg["workers"]) if cfg["workers"] else LoaderSetting.serial()
    loader = _loader(cfg, ds, sampler, setting, device)
    step = AllReduceStep(cfg, device, len(images.classes))
    compute_s = step.compute_s(cfg["batch_size"], cfg["crop_px"])
    warmup = cfg["warmup_steps"] + setting.workers
    w = _measure(cfg, loader, _batches(loader, sampler), step, images.root, fs, device, warmup)
    # the window is over: the workers, reading ahead, are ended before its files' residency is read
    cut = cut_reads(images.root, end_loader_workers(getattr(loader, "_iterator", None)), cache)
    cell = _rank_cell(rank, cfg, setting, w, cache, fs, warmup, cut)
    return {
        "rank": rank,
        "host": os.uname().nodename,
        "cell": to_jsonable(cell),
        "cpu_s": w.cpu_s,
        "wall_s": w.wall_s,
        "host_cores": usable_cores(),
        "compute_s_per_step": compute_s,
        "made_s": w.made,
    }


def run_devices_rank(cfg: dict[str, Any], group: Any) -> dict[str, Any]:
    """The model on synthetic input under DDP: warm-up, then ``steps`` timed steps."""
    from ioprof.measure.models import Trainer, device_model

    rank, local = dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local}") if cfg["backend"] == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if cfg.get("threads_per_rank"):
        torch.set_num_threads(cfg["threads_per_rank"])
    spec = device_model(cfg["model"])
    torch.manual_seed(cfg["seed"])  # every rank starts from the same weights, as DDP broadcasts them
    model = spec.build().to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[local] if device.type == "cuda" else None
    )
    trainer = Trainer(ddp, spec, cfg["batch_size"], device, seed=cfg["seed"] + rank)
    trainer.steps(cfg["warmup_steps"])
    return {"rank": rank, "host": os.uname().nodename, "step_s": trainer.steps(cfg["steps"])}


JOBS = {"scale": run_scale_rank, "devices": run_devices_rank}


def init_group(cfg: dict[str, Any]) -> Any:
    """Join the job's process group (torchrun's environment says where); returns a gloo group for
    objects, which travel over gloo on every backend and across nodes."""
    dist.init_process_group(cfg["backend"], timeout=timedelta(seconds=cfg.get("collective_timeout_s", 300)))
    return dist.new_group(backend="gloo")


def run_job(cfg: dict[str, Any], group: Any) -> list[dict[str, Any]] | None:
    """This rank's part of the job; every rank's record on rank 0 (None on the others)."""
    try:
        mine = JOBS[cfg["job"]](cfg, group)
    except BaseException as e:  # the launcher reads this line as the rank count's reason
        text = str(e).strip().splitlines()
        print(
            f"{RANK_ERROR_MARK} rank {dist.get_rank()}: {type(e).__name__}: {text[0] if text else ''}",
            file=sys.stderr,
            flush=True,
        )
        raise
    rank0 = dist.get_rank() == 0
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.gather_object(mine, gathered if rank0 else None, dst=0, group=group)
    return gathered if rank0 else None


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as f:
        cfg = json.load(f)
    group = init_group(cfg)
    gathered = run_job(cfg, group)
    if gathered is not None:
        tmp = cfg["out"] + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(gathered, f)
        os.replace(tmp, cfg["out"])
    dist.barrier(group=group)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    quick_exit(main(sys.argv[1:]))  # after its group is destroyed: nothing left but the teardown
