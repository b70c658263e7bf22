"""A user's observed run turned into a result: ``build_result`` takes the observations of every
process (each rank under torch.distributed) and makes a ``SweepResult`` of kind ``run`` — one
cell per DataLoader window, its own step rate (on CUDA, on the GPU's clock) as its compute
ceiling, the probes (``probe``) as its ceilings — so the verdict, advice and report are the
sweep's. Host-wide byte counts are shared among a host's ranks by their own reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from ioprof.core.config import LoaderSetting
from ioprof.core.counts import (
    MACHINE_WIDE_FETCH_METHODS,
    NO_SOURCE_FOUND,
    UNKNOWN_FETCH,
    CacheInfo,
    CrossCheck,
    Fetched,
    IoCounts,
    ReadBack,
)
from ioprof.core.gpu import GpuTelemetry
from ioprof.core.inside import LoaderInside
from ioprof.core.percent import pct
from ioprof.core.results import (
    SCHEMA_VERSION,
    CellResult,
    ComputeCeiling,
    DatasetCeilings,
    DatasetInfo,
    DecodeCeiling,
    RunInfo,
    StorageCeiling,
    SweepResult,
    WaitSplit,
)
from ioprof.core.results_run import BeforeWindow, ObservedLoader, PassStart, ScriptInfo
from ioprof.core.stats import data_wait_share
from ioprof.core.version import __version__
from ioprof.observe.observation import LoaderObservation, MountFields, Observation

# -- observations → result ---------------------------------------------------------------------


def _key(obs: Observation, loader: LoaderObservation) -> str:
    base = f"loader {loader['index']}"
    return f"rank {obs['rank']} · {base}" if obs.get("world_size", 1) > 1 else base


def _fetched(loader: LoaderObservation, io: IoCounts) -> Fetched | None:
    """Bytes fetched over the spans the counters covered, by the source's method: the mount's
    (block I/O, NFS client statistics, the FUSE daemon), or, for a source read through pipes and
    TLS sockets (tar shards over HTTP through curl), what the loader's processes were handed."""
    from ioprof.host.fetched import FetchSnapshot, decide
    from ioprof.host.pagecache import filesystem_of

    source = loader.get("source") or {}
    mount = loader.get("mount") or {}
    if source.get("counted_by") in ("network", "own-rchar") and io.window_s > 0:
        where = source.get("where", "its source")
        own = (
            CrossCheck(
                "own-rchar",
                f"what the loader's processes read, {where} through pipes and TLS sockets and any local file "
                "alike, a cache of their own included (rchar of their own threads: each byte once, no child's)",
                io.own_read_chars,
            )
            if io.own_read_chars is not None
            else None
        )
        if mount.get("net_bytes") is not None:
            return _on_interface(mount, f"{where} is reached by", (own,) if own else ())
        if own is not None:
            return Fetched(own.bytes, own.method, own.source)
    root = loader["settings"]["dataset_root"]
    if not root and loader.get("peers") and mount.get("net_bytes") is not None:
        # no file, but its workers' connections: what the interface they arrive on received
        return _on_interface(mount, f"its workers' connections to {', '.join(loader['peers'])} arrive on")
    if not root and loader.get("peers"):
        return Fetched(
            None,
            "unknown",
            f"the interface its workers' connections to {', '.join(loader['peers'])} arrive on was not read at "
            "both ends of these seconds",
        )
    if not root:
        # no filesystem to count on: never a counter of another one (block I/O would read 0.00)
        return Fetched(None, "unknown", NO_SOURCE_FOUND)
    if not mount.get("spans"):
        return None
    pid, name = mount.get("daemon_pid"), mount.get("daemon_name", "")
    nfs, daemon = mount.get("nfs_bytes"), mount.get("daemon_bytes")
    before = FetchSnapshot(0 if nfs is not None else None, pid, name, 0 if daemon is not None else None)
    after = FetchSnapshot(nfs, pid, name, daemon)
    cache = CacheInfo("as-is", 0.0, True, "", "the page cache as your script left it")
    return decide(
        filesystem_of(root),
        cache,
        read_bytes=io.read_bytes,
        requested_bytes=io.read_chars,
        before=before,
        after=after,
    )


def _on_interface(mount: MountFields, reached: str, checks: tuple[CrossCheck, ...] = ()) -> Fetched:
    """What the interface a source's bytes arrive on received, said to be the host's traffic on it."""
    return Fetched(
        mount["net_bytes"],
        "interface-rx",
        f"bytes received on {mount.get('iface')}, the interface {reached} (the whole host's traffic on it)",
        checks,
    )


