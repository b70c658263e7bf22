"""What the kernel and the GPU driver report about this host: page-cache residency and eviction
(``pagecache``), per-process I/O counters (``iocounters``), the bytes a mount fetched from its
storage (``fetched``), the machine and the memory a process may use (``machine``), and NVML
sampling (``telemetry``).

May import: ``ioprof.core``.
"""

__all__ = ["fetched", "iocounters", "machine", "pagecache", "telemetry"]
