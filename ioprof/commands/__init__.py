"""One module per subcommand, argparse only: each declares its own options (from ``args``, values
checked by ``values``), turns them into its config in one place, runs its runner with named
parameters — never an argparse Namespace beyond that — and writes through ``render.kinds``.

An entry point: it may import every layer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from ioprof.core.errors import IoprofError


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


@contextmanager
def writing_into(out: Path) -> Iterator[None]:
    """Writing a command's results into ``out``: a full disk or a vanished folder becomes one line
    that names the fix (what was already written is left in place)."""
    try:
        yield
    except OSError as e:
        raise IoprofError(
            f"cannot write into {out} ({e.strerror}); free space there or choose another --out"
        ) from None
