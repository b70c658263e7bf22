"""``ioprof whatif``: the fixes people are told to try, measured on the user's data and host.

A sample of the dataset runs end to end — the same transforms, batch and training step — once as
the user's pipeline is (the baseline), then under each alternative that applies here: threads
instead of worker processes, ``decode_jpeg`` instead of PIL, a pre-resized copy, packed shards,
``prefetch_factor``, ``persistent_workers``, ``pin_memory`` (CUDA), and the share of the dataset
RAM could keep warm. Copies and shards go into a scratch folder (its size is said first), never
next to the user's data, and the folder is removed afterwards — also on Ctrl-C or an error.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

import torch

from ioprof.core.config import LoaderSetting, WhatifConfig, whatif_wants
from ioprof.core.counts import CacheInfo
from ioprof.core.resultfile import to_jsonable
from ioprof.core.results import SCHEMA_VERSION, CellResult, StorageCeiling
from ioprof.core.results_whatif import AGAIN_EVERY, AlternativeResult, WhatifResult, again, is_current
from ioprof.datasets import objects
from ioprof.datasets.dataset import Dataset
from ioprof.datasets.discover import ImageList, describe
from ioprof.host.machine import memory_for_cache
from ioprof.host.pagecache import filesystem_of, keeps_pages
from ioprof.host.telemetry import open_gpu_sampler
from ioprof.measure.ceilings import compute_ceiling, first_line, store_ceilings
from ioprof.measure.cell import CellPlan, Failures, run_cell
from ioprof.measure.compute import TrainStep, make_step
from ioprof.measure.loader import make_loader, shard_batches, start_loader
from ioprof.measure.sample import load_sample
from ioprof.measure.session import Progress, Session, put_back
from ioprof.measure.storage import EmulatedStorage, copy_to, probe_storage
from ioprof.runners import pipelines as alt

# Pre-resized copies: the short side the files are brought down to (torchvision's ImageNet recipe
# resizes to 256 before cropping 224; 320 keeps more for RandomResizedCrop).
RESIZE_SHORT_SIDES = (256, 320)
PREFETCH_FACTORS = (1, 4, 8)
# Threads that read each worker's batch together (objects in a store): requests in flight = workers × this.
FETCH_THREADS = 4
# The sample packed into about this many shards (WebDataset shards are a few hundred MB; a sample
# is far smaller, so it is cut into enough shards to feed every worker several).
SHARDS_PER_WORKER = 4
# The share of free RAM the page cache could hold for the dataset.
RAM_FOR_CACHE = 0.8
SAMPLE_MAX_BYTES = 128 * 10**6


def pick_sample(dataset: Dataset, images: int, seed: int) -> Dataset:
    """A shuffled sample of the dataset's files or objects (read in place, never written)."""
    imgs = dataset.images
    order = list(range(len(imgs.paths)))
    random.Random(seed).shuffle(order)
    chosen: list[int] = []
    size = 0
    sharded = dataset.info.sharded
    per_sample = dataset.info.mean_file_bytes or 1.0
    for i in order:
        held = round(size / per_sample) if sharded else len(chosen)  # shards: the samples they hold
        if held >= images or size >= SAMPLE_MAX_BYTES:
            break
        try:
            size += imgs.sizes[i] if imgs.sizes else Path(imgs.paths[i]).stat().st_size
        except OSError:
            continue
        chosen.append(i)
    sample = ImageList(
        imgs.root,
        tuple(imgs.paths[i] for i in chosen),
        tuple(imgs.labels[i] for i in chosen),
        imgs.classes,
        imgs.layout,
        tuple(imgs.sizes[i] for i in chosen) if imgs.sizes else (),
    )
    info = replace(
        dataset.info,
        files=len(chosen),
        total_bytes=size,
        mean_file_bytes=(per_sample if sharded else size / len(chosen)) if chosen else None,
        samples=max(1, round(size / per_sample)) if sharded else dataset.info.samples,
    )
    return Dataset(info, sample, dataset.fs, dataset.evicted)


