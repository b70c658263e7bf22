"""Recorded runs: real runs of the CLI, their ``results.json`` kept under ``tests/data/recorded/``,
so that the tests of a conclusion, a finding's rule or a report's words replay them through
``conclude/`` and ``render/`` in milliseconds instead of measuring again (as pyinstrument's
``--load`` and asv's stored results do).

Regenerate every recorded run (when the result format changes, or to record on another host)::

    python tests/support/record.py            # all of them
    python tests/support/record.py compare    # the named ones

Each recording runs the very commands its live test ran, with the margins set from this host's own
measured pace where the live test set them so, and writes a ``recorded.json`` beside the runs:
what was run, on which host, and the figures the margins were set from.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RECORDED = REPO / "tests" / "data" / "recorded"

sys.path[:0] = [str(REPO), str(HERE)]

import cli  # noqa: E402  (tests/support: the CLI as the live tests run it)
import paths  # noqa: E402  (the suite's own datasets)

from ioprof.datasets.synth import DatasetSpec, generate  # noqa: E402

# the files a run keeps: its measurements (the report, plots and CSV are re-rendered from them)
KEPT = ("results.json",)


def _ioprof(*args: str, cpus: set[int] | None = None) -> None:
    """``python -m ioprof ARGS`` as the live tests run it (``cli.ioprof``), stopping on a failure."""
    p = cli.ioprof(*args, timeout=900, cpus=cpus)
    if p.returncode != 0:
        raise SystemExit(f"record: ioprof {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")


def _keep(run: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for name in KEPT:
        shutil.copyfile(run / name, into / name)


def _sets(work: Path) -> dict[str, Path]:
    """The test suite's own datasets (``tests/conftest.py``): small photos, and large ones whose
    decode is the expensive part."""
    small = work / "data" / "x".join(map(str, paths.SMALL_SET[:2]))
    large = work / "data" / "x".join(map(str, paths.LARGE_SET[:2]))
    generate(DatasetSpec(*paths.SMALL_SET), small)
    generate(DatasetSpec(*paths.LARGE_SET), large)
    return {"small": small, "large": large}


COMPARE_SIM = "--no-probe --loaders multiprocess --seconds 3 --batch-size 4".split()


def _compare(work: Path, sets: dict[str, Path], into: Path) -> dict[str, object]:
    """The same sweep (2 workers) again, on core 0 alone, and with one worker; the step set at 1.5×
    what one core decodes in this very sweep (D1), so that two cores keep up with it and one cannot
    (a fixed rate held on a slower host and not on a faster one); and a probe's run, another command."""

    def sweep(name: str, workers: str, sim: str, one_core: bool = False) -> Path:
        out = work / name
        _ioprof(
            *("sweep", "--data", str(sets["large"]), "--workers", workers, *COMPARE_SIM),
            *("--compute", sim, "--out", str(out)),
            cpus={0} if one_core else None,
        )
        return out

    (cell,) = json.loads((sweep("d1", "2", "sim:100000", one_core=True) / "results.json").read_text())[
        "cells"
    ]
    d1 = float(cell["img_per_s"])
    sim = f"sim:{1.5 * d1:.0f}"
    for name, workers, one_core in (
        ("two", "2", False),
        ("again", "2", False),
        ("onecore", "2", True),
        ("one", "1", False),
    ):
        _keep(sweep(name, workers, sim, one_core), into / name)
    _ioprof("probe", "compute", "--compute", "sim:100", "--out", str(work / "probe"))
    _keep(work / "probe", into / "probe")
    return {"one_core_decode_img_per_s": d1, "compute": sim}


def _whatif(work: Path, sets: dict[str, Path], into: Path) -> dict[str, object]:
    """A compute-bound baseline (a step at 40 img/s, far below what 2 workers decode) and large
    images on one decode-bound worker (a step at 5,000 img/s), each with its copies made in scratch."""
    runs = {
        "compute-bound": ("small", "--workers 2 --compute sim:40 --seconds 2"),
        "large-images": ("large", "--workers 1 --compute sim:5000 --seconds 1"),
    }
    for name, (data, options) in runs.items():
        scratch = work / f"scratch-{name}"
        scratch.mkdir()
        out = work / name
        _ioprof(
            "whatif",
            "--data",
            str(sets[data]),
            *options.split(),
            "--scratch",
            str(scratch),
            "--out",
            str(out),
        )
        _keep(out, into / name)
    return {"runs": {name: options for name, (_, options) in runs.items()}}


PLACE_SMALL = "--workers 1,2 --batch-size 4 --model tiny --crop-px 32 --epochs 10".split()


def _place(work: Path, sets: dict[str, Path], into: Path) -> dict[str, object]:
    """A fast candidate folder, a missing one and an emulated slow location (0.05 MB/s) against a
    step of 200 img/s: the data stays where it is, the slow location is limited by its storage."""
    fast = work / "fast"
    fast.mkdir()
    out = work / "place"
    _ioprof(
        *("place", "--data", str(sets["small"]), "--candidates", f"{fast},{work / 'missing'}"),
        *"--storage-profile custom:0.05 --compute sim:200".split(),
        *PLACE_SMALL,
        *("--out", str(out)),
    )
    _keep(out, into / "fast-and-slow")
    return {
        "compute": "sim:200",
        "emulated": "custom:0.05",
        "fast": str(fast),
        "missing": str(work / "missing"),
    }


CACHED_LINK_MBIT = 8.0  # the rig's own link (``tests/e2e/test_run_netfs.py``)