def _wait_split(loader: LoaderObservation, waits: list[float]) -> WaitSplit | None:
    """The units whose producer was known, with what it did while the loop waited (host clock)."""
    splits = loader.get("splits") or []
    host = loader.get("host_waits") or waits
    known = [(w, sp) for w, sp in zip(host, splits, strict=False) if sp is not None]
    if not known:
        return None
    return WaitSplit(
        wait_s=tuple(w for w, _ in known),
        cpu_s=tuple(sp[0] for _, sp in known),
        runq_s=tuple(sp[1] for _, sp in known),
        others_cpu_s=tuple(sp[2] for _, sp in known),
        producer=loader.get("producer", "worker"),
        units=len(host),
        receive_s=tuple(sp[3] if len(sp) > 3 else 0.0 for _, sp in known),
        receive_runq_s=tuple(sp[4] if len(sp) > 4 else 0.0 for _, sp in known),
    )


def _cell(key: str, loader: LoaderObservation, config: Any) -> CellResult:
    from ioprof.core.resultfile import from_jsonable

    s = loader["settings"]
    waits, steps, images = loader["waits"], loader["steps"], loader["images"]
    elapsed = sum(waits) + sum(steps)  # pauses left out (evaluation, checkpoints) are not in it
    io = from_jsonable(IoCounts, {"own_read_chars": None, **loader["io"]})
    setting = LoaderSetting.multiprocess(s["num_workers"]) if s["num_workers"] else LoaderSetting.serial()
    gpu = from_jsonable(GpuTelemetry, loader["gpu"]) if loader.get("gpu") else GpuTelemetry(False, "")
    cell = CellResult(
        dataset=key,
        loader=setting.kind,
        workers=setting.workers,
        batch_size=s["batch_size"] or (images[0] if images else 0),
        warmup_steps=config.warmup_steps + setting.workers,
        steps=len(steps),
        images=sum(images),
        elapsed_s=elapsed,
        img_per_s=sum(images) / elapsed if elapsed > 0 else 0.0,
        wait_s=tuple(waits),
        step_s=tuple(steps),
        data_wait_share=data_wait_share(waits, steps),
        startup_s=0.0,
        io=io,
        cache=CacheInfo("as-is", 0.0, True, "", "the page cache as your script left it"),
        gpu=gpu,
        stopped_by=_stopped_by(loader["window"], len(steps), config),
        images_per_step=tuple(images),
        start_method=s["start_method"] if setting.workers else "",
        bytes_window_s=io.window_s,
        produced=tuple((float(c), float(b), int(n)) for c, b, n in loader.get("produced") or ()),
    )
    # each segment may open with the queue's batches read already (read() counted before it)
    ahead = (s.get("prefetch_factor") or 0) * setting.workers * cell.batch_size
    cell = replace(cell, read_ahead_samples=int(loader.get("segments", 0)) * ahead)
    if loader.get("inside"):
        cell = replace(cell, inside=from_jsonable(LoaderInside, loader["inside"]))
    cell = replace(cell, wait_split=_wait_split(loader, waits))
    fetched = _fetched(loader, io)
    if fetched is None:
        return cell
    return replace(cell, fetched=fetched, fetched_segments=_fetched_segments(loader, io, fetched))


def _stopped_by(window: str, steps: int, config: Any) -> str:
    """What ended a window: its steps, its seconds (``--seconds``: the steps it had then), or the
    script, before either."""
    if window != "complete":
        return "script"
    wanted = getattr(config, "steps", None)
    return "steps" if wanted is None or steps >= wanted else "seconds"


def _fetched_segments(
    loader: LoaderObservation, io: IoCounts, whole: Fetched
) -> tuple[tuple[float, int], ...]:
    """The pieces between the counters' readings (every half second or so within a span), each
    counted as the whole is: (seconds, bytes fetched). None where one cannot be, or where they do
    not add up to the whole (a process gone between two readings)."""
    from ioprof.host.fetched import adding_up

    pieces = loader.get("pieces") or []
    if whole.bytes is None or not pieces:
        return ()

    def counted(p: dict[str, Any]) -> Fetched | None:
        mount: MountFields = {
            **loader["mount"],
            "nfs_bytes": p["nfs_bytes"],
            "daemon_bytes": p["daemon_bytes"],
            "net_bytes": p["net_bytes"],
        }
        counts = IoCounts(p["read_bytes"], p["read_chars"], p["processes"], p["seconds"], p["own_chars"])
        return _fetched({**loader, "mount": mount}, counts)

    return adding_up(whole, ((p["seconds"], counted(p)) for p in pieces), io.window_s)


