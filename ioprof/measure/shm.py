"""/dev/shm, which a DataLoader's batches travel through from its workers: whether the batches in
flight fit, the line that says so with the fix, and the failures torch raises when they did not."""

from __future__ import annotations

from ioprof.core.config import worker_count
from ioprof.host.processes import shm_space

SHM_HEADROOM = 0.9  # what batches in flight may take of /dev/shm's free space


class ShmTooSmall(RuntimeError):
    """The batches in flight do not fit in /dev/shm (predicted before a cell, or the cause of a
    worker's death): one line naming /dev/shm and the fix."""


def shm_line(batch: int, prefetch: int, workers: int, free: int, total: int) -> str:
    """The one line a user reads when batches in flight outgrow /dev/shm."""
    need = batch * prefetch * workers
    fit = max(0, int(free * SHM_HEADROOM // max(1, batch * prefetch)))
    return (
        f"the DataLoader's batches in flight need {need / 1e6:,.1f} MB of /dev/shm ({batch / 1e6:,.2f} MB a "
        f"batch × prefetch_factor {prefetch} × {workers} workers) and /dev/shm has {free / 1e6:,.1f} MB free "
        f"of {total / 1e6:,.1f} MB: give it more (docker run --shm-size=…, or a larger tmpfs), "
        + (
            f"use at most {worker_count(fit)}"
            if fit
            else "use num_workers=0 (not even one worker's batches fit)"
        )
        + ", or a smaller prefetch_factor or batch size"
    )


def shm_fits(batch: int, prefetch: int, workers: int) -> tuple[bool, str]:
    """Whether ``workers`` × ``prefetch`` batches of ``batch`` bytes fit in /dev/shm now, and the
    line to say if not (True where there is no /dev/shm to check)."""
    shm = shm_space()
    if shm is None or not workers or not batch:
        return True, ""
    total, free = shm
    if batch * prefetch * workers <= free * SHM_HEADROOM:
        return True, ""
    return False, shm_line(batch, prefetch, workers, free, total)


def check_shm(batch: int, prefetch: int, workers: int) -> None:
    """Raise ``ShmTooSmall`` before a loader whose batches in flight cannot fit in /dev/shm."""
    fits, line = shm_fits(batch, prefetch, workers)
    if not fits:
        raise ShmTooSmall(f"skipped before it ran: {line}")


def shm_died(batch: int, prefetch: int, workers: int, cause: BaseException) -> None:
    """Raise ``ShmTooSmall`` for a worker that died for want of /dev/shm (``shm_failure``)."""
    shm = shm_space() or (0, 0)
    line = shm_line(batch, prefetch, workers, shm[1], shm[0])
    raise ShmTooSmall(f"a loader worker ran out of shared memory: {line}") from cause


def shm_note() -> str:
    """/dev/shm's size, and the fixes, for a failure whose batch size is not known."""
    shm = shm_space() or (0, 0)
    return (
        f"/dev/shm has {shm[1] / 1e6:,.1f} MB free of {shm[0] / 1e6:,.1f} MB: give it more (docker run "
        "--shm-size=…), use fewer workers, or a smaller prefetch_factor or batch size"
    )


def shm_failure(error: BaseException) -> bool:
    """An error torch raises when a worker's batch could not be written to /dev/shm."""
    text = str(error)
    return (
        "shared memory" in text
        or "Bus error" in text
        or ("No space left on device" in text and "torch_" in text)
    )