def _cached(work: Path, into: Path, store: str) -> dict[str, object]:
    """WebDataset with ``cache_dir`` over a shaped link (root: ``tests/support/netfs.py``): two
    tar shards of 640 small photographs, one a worker, each downloaded whole before its first
    sample is yielded; two epochs, the second read from the cache. ``store``: ``http`` (a server
    in the namespace; WebDataset pipes the shards through curl), ``pipe`` (the same server, the
    ``pipe:curl …`` URLs written out, as WebDataset's examples write them) or ``s3`` (moto's S3-API server
    there, read with boto3 in the workers, as MosaicML Streaming and LitData download theirs).
    The ground truths beside it: the shards' bytes (what the store holds, and what the cache
    holds after), and a plain client's rate over the same link."""
    import netfs

    from ioprof.datasets.discover import find_images
    from ioprof.runners.pipelines import write_shards

    with netfs.net_mount(work / "rig", CACHED_LINK_MBIT) as mount:
        src = work / "src"
        generate(DatasetSpec(128, 96, 640, seed=4), src)
        images = find_images(src)
        held = work / "held" if store == "s3" else mount.export
        shards, _, _ = write_shards(images.paths, images.labels, held / "whole", 4_300_000)
        first = Path(shards[0]).name
        env: dict[str, str] = {}
        if store in ("http", "pipe"):
            at = f"{mount.serve_http()}/whole/"
            plain = mount.plain_http([at + first])
            at = at if store == "http" else f"pipe:curl -s -L {at}"
        else:
            env = mount.serve_s3()
            mount.upload_s3(held, "shards", "train", env)  # each as train/whole/0-NAME
            at = "s3://shards/train/whole/0-"
            plain = mount.plain_s3("shards", [f"train/whole/0-{first}"], env)
        cache = work / "cache"
        cache.mkdir()
        brace = f"{at}shard-{{00000..{len(shards) - 1:05d}}}.tar"
        script = REPO / "tests" / "scripts" / "train_webdataset.py"
        out = work / "run"
        p = cli.ioprof(
            *("run", "--out", str(out), "--", sys.executable, str(script), brace),
            *"-a squeezenet1_1 --crop 32 -b 8 -j 2 --epochs 2 --cache-dir".split(),
            str(cache),
            timeout=900,
            env=env,
            prefix=tuple(mount.in_namespace()),
        )
        if p.returncode != 0:
            raise SystemExit(f"record: the cached {store} run failed ({p.returncode}): {p.stderr[-2000:]}")
    _keep(out, into / "two-epochs")
    return {
        "shards": len(shards),
        "shard_bytes": sum(Path(s).stat().st_size for s in shards),
        "cached_bytes": sum(f.stat().st_size for f in cache.iterdir()),
        "link_mbit": CACHED_LINK_MBIT,
        f"plain_{'http' if store == 'pipe' else store}_mb_per_s": plain.bytes_per_s / 1e6,
    }


def _slow_samples(work: Path, sets: dict[str, Path], into: Path) -> dict[str, object]:
    """``ioprof run`` on a loop whose dataset has a slow path of its own (one sample in 50 twenty
    times the others, in ``time.sleep``: the host's pace does not move it), and on the same loop
    without it (the control that must stay silent)."""
    script = str(paths.SCRIPTS / "train_slow_samples.py")
    for name, extra in (("slow", ()), ("control", ("--slow", "1"))):
        run = work / name
        record = str(work / f"{name}.json")
        _ioprof(
            "run", "--no-probe", "--out", str(run), "--", sys.executable, script, "--record", record, *extra
        )
        _keep(run, into / name)
    return {"sample_s": 0.01, "slow_every": 50, "slow_times": 20}


RECORDINGS: dict[str, Callable[[Path, dict[str, Path], Path], dict[str, object]]] = {
    "slow-samples": _slow_samples,
    "compare": _compare,
    "whatif": _whatif,
    "place": _place,
    "cached-shards": lambda work, sets, into: _cached(work, into, "http"),
    "cached-objects": lambda work, sets, into: _cached(work, into, "s3"),
    "cached-pipe": lambda work, sets, into: _cached(work, into, "pipe"),
}


def _host() -> dict[str, object]:
    return {
        "cores": len(os.sched_getaffinity(0)),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"which recordings: {', '.join(RECORDINGS)} (default: all)")
    names = parser.parse_args().names or list(RECORDINGS)
    unknown = [n for n in names if n not in RECORDINGS]
    if unknown:
        parser.error(f"no recording named {', '.join(unknown)}: choose from {', '.join(RECORDINGS)}")
    with tempfile.TemporaryDirectory(prefix="ioprof-record-") as tmp:
        work = Path(tmp)
        os.environ["IOPROF_CACHE_DIR"] = str(work / "cache")
        sets = _sets(work)
        for name in names:
            into = RECORDED / name
            shutil.rmtree(into, ignore_errors=True)
            started = datetime.now(timezone.utc)
            (work / name).mkdir()
            margins = RECORDINGS[name](work / name, sets, into)
            (into / "recorded.json").write_text(
                json.dumps(
                    {
                        "recorded": started.isoformat(timespec="seconds"),
                        "host": _host(),
                        "margins": margins,
                        "how": f"python tests/support/record.py {name}",
                    },
                    indent=1,
                )
                + "\n"
            )
            print(
                f"record: {name} in {(datetime.now(timezone.utc) - started).total_seconds():.0f} s -> {into}"
            )


if __name__ == "__main__":
    main()
