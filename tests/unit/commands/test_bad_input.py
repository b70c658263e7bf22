"""Bad input is one line that names what to change, and nothing is made before it is checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import paths
import pytest

REPO = paths.REPO


def test_unwritable_out_is_found_before_measuring(small_set: Path, tmp_path: Path, in_process) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, _, err = in_process("sweep", "--data", str(small_set), "--out", str(blocker))
    assert rc == 1
    assert f"ioprof: error: --out {blocker}: is a file" in err
    assert "measuring" not in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder: permission cannot be denied to it")
def test_unreadable_folder_is_a_clear_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        p = subprocess.run(
            [sys.executable, "-m", "ioprof", "sweep", "--data", str(locked)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    finally:
        locked.chmod(0o755)
    assert p.returncode == 1 and "permission denied" in p.stderr and "Traceback" not in p.stderr