def _observed(key: str, obs: Observation, loader: LoaderObservation, config: Any) -> ObservedLoader:
    s = loader["settings"]
    return ObservedLoader(
        key=key,
        rank=obs["rank"],
        role=loader["role"],
        dataset_class=s["dataset_class"],
        dataset_len=s["dataset_len"],
        dataset_root=s["dataset_root"],
        num_workers=s["num_workers"],
        batch_size=s["batch_size"],
        pin_memory=s["pin_memory"],
        prefetch_factor=s["prefetch_factor"],
        persistent_workers=s["persistent_workers"],
        drop_last=s["drop_last"],
        sampler=s["sampler"],
        start_method=s["start_method"],
        batches=loader["batches"],
        passes=loader["passes"],
        window=loader["window"],
        gaps_left_out=loader["gaps_left_out"],
        files_known=loader["files_known"],
        optimizer_steps_between_batches=loader.get("optimizer_steps_between_batches", 0),
        clock=loader.get("clock", "host"),
        off_thread=loader.get("off_thread", ""),
        host=obs.get("host", ""),
        measured_batches_needed=config.warmup_steps + s["num_workers"] + 2,
        own_s_per_batch=loader.get("own_s_per_batch", 0.0),
        own_once_s=loader.get("own_once_s", 0.0),
        before=_before(loader),
        batches_per_pass=s.get("batches_per_pass"),
        pass_starts=_pass_starts(loader),
        iterable=bool(s.get("iterable")),
        shards=s.get("shards"),
        workers_out=loader.get("workers_out"),
        root_seen_in_passing=bool(loader.get("opened")) and loader.get("opened_held") is False,
        **_sent(obs, loader),
    )


def _sent(obs: Observation, loader: LoaderObservation) -> dict[str, Any]:
    """The probed loader's dataset as handed to each spawned worker (its pickle), where measured."""
    sent = (obs.get("probes") or {}).get("sent") if obs.get("probed_index") == loader["index"] else None
    if not sent or sent.get("bytes") is None:
        return {}
    return {
        "sent_bytes": int(sent["bytes"]),
        "sent_s": float(sent["seconds"]),
        "sent_whole": bool(sent.get("whole", True)),
    }


def _pass_starts(loader: LoaderObservation) -> tuple[PassStart, ...]:
    """Each pass that reached its first batch: its start in ``iter()``, its first batch, its end
    (the call that ran it out), its length."""
    return tuple(
        PassStart(
            startup_s=m.get("startup_s", m["started_s"] - m["iter_s"]),
            first_batch_s=m["first_s"] - m["iter_s"] - m.get("first_own_s", 0.0),
            pass_s=None if m["end_s"] is None else m["end_s"] - m["iter_s"],
            batches=int(m.get("batches", 0)),
            stop_s=float(m.get("stop_s", 0.0)),
            own_s=float(m.get("own_s", 0.0)),
            ran_out=bool(m.get("ran_out", False)),
        )
        for m in loader.get("pass_marks", [])
        if m["first_s"] is not None
    )


def _before(loader: LoaderObservation) -> BeforeWindow | None:
    """The first pass up to the window, its bytes fetched counted as the window's are."""
    b = loader.get("before")
    if not b:
        return None
    io = IoCounts(
        b["io"]["read_bytes"],
        b["io"]["read_chars"],
        b["io"]["processes"],
        b["io"]["window_s"],
        b["io"]["own_read_chars"],
    )
    fetched = _fetched({**loader, "mount": b["mount"]}, io) if b["mount"]["spans"] else None
    cpu_window = b["cpu"]["window_s"]
    making = b.get("producers")
    return BeforeWindow(
        seconds=b["seconds"],
        first_batch_s=b["first_batch_s"],
        batches=b["batches"],
        wait_s=b["wait_s"],
        processes=1 + loader["settings"]["num_workers"],
        cpu_s=b["cpu"]["cpu_s"] if cpu_window > 0 else None,
        cpu_window_s=cpu_window,
        fetched=fetched or UNKNOWN_FETCH,
        producers=making["processes"] if making else 0,
        producers_runnable_s=making["runnable_s"] if making else None,
        producers_window_s=making["window_s"] if making else 0.0,
    )


def _step_ceiling(cell: CellResult, device: str, clock: str) -> ComputeCeiling:
    """The loader's own consumer: the user's step, timed between batches (on CUDA, by events)."""
    total = sum(cell.step_s)
    label = "your training step (the time between batches" + (
        ", on the GPU's clock)" if clock == "gpu-events" else ")"
    )
    return ComputeCeiling(
        img_per_s=cell.images / total if total > 0 else float("inf"),
        simulated=False,
        device=device,
        model="your model",
        batch_size=cell.batch_size,
        step_s=cell.step_s,
        label=label,
    )


