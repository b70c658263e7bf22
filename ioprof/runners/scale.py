"""``ioprof scale``: N ranks under torchrun, each with its own DataLoader, DistributedSampler,
workers and (simulated or real) DDP step, all reading one storage — cold and warm.

Config, session and dataset in, result out. For each rank count the storage is first read alone
by as many readers as the ranks' loaders will run together (what it can give them), then the
ranks run (``ioprof.runners.rank``) and rank 0 gathers every rank's record. A rank count whose
ranks do not finish is kept as failed, with the first failure's reason, and the run goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ioprof.core.config import RunLength, ScaleConfig, run_length_for
from ioprof.core.counts import ReadBack
from ioprof.core.resultfile import from_jsonable, to_jsonable
from ioprof.core.results import SCHEMA_VERSION, CellResult, StorageCeiling
from ioprof.core.results_scale import RankCountResult, RankResult, ScaleResult
from ioprof.datasets.dataset import Dataset
from ioprof.host.pagecache import remember
from ioprof.measure.ceilings import STORAGE_PROBE_MAX_FILES, first_line
from ioprof.measure.session import Progress, Session, put_back
from ioprof.measure.storage import StorageLost, probe_storage
from ioprof.runners.torchrun import Launched, launch

if TYPE_CHECKING:
    import torch

# The storage read alone before each rank count: at most this long (it stops earlier once its
# bandwidth's interval is within ±5 %).
SCALE_STORAGE_PROBE_S = 10.0
# Under simulated compute each step ends with a one-element all-reduce: it keeps the ranks in
# lockstep as DDP does (a straggler holds every rank back). The gradient exchange itself runs on the
# GPUs' interconnect, not on the host's cores, so it is not emulated: 100 MB of ResNet-50 gradients
# reduced over gloo would take the very CPU time the loaders need.
SIM_ALLREDUCE_FLOATS = 1
LOG_DIR = "logs"


def rank_config(
    config: ScaleConfig, session: Session, dataset: Dataset, ranks: int, regime: str, backend: str
) -> dict[str, Any]:
    run = session.run
    cores = session.machine.cpu_cores_usable
    return {
        "job": "scale",
        "data": dataset.root,
        "backend": backend,
        "regime": regime,
        "crop_px": config.crop_px,
        "seed": config.seed,
        "workers": config.workers,
        "batch_size": run.batch_size,
        "compute": to_jsonable(config.compute),
        "allreduce_floats": SIM_ALLREDUCE_FLOATS,
        "model": config.model,
        "warmup_steps": run.warmup_steps,
        "steps": config.steps,
        "start_method": config.start_method,
        # real compute on the CPU: the cores shared out, as torchrun's users are told to do
        "threads_per_rank": max(1, cores // ranks)
        if config.compute.kind == "real" and backend == "gloo"
        else None,
        "collective_timeout_s": config.rank_timeout_s,
    }


def _storage(
    dataset: Dataset, readers: int, seed: int, progress: Progress
) -> tuple[StorageCeiling | None, str]:
    """The storage read alone, cold, by ``readers`` readers (or why it could not be)."""
    if dataset.fs.kind == "ram":
        return None, f"{dataset.fs.fs_type} holds the files in RAM: there is no storage below it"
    try:
        s = probe_storage(
            dataset.images.paths,
            readers,
            dataset.fs,
            max_files=STORAGE_PROBE_MAX_FILES,
            max_seconds=SCALE_STORAGE_PROBE_S,
            seed=seed,
            root=dataset.root,
        )
    except StorageLost:
        raise
    except OSError as e:
        return None, first_line(e)
    progress.measured(s, dataset=dataset.label)
    return s, ""


def run_scale(
    config: ScaleConfig,
    session: Session,
    dataset: Dataset,
    out: Path,
    progress: Progress,
    *,
    backend: str,
    gpus: int,
    keep: Callable[[ScaleResult], None] = lambda r: None,
    start: Callable[[int, dict[str, Any], str], Launched] | None = None,
) -> ScaleResult:
    """Every rank count in every regime; ``keep`` is handed the result after each (to save it).

    ``start(ranks, rank_config, name)`` runs one count's ranks; by default torchrun on this host.
    """
    counts: list[RankCountResult] = []
    if start is None:
        logs = out / LOG_DIR
        logs.mkdir(parents=True, exist_ok=True)

        def start(n: int, cfg: dict[str, Any], name: str) -> Launched:
            return launch(n, cfg, logs, name, config.rank_timeout_s)

    def result(back: ReadBack | None = None) -> ScaleResult:
        return ScaleResult(
            schema_version=SCHEMA_VERSION,
            kind="scale",
            run=session.run_info(read_back=back),
            machine=session.machine,
            config=to_jsonable(config),
            dataset=dataset.info,
            compute=config.compute.label,
            sim_img_per_s=config.compute.sim_img_per_s,
            backend=backend,
            workers_per_rank=config.workers,
            gpus=gpus,
            counts=tuple(counts),
        )

    since = time.perf_counter()
    if "cold" in config.cache:  # the ranks evict in their own processes: what is cached now, read back after
        remember(dataset.images.paths, dataset.evicted)
    for n in config.ranks:
        storage, storage_error = None, ""
        if "cold" in config.cache:
            progress(f"{n} rank(s): the storage alone with {n * max(1, config.workers)} reader(s)…")
            storage, storage_error = _storage(dataset, n * max(1, config.workers), config.seed, progress)
        for regime in config.cache:
            progress(f"{n} rank(s), {regime}: running…")
            launched = start(
                n, rank_config(config, session, dataset, n, regime, backend), f"ranks-{n}-{regime}"
            )
            per_rank = tuple(
                RankResult(
                    g["rank"],
                    g["host"],
                    from_jsonable(CellResult, g["cell"]),
                    g["cpu_s"],
                    g["wall_s"],
                    g.get("host_cores", 0),
                    g.get("compute_s_per_step", 0.0),
                    tuple(g.get("made_s", ())),
                )
                for g in launched.gathered
            )
            count = RankCountResult(
                ranks=n,
                regime=regime,
                status="ok" if launched.ok else "failed",
                reason=launched.reason,
                launch_s=launched.seconds,
                per_rank=per_rank,
                storage=storage if regime == "cold" else None,
                storage_error=storage_error if regime == "cold" else "",
            )
            counts.append(count)
            progress.measured(count)
            keep(result())
    return result(put_back(dataset.evicted, since, progress))


# -- under torchrun: every rank runs `ioprof scale`; rank 0 measures the storage and writes the report --


class Silent:
    """Progress of the ranks other than 0: rank 0 speaks for the job."""

    def __call__(self, text: str) -> None:
        return None

    def measured(self, result: object, *, dataset: str = "", position: str = "", took_s: float = 0.0) -> None:
        return None


def in_this_job() -> Callable[[int, dict[str, Any], str], Launched]:
    """Rank 0's ``start``: after its storage probe, the ranks of this very job run the count."""
    import time

    import torch.distributed as dist

    from ioprof.runners import rank as rankworker

    group: list[Any] = []

    def start(n: int, cfg: dict[str, Any], name: str) -> Launched:
        if not group:
            group.append(rankworker.init_group(cfg))
        dist.barrier(group=group[0])  # the others wait here while rank 0 read the storage alone
        t0 = time.perf_counter()
        gathered = rankworker.run_job(cfg, group[0]) or []
        return Launched(True, "", sorted(gathered, key=lambda r: r["rank"]), time.perf_counter() - t0, None)

    return start


def open_scale_session(
    config: ScaleConfig, device: torch.device, reason: str, command_line: str
) -> tuple[RunLength, Session]:
    """Every rank's run length (the same on each, as DDP needs) and its session."""
    from ioprof.measure.session import open_session

    run = run_length_for(
        device.type,
        config.compute,
        batch_size=config.batch_size,
        warmup_steps=config.warmup_steps,
        steps=config.steps,
    )
    return run, open_session(command_line, device, reason, run, config.start_method)


def follow(
    config: ScaleConfig, dataset: Dataset, backend: str, device: torch.device, reason: str, command_line: str
) -> int:
    """A rank other than 0: run each regime's count with rank 0, which keeps the results."""
    import torch.distributed as dist

    from ioprof.runners import rank as rankworker

    _, session = open_scale_session(config, device, reason, command_line)
    group = None
    for regime in config.cache:
        cfg = rank_config(config, session, dataset, config.ranks[0], regime, backend)
        if group is None:
            group = rankworker.init_group(cfg)
        dist.barrier(group=group)
        rankworker.run_job(cfg, group)
    return 0
