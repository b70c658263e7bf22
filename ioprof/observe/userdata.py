"""What ioprof can read off a user's batches without changing them: the samples in a batch.
(What a dataset reads is ``ioprof.sources``'.)"""

from __future__ import annotations

from typing import Any


def batch_images(batch: Any, default: int) -> int:
    """Samples in a batch: the leading dimension of its first tensor (however nested)."""
    x = batch
    for _ in range(4):
        shape = getattr(x, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(x, dict) and x:
            x = next(iter(x.values()))
        elif isinstance(x, (list, tuple)) and x:
            x = x[0]
        else:
            break
    return default
