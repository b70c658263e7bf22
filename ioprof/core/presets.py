"""Named what-if presets: simulated GPUs and emulated storage, each with its figures' source.

Everything built from these is labelled *simulated* (compute) or *emulated* (storage)
wherever its figures appear.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class GpuPreset:
    """One GPU's ResNet-50 training throughput, for ``--compute sim:NAME``: what ioprof's own step
    measured on the real device where it has been measured (``measured``: its conditions and where
    the figures are kept), else the published figure; the published figure is kept beside it."""

    name: str
    published_img_per_s: float
    precision: str
    published_source: str
    measured_img_per_s: float | None = None
    measured: str = ""

    @property
    def img_per_s(self) -> float:
        return self.published_img_per_s if self.measured_img_per_s is None else self.measured_img_per_s

    @property
    def kind(self) -> Literal["measured", "published"]:
        return "published" if self.measured_img_per_s is None else "measured"

    @property
    def source(self) -> str:
        published = f"{self.published_img_per_s:,.0f} img/s published ({self.published_source})"
        if self.measured_img_per_s is None:
            return published
        return f"{self.measured_img_per_s:,.0f} img/s measured by ioprof's own step ({self.measured}); {published}"


# ioprof's own step on the device: real ResNet-50, bf16 autocast, channels-last, batch 256,
# synthetic batches already on the GPU (``ioprof probe compute --device cuda``)
OWN_STEP = "bf16, channels-last, batch 256, synthetic batches on the device"

# ResNet-50 training, mixed precision, one GPU.
GPU_PRESETS: dict[str, GpuPreset] = {
    p.name: p
    for p in (
        GpuPreset(
            "v100",
            1200.0,
            "mixed",
            "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md (V100 16 GB, AMP)",
        ),
        GpuPreset(
            "a100",
            2470.0,
            "mixed",
            "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md (A100 80 GB, AMP, DALI)",
        ),
        GpuPreset(
            "h100-pcie",
            1976.0,
            "mixed",
            "lambdal/deeplearning-benchmark pytorch-train-throughput (H100 PCIe, fp16, upper figure)",
        ),
        GpuPreset(
            "h100",
            2800.0,
            "mixed",
            "lambdal/deeplearning-benchmark pytorch-train-throughput (H100 SXM5, fp16, upper figure)",
            3972.0,
            f"H100 80GB HBM3, {OWN_STEP}; reports/benchmarks/gpu.json",
        ),
        # No primary published figure was found for the H200; its compute is the H100 SXM's (same
        # GH100 die, more and faster memory), so the H100 SXM figure stands in for the published one.
        GpuPreset(
            "h200",
            2800.0,
            "mixed",
            "assumed equal to H100 SXM5 (lambdal/deeplearning-benchmark); no primary H200 source found",
            4703.0,
            f"H200, {OWN_STEP}; reports/examples/h200-sweep-resumed",
        ),
    )
}


def published_preset(gpu_name: str | None) -> GpuPreset | None:
    """The preset whose published figure is for this GPU (by its NVML/torch name), if any.

    Only the parts the figures were published for match: "NVIDIA H100 80GB HBM3" is the SXM5
    H100, "NVIDIA H100 PCIe" the PCIe one, A100 and V100 only as SXM modules (the DGX systems
    of NVIDIA's figures). Others (A100 PCIe, H100 NVL, …) get no comparison rather than a wrong one.
    """
    name = (gpu_name or "").upper()
    if "H200" in name:
        return GPU_PRESETS["h200"]
    if "H100" in name:
        if "PCIE" in name:
            return GPU_PRESETS["h100-pcie"]
        return None if "NVL" in name else GPU_PRESETS["h100"]
    if "A100" in name and "SXM" in name:
        return GPU_PRESETS["a100"]
    if "V100" in name and "SXM" in name:
        return GPU_PRESETS["v100"]
    return None


@dataclass(frozen=True)
class StorageProfile:
    """An emulated storage device: shared read bandwidth plus a per-file latency.

    ``serial_latency``: the latency is paid on the device's one queue (an HDD's seek), so
    it does not overlap across concurrent readers; otherwise (SSDs, networks) it does.
    """

    name: str
    read_mb_per_s: float
    latency_ms: float
    serial_latency: bool
    source: str


STORAGE_PROFILES: dict[str, StorageProfile] = {
    p.name: p
    for p in (
        StorageProfile(
            "nvme",
            3000.0,
            0.08,
            False,
            "NVMe SSD: sequential 0.5–6 GB/s, QD1 4 KiB random ≈ 20k IOPS (treeru NVMe benchmark of 20 devices)",
        ),
        StorageProfile(
            "sata-ssd",
            530.0,
            0.1,
            False,
            "SATA SSD: ≈ 550 MB/s interface ceiling (AnandTech SSD reviews); ≈ 0.1 ms random read",
        ),
        StorageProfile(
            "hdd",
            180.0,
            6.0,
            True,
            "HDD: 4–8 ms per random read, 150–250 MB/s sequential (common figures); one head, seeks serialize",
        ),
        StorageProfile(
            "nfs-1g",
            118.0,
            1.0,
            False,
            "NFS over 1 GbE: ≈ 118 MB/s line rate; ≈ 1 ms per small file (a few LAN round trips), derived",
        ),
        StorageProfile(
            "nfs-10g",
            1180.0,
            1.0,
            False,
            "NFS over 10 GbE: ≈ 1.18 GB/s line rate; ≈ 1 ms per small file (a few LAN round trips), derived",
        ),
        StorageProfile(
            "nfs-25g",
            2900.0,
            1.0,
            False,
            "NFS over 25 GbE: ≈ 2.9 GB/s line rate; ≈ 1 ms per small file, derived",
        ),
        StorageProfile(
            "object-storage",
            1180.0,
            30.0,
            False,
            "Object storage (S3): ≥ 5,500 GET/s per prefix, first-byte latency tens of ms "
            "(AWS S3 performance guidelines); bandwidth bounded by a 10 GbE client",
        ),
    )
}
