"""``ioprof place``: which location keeps the accelerator busy, and does copying pay?"""

from __future__ import annotations

from collections.abc import Callable

from ioprof import results
from ioprof.commands import prepare_out_dir
from ioprof.compute import check_precision, resolve_device, tune
from ioprof.config import PlaceConfig
from ioprof.errors import IoprofError
from ioprof.place import run_place
from ioprof.render import write_place_report
from ioprof.sweep import load_datasets

# Without --data, the ImageNet-like generated set stands in for the user's dataset.
DEFAULT_PLACE_RESOLUTION = (500, 375)
DEFAULT_PLACE_IMAGES = 400


def place(config: PlaceConfig, command: str, progress: Callable[[str], None]) -> int:
    if not config.candidates and not config.storage_profiles:
        raise IoprofError("--candidates: name at least one folder to compare with (or --storage-profile)")
    device, _ = resolve_device(config.device)
    config = tune(config, device)
    if config.compute.kind == "real":
        check_precision(config.precision, device)
    (dataset,) = load_datasets(
        config.data_path,
        [DEFAULT_PLACE_RESOLUTION],
        DEFAULT_PLACE_IMAGES,
        config.seed,
        config.cache_dir,
        progress,
    )
    out = prepare_out_dir(config.out_dir, "place")
    progress(f"writing results to {out}/")
    result = run_place(config, dataset, command, progress)
    try:
        results.save(result, out / "results.json")
        report = write_place_report(result, out)
    except OSError as e:
        raise IoprofError(
            f"cannot write into {out} ({e.strerror}); free space there or choose another --out"
        ) from None
    print(result.recommendation)
    print(f"report: {report}")
    return 0
