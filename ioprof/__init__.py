"""ioprof: find out whether PyTorch image training is limited by storage, CPU decode or GPU compute."""

from __future__ import annotations

__version__ = "0.1.0"
