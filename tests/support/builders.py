"""Hand-built results for tests of the pure parts (analysis, rendering)."""

from __future__ import annotations

from dataclasses import replace

from ioprof.core.counts import CacheInfo, Fetched, IoCounts
from ioprof.core.gpu import CudaStepTimes, GpuTelemetry
from ioprof.core.results import (
    SCHEMA_VERSION,
    CellResult,
    ComputeCeiling,
    DatasetCeilings,
    DatasetInfo,
    DecodeCeiling,
    MachineInfo,
    RunInfo,
    StorageCeiling,
    SweepResult,
)

COLD = CacheInfo("cold", 0.0, True, "cachestat", "", resident_after=0.0, evict_after_read=True)
WARM = CacheInfo("warm", 1.0, True, "cachestat", "")
NO_GPU = GpuTelemetry(available=False, reason="the compute device is the CPU; there is no GPU to sample")


def cell(
    loader: str = "multiprocess",
    workers: int = 4,
    wait: float = 0.0,
    step: float = 0.1,
    steps: int = 10,
    batch: int = 8,
    dataset: str = "500x375",
    read_bytes: int = 1_000_000,
    read_chars: int = 1_000_000,
    fetched: int | None = None,
    method: str = "block-io",
    jitter: float = 0.0,
) -> CellResult:
    """A cell whose every step waits ``wait`` s for data and computes ``step`` s (- ``jitter``, 0,
    + ``jitter`` s of wait in turn, for a spread); its batches read ``read_chars`` bytes, ``fetched`` of which
    (default: ``read_bytes``) were fetched from storage."""
    waits = tuple(max(0.0, wait + jitter * (i % 3 - 1)) for i in range(steps))
    elapsed = sum(waits) + step * steps
    return CellResult(
        dataset=dataset,
        loader=loader,
        workers=0 if loader == "serial" else workers,
        batch_size=batch,
        warmup_steps=1,
        steps=steps,
        images=batch * steps,
        elapsed_s=elapsed,
        img_per_s=batch * steps / elapsed,
        wait_s=waits,
        step_s=(step,) * steps,
        data_wait_share=sum(waits) / elapsed,
        startup_s=0.25,
        io=IoCounts(read_bytes, read_chars, 1 if loader == "serial" else workers, elapsed),
        cache=COLD,
        gpu=NO_GPU,
        stopped_by="steps",
        images_per_step=(batch,) * steps,
        bytes_per_step=(read_chars // steps,) * steps,
        fetched=Fetched(read_bytes if fetched is None else fetched, method),
    )


def drained_cell(ahead: int = 20, steps: int = 40, dataset: str = "500x375") -> CellResult:
    """4 workers that make 100 img/s (batches of 8, each worker a 0.32 s cycle) for a 0.05 s step:
    the loop's first ``ahead`` steps take batches they read ahead before the window (no wait), the
    rest wait 0.03 s. The loop's own figure is above what they made in it (drained, ``rates``)."""
    waits = tuple(0.0 if i < ahead else 0.03 for i in range(steps))
    elapsed = sum(waits) + 0.05 * steps
    made = int(elapsed * 100 / 8)  # the batches the workers completed in the window
    cycles = [0.32 * (1 + 0.03 * ((k % 3) - 1)) for k in range(made - 4)]
    c = cell(workers=4, step=0.05, steps=steps, dataset=dataset)
    return replace(
        c,
        wait_s=waits,
        elapsed_s=elapsed,
        img_per_s=c.images / elapsed,
        data_wait_share=sum(waits) / elapsed,
        produced=((0.0, 0.3, 8),) * 4 + tuple((x, 0.3, 8) for x in cycles),
    )


def storage(
    concurrency: int, img_per_s: float, mean_bytes: float = 100_000.0, files: int = 100
) -> StorageCeiling:
    """A storage ceiling whose files completed at a steady ``img_per_s``."""
    done = tuple((i + 1) / img_per_s for i in range(files))
    return StorageCeiling(
        concurrency=concurrency,
        files=files,
        bytes=int(files * mean_bytes),
        elapsed_s=files / img_per_s,
        read_mb_per_s=img_per_s * mean_bytes / 1e6,
        files_per_s=img_per_s,
        latency_s=(0.001,) * 3,
        latency_p50_s=0.001,
        latency_p99_s=0.002,
        img_per_s=img_per_s,
        storage_read_bytes=int(files * mean_bytes),
        cache=COLD,
        fetched=Fetched(int(files * mean_bytes), "block-io"),
        completed_s=done,
        completed_bytes=(int(mean_bytes),) * files,
        stopped_by="files",
    )


def decode(loader: str, workers: int, img_per_s: float, batches: int = 40, batch: int = 8) -> DecodeCeiling:
    """A decode ceiling whose batches arrived at a steady ``img_per_s``."""
    span = batch / img_per_s
    memory = CacheInfo("memory", 1.0, True, "in-process", "")
    return DecodeCeiling(
        loader,
        workers,
        img_per_s,
        batch * batches,
        span * batches,
        memory,
        batch_images=(batch,) * batches,
        batch_s=(span,) * batches,
        sample_files=100,
        sample_bytes=10**7,
        stopped_by="interval",
    )


def compute(img_per_s: float, simulated: bool = True) -> ComputeCeiling:
    return ComputeCeiling(
        img_per_s=img_per_s,
        simulated=simulated,
        device="cpu",
        model="simulated" if simulated else "resnet50",
        batch_size=8,
        step_s=(8 / img_per_s,) * 3,
        label=f"simulated {img_per_s:g} img/s" if simulated else "real resnet50 on cpu",
    )


def dataset_info(label: str = "500x375", mean_bytes: float = 100_000.0, files: int = 200) -> DatasetInfo:
    return DatasetInfo(
        label=label,
        path=f"/data/{label}",
        generated=True,
        files=files,
        total_bytes=int(mean_bytes * files),
        mean_file_bytes=mean_bytes,
        mean_width_px=500.0,
        mean_height_px=375.0,
        bits_per_pixel=mean_bytes * 8 / (500 * 375),
        fs_type="ext4",
        mount_source="/dev/vda",
        classes=4,
        fs_kind="block",
        keeps_pages=True,  # checked, as describe() checks it
    )


MACHINE = MachineInfo(
    cpu_model="Test CPU",
    cpu_cores_logical=8,
    cpu_cores_usable=8,
    ram_bytes=64 * 2**30,
    gpu=None,
    gpu_driver=None,
    gpu_unavailable_reason="the compute device is the CPU; there is no GPU to sample",
    python="3.11.7",
    torch="2.14.1",
    torchvision="0.29.1",
    platform="Linux",
    hostname="test",
)

RUN = RunInfo(
    command="ioprof sweep --workers 1,4",
    started_at="2026-11-22T10:00:00+00:00",
    finished_at="2026-11-22T10:05:00+00:00",
    interrupted=False,
    device="cpu",
    device_reason="--device cpu",
    batch_size=8,
    warmup_steps=1,
    steps=10,
    seconds=60.0,
    start_method="fork",
    ioprof_version="0.1.0",
    min_steps=5,
    target_rel_half_width=0.05,
)


def sweep_result(cells: tuple[CellResult, ...], compute_rate: float = 1000.0) -> SweepResult:
    return SweepResult(
        schema_version=SCHEMA_VERSION,
        run=RUN,
        machine=MACHINE,
        config={
            "cache": "cold",
            "crop_px": 224,
            "pin_memory": False,
            "storage_profile": None,
            "model": "resnet50",
            "stages": ["compute", "transfer", "storage", "decode", "end-to-end"],
        },
        datasets=(dataset_info(),),
        compute=compute(compute_rate),
        transfer=(),
        ceilings=(
            DatasetCeilings(
                "500x375",
                decode=(
                    decode("serial", 0, 300.0),
                    decode("multiprocess", 1, 250.0),
                    decode("multiprocess", 4, 900.0),
                ),
                storage=(storage(1, 2000.0), storage(4, 5000.0)),
            ),
        ),
        cells=cells,
    )


def cuda_result(
    cells: tuple[CellResult, ...], compute_rate: float, gpu: str, precision: str = "bf16"
) -> SweepResult:
    """A sweep as it would come from a real ResNet-50 on a CUDA GPU."""
    base = sweep_result(cells)
    return replace(
        base,
        run=replace(
            base.run, device="cuda:0", device_reason="--device auto: CUDA is available", batch_size=256
        ),
        machine=replace(base.machine, gpu=gpu, gpu_driver="560.35"),
        config={
            **base.config,
            "precision": precision,
            "channels_last": True,
            "pin_memory": True,
            "non_blocking": True,
        },
        compute=replace(
            compute(compute_rate, simulated=False),
            device="cuda:0",
            batch_size=256,
            label=f"real resnet50 on cuda:0, {precision}, channels-last",
        ),
    )


def with_cuda_steps(
    c: CellResult, stall_s: float, overhead_s: float, copy_s: float, compute_s: float
) -> CellResult:
    """``c`` with a GPU timeline of identical steps (idle = stall + host overhead)."""
    n = c.steps
    timeline = CudaStepTimes(
        host_wait_s=(stall_s + 0.01,) * n,
        idle_s=(stall_s + overhead_s,) * n,
        data_stall_s=(stall_s,) * n,
        copy_s=(copy_s,) * n,
        compute_s=(compute_s,) * n,
        elapsed_s=(stall_s + overhead_s + copy_s + compute_s) * n,
    )
    return replace(c, cuda=timeline)
