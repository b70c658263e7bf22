"""Real slow storage for tests that can run as root: a loop-device ext4 filesystem whose reads
are throttled by the blkio cgroup (v1 ``blkio.throttle.read_bps_device``, or v2 ``io.max``).

Every ``unavailable()`` reason is a skip reason: the tests skip cleanly without root or
without the kernel features.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CGROUP_V1_BLKIO = Path("/sys/fs/cgroup/blkio")
CGROUP_V2_CANDIDATES = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))


def unavailable() -> str:
    """Why real slow storage cannot be made here, or "" when it can."""
    if os.geteuid() != 0:
        return "needs root (loop device, mount, blkio cgroup)"
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not Path("/dev/loop-control").exists():
        return "no loop device support (/dev/loop-control missing)"
    if not (CGROUP_V1_BLKIO / "blkio.throttle.read_bps_device").exists() and _v2_root() is None:
        return "no blkio cgroup (v1 blkio.throttle.read_bps_device or v2 io.max)"
    return ""


def _v2_root() -> Path | None:
    for root in CGROUP_V2_CANDIDATES:
        if (
            "io" in (root / "cgroup.controllers").read_text().split()
            if (root / "cgroup.controllers").exists()
            else []
        ):
            return root
    return None


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class SlowDisk:
    mountpoint: Path
    device: str
    read_bytes_per_s: int
    cgroup_procs: Path

    def join(self) -> None:
        """Put the calling process into the throttled cgroup (use as a subprocess preexec_fn)."""
        self.cgroup_procs.write_text(str(os.getpid()))


@contextmanager
def slow_disk(
    workdir: Path, read_bytes_per_s: int, size_mb: int = 96, read_iops: int | None = None
) -> Iterator[SlowDisk]:
    """A mounted, read-throttled loop filesystem; everything is undone on exit. ``read_iops``: its
    reads held to that many a second as well (a cloud volume's IOPS cap: one random read of a few
    kB costs as much of it as one of a readahead's 128 kB)."""
    image = workdir / "slowdisk.img"
    mnt = workdir / "slowdisk"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(size_mb * 2**20)
    device = _run("losetup", "-f", "--show", str(image))
    cgroup: Path | None = None
    mounted = False
    try:
        _run("mkfs.ext4", "-q", device)
        _run("mount", device, str(mnt))
        mounted = True
        rdev = os.stat(device).st_rdev
        majmin = f"{os.major(rdev)}:{os.minor(rdev)}"
        name = f"ioprof-test-{uuid.uuid4().hex[:8]}"
        if (CGROUP_V1_BLKIO / "blkio.throttle.read_bps_device").exists():
            cgroup = CGROUP_V1_BLKIO / name
            cgroup.mkdir()
            (cgroup / "blkio.throttle.read_bps_device").write_text(f"{majmin} {read_bytes_per_s}")
            if read_iops is not None:
                (cgroup / "blkio.throttle.read_iops_device").write_text(f"{majmin} {read_iops}")
        else:
            root = _v2_root()
            assert root is not None
            cgroup = root / name
            cgroup.mkdir()
            iops = f" riops={read_iops}" if read_iops is not None else ""
            (cgroup / "io.max").write_text(f"{majmin} rbps={read_bytes_per_s}{iops}")
        yield SlowDisk(mnt, device, read_bytes_per_s, cgroup / "cgroup.procs")
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False)
        subprocess.run(["losetup", "-d", device], check=False)
        if cgroup is not None and cgroup.exists():
            # a cgroup with members cannot be removed: hand them back to the parent
            for pid in (cgroup / "cgroup.procs").read_text().split():
                (cgroup.parent / "cgroup.procs").write_text(pid)
            cgroup.rmdir()
        image.unlink(missing_ok=True)
