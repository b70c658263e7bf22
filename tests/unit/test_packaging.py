"""What ``pip install .`` gives a user beyond the code: the marker that lets their type checker read
ioprof's own annotations (PEP 561), without which ``ioprof.load`` and ``ioprof.watch`` are ``Any``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import paths


def test_the_wheel_carries_the_typed_marker(tmp_path: Path) -> None:
    src = tmp_path / "src"  # a copy: no build folder of an earlier build answers for this one
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):  # what the build reads
        shutil.copy(paths.REPO / name, src / name)
    shutil.copytree(paths.REPO / "ioprof", src / "ioprof", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            ".",
        ],
        cwd=src,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("ioprof-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ioprof/py.typed" in names, [n for n in names if not n.endswith(".py")]
    assert any(n.endswith("/LICENSE") for n in names), [n for n in names if not n.endswith(".py")]
