"""Datasets: ``synth`` (photo-like generated images), ``discover`` (finding a user's images and
describing them), ``dataset`` (a dataset as the runs use it) and ``cache`` (where generated sets
are kept).

May import: ``ioprof.host``, ``ioprof.core``.
"""

__all__ = ["cache", "dataset", "discover", "synth"]
