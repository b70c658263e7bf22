"""Start N ranks under torchrun (``torch.distributed.run``) on this host and collect what rank 0
gathered, or say why the ranks did not finish; and tell whether torchrun started this process.

torchrun is what users already run; its elastic agent watches the ranks and, when one dies,
stops the others and prints a summary naming the first failure. That summary (or the rank's own
``RANK_ERROR_MARK`` line) is the reason a rank count failed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ioprof.runners.rank import RANK_ERROR_MARK


@dataclass(frozen=True)
class Launched:
    ok: bool
    reason: str  # why not, one line ("" when ok)
    gathered: list[dict[str, Any]]  # one record per rank, in rank order
    seconds: float  # torchrun's start to its exit
    log: Path | None  # None: the ranks ran in this very job (ioprof scale under torchrun)


def torchrun_command(ranks: int, config_file: Path, log_dir: str) -> list[str]:
    """``log_dir``: torchrun's folder of a folder per attempt and rank, made in /tmp and never
    removed when none is given: one left behind by every launch."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={ranks}",
        "--max-restarts=0",
        f"--log-dir={log_dir}",
        "-m",
        "ioprof.runners.rank",
        str(config_file),
    ]


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def failure_reason(log_text: str, returncode: int | None) -> str:
    """One line: the first rank that failed and how, from the ranks' own lines or torchrun's summary."""
    for line in log_text.splitlines():
        if RANK_ERROR_MARK in line:
            return line.split(RANK_ERROR_MARK, 1)[1].strip()
    root = log_text.split("Root Cause", 1)[1] if "Root Cause" in log_text else ""
    rank = re.search(r"rank\s*:\s*(\d+)", root)
    code = re.search(r"exitcode\s*:\s*(-?\d+)", root)
    if rank and code:
        c = int(code.group(1))
        how = f"killed by {_signal_name(-c)}" if c < 0 else f"exited with code {c}"
        return f"rank {rank.group(1)}: {how}"
    if returncode is None:
        return "did not finish in time"
    tail = [line.strip() for line in log_text.splitlines() if line.strip()]
    return f"torchrun exited with code {returncode}" + (f": {tail[-1][:200]}" if tail else "")


def _package_path() -> str:
    """The folder that holds the ``ioprof`` package, so that ranks import this very copy."""
    return str(Path(__file__).resolve().parents[2])


def launch(ranks: int, config: dict[str, Any], workdir: Path, name: str, timeout_s: float) -> Launched:
    """Run ``ranks`` ranks with ``config``; their log is kept as ``workdir/name.log``."""
    cfg_file, out_file, log = (
        workdir / f"{name}.json",
        workdir / f"{name}.ranks.json",
        workdir / f"{name}.log",
    )
    out_file.unlink(missing_ok=True)
    cfg_file.write_text(json.dumps({**config, "out": str(out_file)}), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_path(), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    t0 = time.perf_counter()
    with open(log, "wb") as f, tempfile.TemporaryDirectory(prefix="ioprof-torchrun-") as logs:
        proc = subprocess.Popen(
            torchrun_command(ranks, cfg_file, logs),
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:  # on a timeout or Ctrl-C: no rank is left behind
            if proc.poll() is None:
                _stop(proc)
    seconds = time.perf_counter() - t0
    cfg_file.unlink(missing_ok=True)
    text = log.read_text(encoding="utf-8", errors="replace")
    if returncode == 0 and out_file.exists():
        gathered = json.loads(out_file.read_text(encoding="utf-8"))
        out_file.unlink()
        return Launched(True, "", sorted(gathered, key=lambda r: r["rank"]), seconds, log)
    out_file.unlink(missing_ok=True)
    return Launched(False, failure_reason(text, returncode), [], seconds, log)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


# -- under torchrun: every rank runs `ioprof scale`; rank 0 measures the storage and writes the report --


def torchrun_world() -> tuple[int, int] | None:
    """(rank, world size) when torchrun started this process, else None."""
    if "TORCHELASTIC_RUN_ID" not in os.environ or "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
