"""DESIGN's one-way dependencies: analysis and renderers never load torch or pynvml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_analysis_and_renderers_load_neither_torch_nor_nvml() -> None:
    code = (
        "import sys, ioprof.analysis, ioprof.placement, ioprof.render, ioprof.results;"
        "print(sorted(m for m in ('torch', 'pynvml', 'torchvision') if m in sys.modules))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert p.stdout.strip() == "[]"
