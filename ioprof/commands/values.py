"""Option values: each parsed and checked while the command line is parsed, with a message that
says what is allowed ("must be at least 1"), turned into the types the configs hold."""

from __future__ import annotations

import re

from ioprof.core.config import (
    DEVICE_MODELS,
    LOADERS,
    SCALE_REGIMES,
    ComputeSpec,
)
from ioprof.core.presets import GPU_PRESETS, STORAGE_PROFILES, StorageProfile


def parse_compute(text: str) -> ComputeSpec:
    """``real``, ``sim:IMG_PER_S`` or ``sim:PRESET``."""
    if text == "real":
        return ComputeSpec("real")
    if text.startswith("sim:"):
        arg = text[4:].strip().lower()
        if arg in GPU_PRESETS:
            p = GPU_PRESETS[arg]
            return ComputeSpec("sim", p.img_per_s, p.name, p.source)
        try:
            rate = float(arg)
        except ValueError:
            rate = -1.0
        if rate > 0 and rate != float("inf"):
            return ComputeSpec("sim", rate)
    raise ValueError(
        f"must be 'real', 'sim:IMG_PER_S' (a positive number) or 'sim:PRESET' with PRESET one of "
        f"{', '.join(GPU_PRESETS)}; got {text!r}"
    )


def parse_storage_profile(text: str) -> StorageProfile:
    """A preset name, or ``custom:READ_MB_PER_S[:LATENCY_MS]``."""
    name = text.strip().lower()
    if name in STORAGE_PROFILES:
        return STORAGE_PROFILES[name]
    m = re.fullmatch(r"custom:([0-9.]+)(?::([0-9.]+))?", name)
    if m:
        try:
            bw = float(m.group(1))
            lat = float(m.group(2) or 0.0)
        except ValueError:
            bw = -1.0
            lat = 0.0
        if bw > 0:
            return StorageProfile(f"custom:{bw:g}:{lat:g}", bw, lat, False, "user-defined")
    raise ValueError(
        f"must be one of {', '.join(STORAGE_PROFILES)} or custom:READ_MB_PER_S[:LATENCY_MS]; got {text!r}"
    )


def parse_positive_int_list(text: str) -> tuple[int, ...]:
    """``1,4,8`` → (1, 4, 8): positive integers, no duplicates, at least one."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise ValueError(f"must be a comma-separated list of positive integers such as 1,4,8; got {text!r}")
    values: list[int] = []
    for p in parts:
        if not re.fullmatch(r"[0-9]+", p) or int(p) < 1:
            raise ValueError(
                f"must be a comma-separated list of positive integers such as 1,4,8; got {text!r} "
                "(the serial loader, num_workers=0, is chosen with --loaders serial)"
            )
        values.append(int(p))
    if len(set(values)) != len(values):
        raise ValueError(f"has a value twice: {text!r}")
    return tuple(values)


def parse_resolution(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*([0-9]+)\s*[xX×]\s*([0-9]+)\s*", text)
    if not m or int(m.group(1)) < 8 or int(m.group(2)) < 8:
        raise ValueError(f"must be WIDTHxHEIGHT with both at least 8, such as 500x375; got {text!r}")
    return int(m.group(1)), int(m.group(2))


def parse_resolutions(text: str) -> tuple[tuple[int, int], ...]:
    """``256x192,500x375`` → ((256, 192), (500, 375))."""
    if not text.strip():
        raise ValueError("must be a comma-separated list such as 256x192,500x375,1024x768")
    res = tuple(parse_resolution(p) for p in text.split(","))
    if len(set(res)) != len(res):
        raise ValueError(f"has a resolution twice: {text!r}")
    return res


def parse_loaders(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(","))
    if not text.strip() or any(p not in LOADERS for p in parts) or len(set(parts)) != len(parts):
        raise ValueError(f"must be a comma-separated list of {', '.join(LOADERS)}; got {text!r}")
    return parts


def parse_device(text: str) -> str:
    if text in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:[0-9]+", text):
        return text
    raise ValueError(f"must be auto, cpu, cuda or cuda:INDEX; got {text!r}")


def positive_int(text: str) -> int:
    if not re.fullmatch(r"\s*[0-9]+\s*", text) or int(text) < 1:
        raise ValueError(f"must be a whole number of at least 1; got {text!r}")
    return int(text)


def non_negative_int(text: str) -> int:
    if not re.fullmatch(r"\s*[0-9]+\s*", text):
        raise ValueError(f"must be a whole number of at least 0; got {text!r}")
    return int(text)


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not (v > 0 and v != float("inf")):
        raise ValueError(f"must be a positive number; got {text!r}")
    return v


def share(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"must be a fraction between 0 and 1, such as 0.05; got {text!r}")
    return v


def gigabytes(text: str) -> int:
    """A size in GB (10^9 bytes), as bytes: ``--ram 64``."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a size in GB such as 64 or 0.5; got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"must be a size in GB of at least 0; got {text!r}")
    return round(value * 1e9)


def parse_paths(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(","))
    if not text.strip() or any(not p for p in parts):
        raise ValueError(
            f"must be a comma-separated list of folders such as /mnt/nvme,/dev/shm; got {text!r}"
        )
    return parts


def parse_storage_profiles(text: str) -> tuple[StorageProfile, ...]:
    return tuple(parse_storage_profile(p) for p in text.split(","))


def parse_regimes(text: str) -> tuple[str, ...]:
    """``cold,warm`` → ("cold", "warm"): each at most once."""
    parts = tuple(p.strip() for p in text.split(","))
    if not text.strip() or any(p not in SCALE_REGIMES for p in parts) or len(set(parts)) != len(parts):
        raise ValueError(f"must be cold, warm or cold,warm; got {text!r}")
    return parts


def parse_device_models(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(","))
    bad = [p for p in parts if p not in DEVICE_MODELS]
    if not text.strip() or bad or len(set(parts)) != len(parts):
        raise ValueError(f"must be a comma-separated list of {', '.join(DEVICE_MODELS)}; got {text!r}")
    return parts