def _host_storage(
    observations: Sequence[Observation],
) -> dict[tuple[str, int], tuple[StorageCeiling, ...]]:
    """(host, loader index) → the storage ceiling its local rank 0 measured for all its ranks."""
    from ioprof.core.resultfile import from_jsonable

    out: dict[tuple[str, int], tuple[StorageCeiling, ...]] = {}
    for obs in observations:
        storage = (obs.get("probes") or {}).get("storage") or []
        probed = obs.get("probed_index")
        if storage and probed is not None and obs.get("local_rank", 0) == 0:
            out[(obs.get("host", ""), probed)] = tuple(from_jsonable(StorageCeiling, s) for s in storage)
    return out


def _ceilings(
    key: str,
    obs: Observation,
    loader: LoaderObservation,
    step: ComputeCeiling,
    host_storage: dict[tuple[str, int], tuple[StorageCeiling, ...]],
) -> DatasetCeilings:
    from ioprof.core.resultfile import from_jsonable

    probed = obs.get("probed_index") == loader["index"]
    probes = (obs.get("probes") or {}) if probed else {}
    decode = tuple(from_jsonable(DecodeCeiling, d) for d in probes.get("decode", []))
    storage = host_storage.get((obs.get("host", ""), loader["index"]), ()) if probed else ()
    return DatasetCeilings(key, decode, storage, compute=step)


def _share_host_counters(cells: list[CellResult], hosts: dict[str, tuple[str, int]]) -> list[CellResult]:
    """Machine-wide counters (the FUSE daemon's reads, NFS client statistics) count every rank on
    a host: each rank is given the share of them its own reads make (bytes it read ÷ its host's)."""
    groups: dict[tuple[str, int], list[int]] = {}
    for i, c in enumerate(cells):
        if c.fetched.method in MACHINE_WIDE_FETCH_METHODS and c.fetched.bytes is not None:
            groups.setdefault(hosts[c.dataset], []).append(i)
    out = list(cells)
    for members in groups.values():
        if len(members) < 2:
            continue
        total = sum(cells[i].requested_mb_per_s() for i in members)
        for i in members:
            c = cells[i]
            share = c.requested_mb_per_s() / total if total > 0 else 1.0 / len(members)
            source = f"{c.fetched.source}; counted for the whole host, this rank's share by its own reads ({pct(share, 0)})"
            fetched = Fetched(round((c.fetched.bytes or 0) * share), c.fetched.method, source)
            segments = tuple((s, round(b * share)) for s, b in c.fetched_segments)
            out[i] = replace(c, fetched=fetched, fetched_segments=segments)
    return out


def build_result(
    observations: Sequence[Observation],
    *,
    command: str,
    exit_code: int | None,
    ended: str,
    config: Any,
    started: float,
) -> SweepResult:
    """One result from every process's observations (ranks sorted, loaders in first-use order)."""
    from ioprof.host.machine import machine_info

    ordered = sorted(observations, key=lambda o: o["rank"])
    host_storage = _host_storage(ordered)
    cells: list[CellResult] = []
    loaders, ceilings, datasets = [], [], []
    hosts: dict[str, tuple[str, int]] = {}
    compute: ComputeCeiling | None = None
    device = next((o.get("device", "") for o in ordered if o.get("device")), "") or "unknown"
    for obs in ordered:
        for loader in obs["loaders"]:
            key = _key(obs, loader)
            loaders.append(_observed(key, obs, loader, config))
            if loader["window"] == "none":
                continue
            cell = _cell(key, loader, config)
            cells.append(cell)
            hosts[key] = (obs.get("host", ""), loader["index"])
            probed = obs.get("probed_index") == loader["index"]
            per_sample = (obs.get("probes") or {}).get("bytes_per_sample") if probed else None
            datasets.append(_dataset_info(key, loader, per_sample))
            step = _step_ceiling(cell, device, loader.get("clock", "host"))
            if compute is None and loader["role"] == "training":
                compute = step
            ceilings.append(_ceilings(key, obs, loader, step, host_storage))
    cells = _share_host_counters(cells, hosts)
    return SweepResult(
        schema_version=SCHEMA_VERSION,
        run=_run_info(cells, config, command, started, ended, device),
        # the versions the script ran with (its interpreter may not be this one)
        machine=machine_info(None, None, _gpu_reason(device), _versions(ordered)),
        config={
            "stages": ["end-to-end"],
            "cache": "as-is",
            "warmup_steps": config.warmup_steps,
            "steps": config.steps,
            "seconds": config.seconds,
            "probe": config.probe,
        },
        datasets=tuple(datasets),
        compute=compute,
        transfer=(),
        ceilings=tuple(ceilings),
        cells=tuple(cells),
        kind="run",
        loaders=tuple(loaders),
        script=_script(ordered, command, exit_code, ended, config, ceilings),
    )


