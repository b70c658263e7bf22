"""The stage ceilings as named steps, shared by ``sweep`` and ``place``: compute (synthetic
batches on the device), storage (raw cold reads at each concurrency) and decode (the loader over
an in-memory sample at each setting). Each reports what it measured through ``progress``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from ioprof.core.config import DECIDED_REL_HALF_WIDTH, TARGET_REL_HALF_WIDTH, ComputeSpec, LoaderSetting
from ioprof.core.errors import IoprofError
from ioprof.core.results import ComputeCeiling, DecodeCeiling, ProbeFailure, StorageCeiling
from ioprof.datasets import objects, shards
from ioprof.datasets.dataset import Dataset
from ioprof.measure.compute import TrainStep, probe_compute
from ioprof.measure.decode import above_for, probe_decode
from ioprof.measure.sample import SAMPLE_MAX_BYTES, MemorySample
from ioprof.measure.session import Progress, Session
from ioprof.measure.shm import ShmTooSmall, shm_failure, shm_note
from ioprof.measure.storage import STORAGE_PROBE_MAX_S, EmulatedStorage, probe_storage
from ioprof.measure.streams import probe_streams

# Storage probe: at most this many files per concurrency level (a shuffled sample of the dataset).
STORAGE_PROBE_MAX_FILES = 2000
# An object store's level reads objects no earlier level read, when at least this many per reader are left.
STORE_MIN_FRESH_PER_READER = 8


def compute_ceiling(
    session: Session,
    step: TrainStep,
    spec: ComputeSpec,
    *,
    model: str,
    crop_px: int,
    progress: Progress,
    pooled_later: bool = False,
) -> ComputeCeiling:
    """The compute ceiling at the run's batch size. ``pooled_later``: the sweep's serial cells
    will add their steps to it (``runners.sweep.over_the_sweep``), so that alone it needs only the
    width that decides an answer (``DECIDED_REL_HALF_WIDTH``), not the figure's own."""
    progress("measuring the compute ceiling (synthetic batches on the device)…")
    ceiling = probe_compute(
        step,
        spec,
        model,
        session.device,
        batch_size=session.run.batch_size,
        crop_px=crop_px,
        warmup_steps=session.run.warmup_steps,
        target=DECIDED_REL_HALF_WIDTH if pooled_later else TARGET_REL_HALF_WIDTH,
    )
    progress.measured(ceiling)
    return ceiling


def storage_ceilings(
    ds: Dataset,
    concurrencies: Sequence[int],
    *,
    emulated: EmulatedStorage | None,
    sample: MemorySample | None,
    seed: int,
    progress: Progress,
    keep: dict[str, bytes] | None = None,
) -> tuple[tuple[StorageCeiling, ...], StorageCeiling | None]:
    """Storage at each concurrency; with emulated storage, through the emulated device over the
    in-memory sample, plus the real device at one reader (to warn when it is slower). Objects in
    a store: ``store_ceilings``. ``keep``: filled with the files (objects) read whole, up to the
    in-memory sample's bytes, so that the sample need not read them again."""
    if ds.fs.object_store:
        return store_ceilings(ds, concurrencies, seed=seed, progress=progress, keep=keep), None
    out = []
    for c in concurrencies:
        if emulated is not None and sample is not None:
            s = probe_storage(
                sample.paths, c, ds.fs, emulated=emulated, blobs=sample.blobs, seed=seed, root=ds.root
            )
        else:
            s = probe_storage(
                ds.images.paths,
                c,
                ds.fs,
                max_files=STORAGE_PROBE_MAX_FILES,
                seed=seed,
                root=ds.root,
                keep=keep,
                keep_bytes=SAMPLE_MAX_BYTES if keep is not None else 0,
                found=ds.evicted,
            )
        out.append(s)
        progress.measured(s, dataset=ds.label)
    real = None
    if emulated is not None:
        real = probe_storage(
            ds.images.paths,
            1,
            ds.fs,
            max_files=STORAGE_PROBE_MAX_FILES,
            seed=seed,
            root=ds.root,
            found=ds.evicted,
        )
        progress.measured(real, dataset=f"{ds.label} (the real device)")
    return tuple(out), real


