"""What a measurement read and fetched, and from where: the page-cache regime, the bytes
fetched from storage and how they were counted, and the kernel's I/O counters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ioprof.core.vocab import CacheRegime


@dataclass(frozen=True)
class CacheInfo:
    """The page-cache regime of one measurement, and whether it was verified.

    ``resident_fraction``: of the files' pages, resident just before the measurement;
    ``resident_after``: of the files the measurement read, resident just after it (cold: each
    file is evicted after it is read, so this stays near 0; None where not checked).
    """

    regime: CacheRegime
    resident_fraction: float
    verified: bool
    method: str
    note: str
    resident_after: float | None = None
    evict_after_read: bool = False


@dataclass(frozen=True)
class ReadBack:
    """The pages of a user's files that a cold read evicted while the page cache held them, read
    back after it (``pagecache.read_back``): what the cache holds for their training afterwards is
    what it held before, or ``left_bytes`` short of it."""

    files: int  # files that had pages in the cache when they were evicted
    bytes: int  # read back
    left_bytes: int  # not read back: the time allowed ran out, or a file could no longer be read
    seconds: float


@dataclass(frozen=True)
class CrossCheck:
    """A second count of the bytes fetched, by another method, shown beside the primary one."""

    method: str
    source: str
    bytes: int


NO_SOURCE_FOUND = (
    "the files the dataset reads were not found — it names none, and its workers held none open to read during "
    "the warm-up — so no filesystem's counter could be chosen"
)


@dataclass(frozen=True)
class Fetched:
    """Bytes fetched from storage during a measurement, and how they were counted.

    ``method``: ``block-io`` (kernel ``read_bytes`` of the loader's processes; block devices
    only), ``nfs-mountstats`` (NFS client statistics: bytes read from the server),
    ``fuse-daemon`` (what the FUSE daemon read), ``cold-reads`` (bytes read from files verified
    cold and evicted after each read, so every one was fetched), ``ram`` (a RAM-backed
    filesystem: there is no storage below it), ``emulated`` (every read charged to the emulated
    device), ``object-gets`` (an object store: the bodies of the loader's GETs — no page cache holds
    an object, so every byte crossed the network), ``unknown`` (none of these applies: bytes
    fetched cannot be known here).
    """

    bytes: int | None
    method: str
    source: str = ""
    cross_checks: tuple[CrossCheck, ...] = ()

    @property
    def known(self) -> bool:
        return self.bytes is not None

    @property
    def no_source(self) -> bool:
        """Whether the loader was seen reading from nothing: no file, no connection of its own."""
        return self.method == "unknown" and self.source == NO_SOURCE_FOUND


UNKNOWN_FETCH = Fetched(None, "unknown")


# Methods whose count covers the whole host, not one process: every rank on a host sees them all.
MACHINE_WIDE_FETCH_METHODS = ("nfs-mountstats", "fuse-daemon", "interface-rx")


@dataclass(frozen=True)
class IoCounts:
    """Kernel I/O counters of the loader's processes over a measurement window (psutil).

    ``read_bytes`` counts block I/O only: on NFS and FUSE a fetched byte does not show there,
    which is why ``Fetched`` names how bytes from storage were counted.
    """

    read_bytes: int  # /proc/<pid>/io read_bytes: block I/O caused by these processes
    read_chars: int  # rchar: bytes returned by all their reads (page-cache hits, pipes included)
    processes: int
    window_s: float
    own_read_chars: int | None = None  # their own threads' rchar: no reaped child's (run)

    def derived(self) -> dict[str, Any]:
        """Figures users look for in the file (ignored when loading)."""
        return {
            "read_bytes_mb_per_s": self.read_bytes / 1e6 / self.window_s if self.window_s > 0 else 0.0,
            "read_chars_mb_per_s": self.read_chars / 1e6 / self.window_s if self.window_s > 0 else 0.0,
        }