def _versions(observations: Sequence[Observation]) -> dict[str, str] | None:
    """Python's, torch's and torchvision's versions in the script's first process that said them."""
    return next((o["versions"] for o in observations if o.get("versions")), None)


def _gpu_reason(device: str) -> str:
    if device.startswith("cuda"):
        return "ioprof run samples the GPU only inside each loader's window, and none had samples"
    return f"your script trained on the {device.upper() if device == 'cpu' else device}, not on a GPU"


def _run_info(
    cells: Sequence[CellResult], config: Any, command: str, started: float, ended: str, device: str
) -> RunInfo:
    return RunInfo(
        command=command,
        started_at=datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        interrupted=ended == "interrupted",
        device=device,
        device_reason="your script's choice",
        batch_size=cells[0].batch_size if cells else 0,
        warmup_steps=config.warmup_steps,
        steps=config.steps,
        seconds=config.seconds,
        start_method=cells[0].start_method if cells else "",
        ioprof_version=__version__,
        min_steps=config.steps,
    )


def _script(
    ordered: Sequence[Observation],
    command: str,
    exit_code: int | None,
    ended: str,
    config: Any,
    ceilings: Sequence[DatasetCeilings],
) -> ScriptInfo:
    notes: list[str] = []
    for obs in ordered:
        probes = obs.get("probes") or {}
        for key in ("decode_note", "storage_note", "error"):
            note = probes.get(key) or ""
            if note and note not in notes and not (key == "storage_note" and obs.get("local_rank", 0)):
                notes.append(note)
    return ScriptInfo(
        command=command,
        exit_code=exit_code,
        ended=ended,
        ranks=max((o.get("world_size", 1) for o in ordered), default=1),
        optimizer_steps=next((o["optimizer_steps"] for o in ordered if o["loaders"]), 0),
        warmup_steps=config.warmup_steps,
        window_steps=config.steps,
        window_seconds=config.seconds,
        stop_after=getattr(config, "stop_after", False),
        probed=any(c.decode or c.storage for c in ceilings),
        probe_pause_s=max((o.get("probe_pause_s", 0.0) for o in ordered), default=0.0),
        probe_notes=tuple(notes),
        probe_refused=next((o["probe_refused"] for o in ordered if o.get("probe_refused")), ""),
        probe_when=next(((o.get("probes") or {}).get("when", "") for o in ordered if o.get("probes")), ""),
        probe_start=next(
            ((o.get("probes") or {}).get("start_note", "") for o in ordered if o.get("probes")), ""
        ),
        probe_fork_server_stopped=any((o.get("probes") or {}).get("fork_server_stopped") for o in ordered),
        probe_read_back=next(
            (ReadBack(**back) for o in ordered if (back := (o.get("probes") or {}).get("read_back"))), None
        ),
        shm_failure=next((o["shm_failure"] for o in ordered if o.get("shm_failure")), ""),
        shm_warnings=tuple(
            dict.fromkeys(
                f"{_key(o, lo)}: {lo['shm_warning']}"
                for o in ordered
                for lo in o["loaders"]
                if lo.get("shm_warning")
            )
        ),
    )


def _dataset_info(key: str, loader: LoaderObservation, per_sample: float | None = None) -> DatasetInfo:
    """What is known of the loader's dataset; what is not is None. ``per_sample``: its bytes per
    sample as the probe's copy in memory showed them (tar shards hold many samples a file)."""
    info = loader.get("dataset_info")
    s = loader["settings"]
    if info:
        out = DatasetInfo(**{**info, "label": key})
        if out.mean_file_bytes is None and per_sample:
            out = replace(out, mean_file_bytes=per_sample)
        return out
    return DatasetInfo(
        label=key,
        path=s["dataset_root"],
        generated=False,
        files=None,
        total_bytes=None,
        mean_file_bytes=per_sample,
        mean_width_px=None,
        mean_height_px=None,
        bits_per_pixel=None,
        fs_type=None,
        mount_source=None,
        classes=None,
        samples=s.get("dataset_len"),
    )
