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
from typing import TYPE_CHECKING

from ioprof.core.errors import IoprofError

if TYPE_CHECKING:
    import torch

    from ioprof.core.config import RunLength
    from ioprof.core.resultfile import AnyResult
    from ioprof.datasets.dataset import Dataset
    from ioprof.measure.session import Progress, Session


# Without --data, an ImageNet-like generated set stands in for the user's dataset (whatif, place,
# profile, scale).
STAND_IN_RESOLUTION = (500, 375)
STAND_IN_IMAGES = 400


def one_dataset(
    data_path: str | None, seed: int, cache_dir: str | None, progress: Progress, *, stores: bool = False
) -> Dataset:
    """The user's dataset (``stores``: an object store's too), or the generated set that stands in."""
    from ioprof.datasets.dataset import load_datasets

    (dataset,) = load_datasets(
        data_path,
        [STAND_IN_RESOLUTION],
        STAND_IN_IMAGES,
        seed=seed,
        cache_dir=cache_dir,
        progress=progress,
        stores=stores,
    )
    return dataset


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


def start_measuring(
    name: str,
    out_dir: str | None,
    command_line: str,
    device: torch.device,
    reason: str,
    run: RunLength,
    start_method: str | None,
    progress: Progress,
) -> tuple[Path, Session]:
    """The start every measuring command shares: its output folder made (before anything is
    measured), its session opened, and where it measures and writes said."""
    from ioprof.measure.session import open_session

    out = prepare_out_dir(out_dir, name)
    session = open_session(command_line, device, reason, run, start_method)
    progress(f"compute device: {device} ({reason}); writing results to {out}/")
    return out, session


def save_and_say(result: AnyResult, out: Path) -> int:
    """The end every measuring command shares: ``results.json`` and the report written into
    ``out``, then the answer in one line and where the report is."""
    from ioprof.core import resultfile
    from ioprof.render import kinds

    with writing_into(out):
        resultfile.save(result, out / "results.json")
        report = kinds.write(result, out)
    print(kinds.headline(result))
    print(f"report: {report}")
    return 0
