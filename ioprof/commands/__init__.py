"""One module per subcommand. Each takes named parameters (never an argparse Namespace)."""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime
from pathlib import Path

from ioprof.errors import IoprofError


def make_progress(stream=sys.stderr):  # type: ignore[no-untyped-def]
    """A progress printer that prefixes the seconds since the command started."""
    t0 = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f} s] {message}", file=stream, flush=True)

    return progress


def prepare_out_dir(out: str | None, command: str) -> Path:
    """The output folder, created and checked writable *before* anything is measured."""
    if out:
        path = Path(out)
        flag = f"--out {out}"
    else:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = Path("reports") / f"{command}-{stamp}"
        n = 1
        while path.exists():
            n += 1
            path = Path("reports") / f"{command}-{stamp}-{n}"
        flag = "the current folder (reports/ is created there; or pass --out DIR)"
    if path.exists() and not path.is_dir():
        raise IoprofError(f"{flag}: is a file; pass a folder for the results")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".ioprof-write-test-{os.getpid()}"
        probe.write_bytes(b"x" * 4096)
        probe.unlink()
    except OSError as e:
        raise IoprofError(f"{flag}: cannot write there ({e.strerror}); choose a writable folder") from None
    return path