def _copy_dataset(label: str, paths: Sequence[str], labels: Sequence[int], like: Dataset) -> Dataset:
    root = str(Path(paths[0]).parent) if paths else like.root
    layout = "shards" if like.info.sharded else "flat"
    images = ImageList(root, tuple(paths), tuple(labels), like.images.classes, layout)
    return Dataset(replace(like.info, label=label, path=root), images, filesystem_of(root))


class Trial:
    """What every alternative shares: the sample, the step, the run length, the scratch folder."""

    def __init__(
        self, config: WhatifConfig, session: Session, sample: Dataset, scratch: Path, progress: Progress
    ):
        self.config, self.session, self.sample, self.scratch, self.progress = (
            config,
            session,
            sample,
            scratch,
            progress,
        )
        self.workers = config.workers if config.workers is not None else session.machine.cpu_cores_usable
        self.setting = LoaderSetting.multiprocess(self.workers) if self.workers else LoaderSetting.serial()
        self.run = replace(session.run, max_seconds=config.seconds)
        self.emulated = EmulatedStorage(config.storage_profile) if config.storage_profile else None
        self.memory = (
            load_sample(sample.images, sample.fs, seed=config.seed, max_files=10**9, max_bytes=10**12)
            if self.emulated
            else None
        )
        self.step: TrainStep = make_step(
            config.compute,
            session.device,
            model=config.model,
            num_classes=len(sample.images.classes),
            non_blocking=session.device.type == "cuda",
            precision=config.precision,
            channels_last=bool(config.channels_last),
        )
        self.failures = Failures()
        self.scratch_bytes = 0
        self.loose: Dataset | None = None  # the sample copied to the scratch folder (the control)
        self.sharded = sample.info.sharded
        self.store_scratch = ""  # a prefix in the data's store for the shards (``--scratch s3://…``)
        self.uploaded: list[str] = []  # what ioprof wrote there: removed at the end, whatever happens

    def sources(self) -> Sequence[str]:
        """What the copies (resized, shards) are made from: the sample where it is — or, for
        objects in a store, the control's local copy of them (the same bytes, fetched once)."""
        if self.sample.fs.object_store and self.loose is not None:
            return self.loose.images.paths
        return self.sample.images.paths

    def plan(self, dataset: Dataset, **changes: object) -> CellPlan:
        memory = self.memory if dataset is self.sample else None
        plan = CellPlan(
            dataset=dataset,
            setting=self.setting,
            run=self.run,
            crop_px=self.config.crop_px,
            regime=self.config.cache,
            pin_memory=False,
            seed=self.config.seed,
            start_method=self.config.start_method,
            emulated=self.emulated,
            sample=memory,
        )
        return replace(plan, **changes)  # type: ignore[arg-type]

    def cell(self, name: str, plan: CellPlan) -> CellResult:
        self.progress(f"{name}: measuring…")
        cell = run_cell(plan, self.step, gpu=open_gpu_sampler(self.session.nvml), failures=self.failures)
        self.progress.measured(cell, position=f"{name}:")
        return cell

    def where(self, dataset: Dataset) -> tuple[str, str]:
        """Which storage an alternative reads: the data's own (the sample, or a copy on the same
        mount), the scratch storage, or the emulated device."""
        if self.emulated is not None:
            return "emulated", self.emulated.profile.name
        same = dataset is self.sample or dataset.fs.mountpoint == self.sample.fs.mountpoint
        same = same or (dataset.fs.object_store and dataset.fs == self.sample.fs)  # the data's own store
        return ("data" if same else "scratch"), dataset.fs.fs_type


def _measured(
    trial: Trial, name: str, dataset: Dataset, plan: CellPlan, **extra: object
) -> AlternativeResult:
    where, fs = trial.where(dataset)
    try:
        cell = trial.cell(name, plan)
    except (RuntimeError, OSError) as e:  # a worker died, a library refused: this alternative, not the run
        return AlternativeResult(name, False, f"failed: {first_line(e)}", None, where, fs)
    return AlternativeResult(name, True, "", cell, where, fs, **extra)  # type: ignore[arg-type]