def store_ceilings(
    ds: Dataset,
    concurrencies: Sequence[int],
    *,
    seed: int,
    progress: Progress,
    keep: dict[str, bytes] | None = None,
) -> tuple[StorageCeiling, ...]:
    """An object store's objects (or tar shards over HTTP(S) or in a store) read as streams (GETs)
    at each concurrency: MB/s, objects/s, first-byte latency; shards' samples/s from the bytes a
    sample takes. A store cannot be made cold, so each level reads objects no earlier level read
    (shuffled); where too few are left, it reads them again and says so."""
    order = list(ds.images.paths)
    random.Random(seed).shuffle(order)
    sharded = ds.images.layout == "shards"
    s3 = objects.is_store_url(order[0])
    where = f"the store at {objects.endpoint()}" if s3 else f"the server at {shards.where(order[0])}"
    out: list[StorageCeiling] = []
    start = 0
    for c in concurrencies:
        fresh = order[start:]
        again = len(fresh) < STORE_MIN_FRESH_PER_READER * c
        before = objects.retries()
        try:
            s = probe_streams(
                order if again else fresh,
                shards.opened if sharded else objects.opened,
                c,
                bytes_per_sample=ds.info.mean_file_bytes if sharded else None,
                where=where,
                max_seconds=STORAGE_PROBE_MAX_S,
                ready=objects.client if s3 else None,
                keep=keep,
                keep_bytes=SAMPLE_MAX_BYTES if keep is not None else 0,
                # a shard is no image: the sample parses its first samples from what was read of it
                keep_prefixes=sharded,
            )
        except OSError as e:  # not one object could be read: the store went away, or refuses
            done = f"; {len(out)} level(s) measured before it" if out else ""
            raise IoprofError(f"{e} (reading at {c} concurrent requests{done})") from None
        s = replace(s, retries=objects.retries() - before)
        if again:
            what = "shards" if sharded else "objects"
            note = f"{s.cache.note}; {what} read again: too few for this level to read new ones, and the server may cache them"
            s = replace(s, cache=replace(s.cache, verified=False, note=note))
        start = 0 if again else start + s.files + c  # those in flight when it stopped, too
        out.append(s)
        progress.measured(s, dataset=ds.label)
    return tuple(out)


def decode_ceilings(
    ds: Dataset,
    sample: MemorySample,
    settings: Sequence[LoaderSetting],
    *,
    crop_px: int,
    batch_size: int,
    seed: int,
    start_method: str | None,
    progress: Progress,
    compute: ComputeCeiling | None = None,
    storage: Sequence[StorageCeiling] = (),
) -> tuple[tuple[DecodeCeiling, ...], tuple[ProbeFailure, ...]]:
    """The decode ceiling of each loader setting, from the in-memory sample (each stops early once
    wholly above twice the ``compute`` ceiling or the ``storage`` ceiling the cells read through at
    its readers, where given: ``decode.above_for``)."""
    out: list[DecodeCeiling] = []
    failed: list[ProbeFailure] = []
    for setting in settings:
        try:
            d = probe_decode(
                sample,
                setting,
                crop_px=crop_px,
                batch_size=batch_size,
                seed=seed,
                start_method=start_method,
                above=above_for(setting, compute, storage),
                per_reader_img_per_s=out[-1].per_reader_img_per_s if out else None,
            )
        except RuntimeError as e:  # a loader worker died: no ceiling for this setting
            if shm_failure(e) and not isinstance(e, ShmTooSmall):
                e = ShmTooSmall(f"a loader worker ran out of shared memory ({shm_note()})")
            failed.append(ProbeFailure(ds.label, "decode", setting.key, first_line(e)))
            progress.measured(failed[-1], dataset=ds.label)
            continue
        out.append(d)
        progress.measured(d, dataset=ds.label)
    return tuple(out), tuple(failed)


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
