"""Measuring one stage at a time: ``storage`` (reads, cold or emulated), ``loader`` (the DataLoader
ioprof builds), ``decode`` (the decode ceiling from memory), ``compute`` (training steps, real or
simulated), ``steptiming`` (CUDA events), ``layers`` (per-layer hooks), ``models`` (the models
``devices`` trains), ``sample`` (a sample of a dataset held in memory), ``cell`` (one end-to-end
cell: loader feeding step), ``ceilings`` (every ceiling a run needs) and ``session`` (the device,
machine and progress a run shares).

May import: ``ioprof.core``, ``ioprof.host``, ``ioprof.datasets``.
"""

__all__ = [
    "ceilings",
    "cell",
    "compute",
    "decode",
    "layers",
    "loader",
    "models",
    "sample",
    "session",
    "steptiming",
    "storage",
]