def _not(name: str, why: str) -> AlternativeResult:
    return AlternativeResult(name, False, why, None, "", "")


def baseline(trial: Trial) -> AlternativeResult:
    return _measured(trial, "baseline", trial.sample, trial.plan(trial.sample))


def threads(trial: Trial) -> AlternativeResult:
    if trial.sharded:
        return _not("threads", "sharded")
    if not trial.workers:
        return _not("threads", "needs-workers")
    if missing := alt.torchdata_missing():
        return _not("threads", f"missing:{missing}")
    plan = trial.plan(trial.sample, setting=LoaderSetting("threads", trial.workers), loader=alt.thread_loader)
    return _measured(trial, "threads", trial.sample, plan)


def decode_jpeg(trial: Trial) -> AlternativeResult:
    if trial.sharded:
        return _not("decode_jpeg", "sharded")
    return _measured(
        trial, "decode_jpeg", trial.sample, trial.plan(trial.sample, loader=alt.decode_jpeg_loader)
    )


def gpu_decode(trial: Trial) -> AlternativeResult:
    # batched nvJPEG decode on the device is not built yet: it has never run on a GPU here
    return _not("gpu_decode", "needs-cuda" if trial.session.device.type != "cuda" else "not-built")


def resized(trial: Trial, short_side: int) -> AlternativeResult:
    name = f"resized-{short_side}"
    info = trial.sample.info
    if trial.sharded:
        return _not(name, "sharded")
    if min(info.mean_width_px or 0.0, info.mean_height_px or 0.0) <= short_side:
        return _not(name, "already-small")
    paths, seconds, nbytes = alt.write_resized(trial.sources(), trial.scratch / name, short_side)
    trial.scratch_bytes += nbytes
    copy = _copy_dataset(name, paths, trial.sample.images.labels, trial.sample)
    plan = trial.plan(copy)
    if trial.emulated is not None:  # read the copy through the emulated device, from memory
        plan = replace(
            plan, sample=load_sample(copy.images, copy.fs, seed=0, max_files=10**9, max_bytes=10**12)
        )
    return _measured(
        trial, name, copy, plan, prep_s=seconds, prep_bytes=nbytes, sample_bytes=info.listed_bytes
    )


