"""The ioprof command line as a user runs it: ``python -m ioprof …`` in a subprocess, from this
checkout, its output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from paths import REPO


def ioprof(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ioprof", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=full_env,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def ioprof_run(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``ioprof run ARGS``: a training command under ioprof."""
    return ioprof("run", *args, cwd=cwd, timeout=timeout)


def until_cell(proc: subprocess.Popen[str], position: str = "[2/2]") -> None:
    """Read a running sweep's progress (its stderr) until the cell at ``position`` starts
    measuring — the moment to inject a fault under it."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if position in line and "measuring" in line:
            return
    raise AssertionError("".join(seen))