def shards(trial: Trial) -> AlternativeResult:
    """Packed shards of the sample, in the scratch folder."""
    if trial.sharded:
        return _not("shards", "sharded")
    n = max(1, trial.workers) * SHARDS_PER_WORKER
    size = max(1, trial.sample.info.listed_bytes // n)
    paths, seconds, nbytes = alt.write_shards(
        trial.sources(), trial.sample.images.labels, trial.scratch / "shards", size
    )
    trial.scratch_bytes += nbytes
    blobs = [Path(p).read_bytes() for p in paths] if trial.emulated is not None else None
    copy = _copy_dataset("shards", paths, [0] * len(paths), trial.sample)
    if trial.store_scratch:  # into the user's scratch prefix in the store, streamed from there
        paths, seconds = _uploaded(trial, paths, seconds)
        info = replace(copy.info, label="shards", path=trial.store_scratch, fs_type=trial.sample.fs.fs_type)
        images = replace(copy.images, root=trial.store_scratch, paths=tuple(paths))
        copy = Dataset(info, images, trial.sample.fs)
    plan = trial.plan(copy, loader=alt.shard_loader(paths, blobs))
    return _measured(
        trial,
        "shards",
        copy,
        plan,
        prep_s=seconds,
        prep_bytes=nbytes,
        sample_bytes=trial.sample.info.listed_bytes,
    )


def _uploaded(trial: Trial, paths: Sequence[str], seconds: float) -> tuple[list[str], float]:
    """The local shards put under the scratch prefix in the store (each noted for removal before it
    is written): their URLs, and the time packing and putting them took."""
    t0 = time.perf_counter()
    urls = []
    for p in paths:
        url = f"{trial.store_scratch}{Path(p).name}"
        trial.uploaded.append(url)
        objects.put_file(p, url)
        urls.append(url)
    trial.progress(
        f"shards: {len(urls)} written to {trial.store_scratch} in {time.perf_counter() - t0:.1f} s"
    )
    return urls, seconds + time.perf_counter() - t0


def control(trial: Trial) -> AlternativeResult | None:
    """The control of every copy-based alternative: the same loose files, copied to the scratch
    folder and read there in the same cache regime. Against it, a copy's gain is the fix's own; the
    control against the baseline is the move to the scratch storage. Not needed where the copies
    sit on the data's own storage or everything reads through an emulated device."""
    if trial.emulated is not None or filesystem_of(trial.scratch).mountpoint == trial.sample.fs.mountpoint:
        return None
    loose = trial.scratch / "loose"
    loose.mkdir()
    copies = [copy_to(p, loose / f"{i:06d}{Path(p).suffix}") for i, p in enumerate(trial.sample.images.paths)]
    trial.scratch_bytes += trial.sample.info.listed_bytes
    copy = _copy_dataset("loose-on-scratch", copies, trial.sample.images.labels, trial.sample)
    trial.loose = copy
    return _measured(trial, "loose-on-scratch", copy, trial.plan(copy))


def more_workers(trial: Trial) -> AlternativeResult:
    """Twice the loader's workers (at least 2) on data read by requests: twice the GETs in flight,
    each worker with its own client — the fix for a store whose latency, not its bandwidth, limits."""
    if not trial.sample.fs.object_store:
        return _not("more-workers", "not-requests")
    if trial.emulated is not None:
        return _not("more-workers", "emulated")
    n = max(2, 2 * trial.workers)
    plan = trial.plan(trial.sample, setting=LoaderSetting.multiprocess(n))
    return _measured(trial, "more-workers", trial.sample, plan, figures={"workers": float(n)})


def fetch_threads(trial: Trial) -> AlternativeResult:
    """Each worker's batch read by ``FETCH_THREADS`` threads (more requests in flight than the
    workers make, without more processes), on loose objects read by requests."""
    name = f"threads-per-worker-{FETCH_THREADS}"
    if not trial.sample.fs.object_store:
        return _not(name, "not-requests")
    if trial.sharded:
        return _not(name, "sharded")
    if trial.emulated is not None:
        return _not(name, "emulated")
    return _measured(trial, name, trial.sample, trial.plan(trial.sample, fetch_threads=FETCH_THREADS))


def prefetch(trial: Trial, factor: int) -> AlternativeResult:
    """prefetch_factor against DataLoader's default of 2."""
    if not trial.workers:
        return _not(f"prefetch-{factor}", "needs-workers")
    plan = trial.plan(trial.sample, prefetch_factor=factor)
    return _measured(trial, f"prefetch-{factor}", trial.sample, plan)


def in_order(trial: Trial) -> AlternativeResult:
    """``in_order=False``: batches handed over as the workers make them, so that a batch held up by
    a slow sample holds back none of the others (with one worker the order is the same)."""
    if trial.workers < 2:
        return _not("in_order", "needs-two-workers")
    return _measured(trial, "in_order", trial.sample, trial.plan(trial.sample, in_order=False))


def pin_memory(trial: Trial) -> AlternativeResult:
    if trial.session.device.type != "cuda":
        return _not("pin_memory", "needs-cuda")
    return _measured(trial, "pin_memory", trial.sample, trial.plan(trial.sample, pin_memory=True))


def _first_batch_s(loader: torch.utils.data.DataLoader, passes: int) -> list[float]:
    """Seconds from each pass's iter() to its first batch (the pass is then read to its end)."""
    out = []
    for _ in range(passes):
        t0 = time.perf_counter()
        it = start_loader(loader)
        next(it)
        out.append(time.perf_counter() - t0)
        for _rest in it:
            pass
    return out


def _passes(trial: Trial, persistent: bool) -> torch.utils.data.DataLoader:
    """A loader over the sample whose passes hold two batches a worker: its files, or its shards
    streamed as the cells stream them (each pass opens its shards again, kept workers or not)."""
    per_worker = trial.run.batch_size * 2
    if trial.sharded:
        plan = trial.plan(trial.sample, sample=None)
        as_is = CacheInfo("as-is", 0.0, True, "", "the page cache as it is")
        return shard_batches(
            plan,
            trial.sample.images.paths,
            None,
            as_is,
            samples_per_pass=per_worker,
            persistent_workers=persistent,
        )
    s = trial.sample.images
    return make_loader(
        s.paths,
        s.labels,
        setting=trial.setting,
        crop_px=trial.config.crop_px,
        batch_size=trial.run.batch_size,
        num_samples=per_worker * max(1, trial.workers),
        seed=trial.config.seed,
        persistent_workers=persistent,
        start_method=trial.config.start_method,
    )


def persistent_workers(trial: Trial) -> AlternativeResult:
    """Worker start-up at each epoch's start: fresh workers against persistent ones."""
    if not trial.workers:
        return _not("persistent_workers", "needs-workers")
    figures = {}
    for persistent in (False, True):
        # the first pass starts the workers either way; later passes show the difference
        later = _first_batch_s(_passes(trial, persistent), 4)[1:]
        figures["startup_persistent_s" if persistent else "startup_fresh_s"] = statistics.median(later)
    trial.progress(
        f"persistent_workers: first batch of an epoch after {figures['startup_persistent_s']:.3f} s "
        f"(fresh workers: {figures['startup_fresh_s']:.3f} s)"
    )
    return AlternativeResult(
        "persistent_workers", True, "", None, "data", trial.sample.fs.fs_type, figures=figures
    )


def cache(trial: Trial, dataset_bytes: int) -> AlternativeResult:
    """The share of the dataset the page cache could hold, warm; the rest read cold — where the
    filesystem keeps read pages at all (sshfs drops them at every open: then nothing can be warm)."""
    if trial.emulated is not None:
        return _not("cache", "emulated")
    if trial.sample.fs.object_store:  # no page cache holds an object; a local copy is the control
        return _not("cache", "object-store")
    paths = trial.sample.images.paths
    if keeps_pages(paths, trial.sample.fs) is False:
        return _not("cache", f"pages-not-kept:{trial.sample.fs.fs_type}")
    share = min(1.0, RAM_FOR_CACHE * memory_for_cache()[0] / max(1, dataset_bytes))
    warm = frozenset(paths[: round(share * len(paths))])
    plan = trial.plan(trial.sample, keep_warm=warm)
    return _measured(trial, "cache", trial.sample, plan, figures={"warm_share": share})


def data_storage(trial: Trial) -> StorageCeiling | None:
    """The data's own storage read alone, cold, at the loader's concurrency: what a copy's gain
    there is estimated against when the copies sit on other storage."""
    if trial.emulated is not None:
        return None
    paths = list(trial.sample.images.paths)
    trial.progress("the data's own storage, read alone (cold)…")
    if trial.sample.fs.object_store:
        return store_ceilings(trial.sample, [max(1, trial.workers)], seed=0, progress=trial.progress)[0]
    return probe_storage(
        paths, max(1, trial.workers), trial.sample.fs, root=trial.sample.root, found=trial.sample.evicted
    )


def run_whatif(config: WhatifConfig, session: Session, dataset: Dataset, progress: Progress) -> WhatifResult:
    """The baseline and every alternative that applies, on a sample; the scratch folder removed after."""
    since = time.perf_counter()
    sample = pick_sample(dataset, config.sample_images, config.seed)
    if not dataset.fs.object_store:  # a store's or a server's sample is described from its listing
        sample = replace(
            sample,
            info=describe(sample.images, dataset.label, generated=dataset.info.generated, seed=config.seed),
        )
    store_scratch = config.scratch_dir if objects.is_store_url(config.scratch_dir) else None
    scratch_base = Path(
        tempfile.gettempdir() if store_scratch or not config.scratch_dir else config.scratch_dir
    )
    progress(
        f"scratch: up to {3 * sample.info.listed_bytes / 1e6:,.0f} MB of copies and shards of a {sample.info.listed_files}-file "
        f"sample in {scratch_base} (removed afterwards)"
    )
    scratch = Path(tempfile.mkdtemp(prefix="ioprof-whatif-", dir=scratch_base))
    uploaded: list[str] = []  # what ioprof wrote to the store's scratch prefix: removed whatever happens
    try:
        trial = Trial(config, session, sample, scratch, progress)
        trial.uploaded = uploaded
        if store_scratch:
            trial.store_scratch = f"{store_scratch.rstrip('/')}/{scratch.name}/"
        compute = compute_ceiling(
            session, trial.step, config.compute, model=config.model, crop_px=config.crop_px, progress=progress
        )
        alts = _all(trial, dataset)
        storage = data_storage(trial)
        back = put_back(sample.evicted, since, progress)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if uploaded:
            objects.delete(uploaded)
            progress(f"shards: {len(uploaded)} removed from the store's scratch prefix")
    return WhatifResult(
        schema_version=SCHEMA_VERSION,
        kind="whatif",
        run=session.run_info(read_back=back),
        machine=session.machine,
        config=to_jsonable(asdict(config)),
        dataset=dataset.info,
        sample_files=sample.info.listed_files,
        sample_bytes=sample.info.listed_bytes,
        compute=compute,
        setting=trial.setting.label,
        scratch=str(scratch_base),
        scratch_fs=filesystem_of(scratch_base).fs_type,
        scratch_bytes=trial.scratch_bytes,
        alternatives=tuple(alts),
        data_storage=storage,
        scratch_store=trial.store_scratch,
    )


def _all(trial: Trial, dataset: Dataset) -> list[AlternativeResult]:
    """Your pipeline, then each alternative ``--only`` asks for (all, without it), in
    ``WHATIF_ALTERNATIVES``'s order; the copies' control runs wherever a copy does."""
    steps: dict[str, Callable[[], AlternativeResult | None]] = {
        "threads": lambda: threads(trial),
        "decode_jpeg": lambda: decode_jpeg(trial),
        "gpu_decode": lambda: gpu_decode(trial),
        "loose-on-scratch": lambda: control(trial),
        **{f"resized-{n}": partial(resized, trial, n) for n in RESIZE_SHORT_SIDES},
        "shards": lambda: shards(trial),
        "more-workers": lambda: more_workers(trial),
        f"threads-per-worker-{FETCH_THREADS}": lambda: fetch_threads(trial),
        **{f"prefetch-{p}": partial(prefetch, trial, p) for p in PREFETCH_FACTORS},
        "in_order": lambda: in_order(trial),
        "persistent_workers": lambda: persistent_workers(trial),
        "pin_memory": lambda: pin_memory(trial),
        "cache": lambda: cache(trial, dataset.info.listed_bytes),
    }
    only = trial.config.only
    copies = any(whatif_wants(only, n) for n in (*(f"resized-{n}" for n in RESIZE_SHORT_SIDES), "shards"))
    out: list[AlternativeResult] = [baseline(trial)]
    since = 0  # alternatives measured since the user's pipeline last was
    for name, step in steps.items():
        if whatif_wants(only, name) or (name == "loose-on-scratch" and copies):
            got = step()
            out.extend([got] if got is not None else [])
            since += got is not None and got.cell is not None
        if since == AGAIN_EVERY or (since and name == next(reversed(steps))):
            # the user's pipeline again, and last: how this machine's pace moves over the run
            runs = sum(is_current(a.name) for a in out)
            out.append(_measured(trial, again(runs + 1), trial.sample, trial.plan(trial.sample)))
            since = 0
    return out
