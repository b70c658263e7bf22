"""A streaming dataset that downloads its shards into a cache of its own — LitData's
``StreamingDataset``, or MosaicML Streaming's — from an S3-API store behind a shaped link, under
``ioprof run``, against the truth taken outside ioprof: the same script run alone (each epoch's
seconds: the first downloads the shards into its cache, the second reads the cache), a plain boto3
client over the same link, and the bytes the link carried over the run.

The rig is the tests' (``tests/support/netfs.py``): moto's S3 server in a network namespace
whose loopback is shaped by tc tbf. The dataset: real photographs (``photos.py``), written into
LitData chunks of 1 MB by ``litdata.optimize``, or into MDS shards of 1 MB by Streaming's
``MDSWriter``; the loops: ``tests/scripts/train_litdata.py``, ``tests/scripts/train_streaming.py``.

LitData GETs its chunks through obstore where obstore is installed, and obstore's client, as
LitData builds it, refuses an ``http://`` endpoint ("builder error"): run LitData's where obstore
is not installed (``pip uninstall obstore``); LitData then GETs with boto3. Streaming GETs with
boto3 from the endpoint in ``S3_ENDPOINT_URL``.

Root only. Not a test: it prints and saves its figures (reports/benchmarks/LIBRARY_stream.json).

    python benchmarks/bench_stream_cache.py [--library litdata|streaming] [--rate-mbit 4] [--images 400]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import figures  # noqa: E402
import netfs  # noqa: E402
import photos  # noqa: E402

BUCKET, PREFIX = "stream", "photos"
LOOP = ["-a", "squeezenet1_1", "--crop", "32", "-b", "8", "-j", "2", "--epochs", "2"]


@dataclass(frozen=True)
class Library:
    """What differs between the two libraries: the loop, where it is told its cache, how it prints an
    epoch's seconds, how its shards are written, and which of its files hold the samples."""

    script: Path
    cache_flag: str
    epoch_s: str
    write: Callable[[Path, Path], None]
    shards: str


def _optimize(folder: Path, out: Path) -> None:
    """The photographs written into LitData chunks of 1 MB, each sample its JPEG and class."""
    code = (
        "import sys, litdata as ld\nfrom PIL import Image\nfrom pathlib import Path\n"
        "files = sorted(Path(sys.argv[1]).rglob('*.jpg'))\nclasses = sorted({f.parent.name for f in files})\n"
        "def fn(f):\n    return {'image': Image.open(f), 'label': classes.index(f.parent.name)}\n"
        "if __name__ == '__main__':\n"
        "    ld.optimize(fn=fn, inputs=files, output_dir=sys.argv[2], chunk_bytes='1MB', num_workers=1)\n"
    )
    script = out.parent / "optimize.py"  # a file: LitData's worker process imports ``fn`` from it
    script.write_text(code)
    subprocess.run([sys.executable, str(script), str(folder), str(out)], check=True, capture_output=True)


def _mds(folder: Path, out: Path) -> None:
    """The photographs written into MDS shards of 1 MB, each sample its JPEG and class."""
    from PIL import Image
    from streaming import MDSWriter

    files = sorted(folder.rglob("*.jpg"))
    classes = sorted({f.parent.name for f in files})
    with MDSWriter(out=str(out), columns={"x": "jpeg", "y": "int"}, size_limit=1 << 20) as w:
        for f in files:
            with Image.open(f) as image:
                w.write({"x": image, "y": classes.index(f.parent.name)})


LIBRARIES = {
    "litdata": Library(
        REPO / "tests" / "scripts" / "train_litdata.py",
        "--cache",
        r"steps in ([0-9.]+) s",
        _optimize,
        "chunk-*.bin",
    ),
    "streaming": Library(
        REPO / "tests" / "scripts" / "train_streaming.py",
        "--local",
        r"images in ([0-9.]+) s",
        _mds,
        "shard.*.mds",
    ),
}


def _upload(m: netfs.NetMount, chunks: Path, env: dict[str, str]) -> None:
    """The library's files under ``s3://BUCKET/PREFIX/``, by their own names, at a fast rate."""
    rate = m.rate_mbit
    m.set_rate(1000)
    try:
        m.s3_client(
            "import pathlib\nc.create_bucket(Bucket=sys.argv[2])\n"
            "for f in pathlib.Path(sys.argv[1]).iterdir():\n"
            "    c.put_object(Bucket=sys.argv[2], Key=f'{sys.argv[3]}/{f.name}', Body=f.read_bytes())",
            str(chunks),
            BUCKET,
            PREFIX,
            env=env,
        )
    finally:
        m.set_rate(rate)


def _alone(m: netfs.NetMount, lib: Library, env: dict[str, str], cache: Path) -> dict[str, Any]:
    """The script alone over the link, its cache empty: each epoch's seconds, and the link's bytes."""
    shutil.rmtree(cache, ignore_errors=True)
    carried = m.link_bytes()
    b0, t0 = carried(), time.perf_counter()
    p = subprocess.run(
        m.in_namespace(
            sys.executable, str(lib.script), f"s3://{BUCKET}/{PREFIX}", lib.cache_flag, str(cache), *LOOP
        ),
        capture_output=True,
        text=True,
        env=env,
    )
    if p.returncode != 0:
        raise SystemExit(p.stderr[-3000:])
    epochs = [float(s) for s in re.findall(lib.epoch_s, p.stdout)]
    return {"epochs_s": epochs, "wall_s": time.perf_counter() - t0, "link_bytes": carried() - b0}


def _observed(m: netfs.NetMount, lib: Library, env: dict[str, str], cache: Path, out: Path) -> dict[str, Any]:
    """The same under ``ioprof run``: its verdict, its first pass, its bytes, against the link's."""
    from groundtruth import ProcStat

    shutil.rmtree(cache, ignore_errors=True)
    carried = m.link_bytes()
    b0 = carried()
    link = ProcStat(link=carried)
    cmd = [sys.executable, "-m", "ioprof", "run", "--out", str(out), "--", sys.executable, str(lib.script)]
    with link:  # what the link carried, every 20 ms
        p = subprocess.run(
            m.in_namespace(*cmd, f"s3://{BUCKET}/{PREFIX}", lib.cache_flag, str(cache), *LOOP),
            capture_output=True,
            text=True,
            env={**env, "PYTHONPATH": str(REPO)},
        )
    if p.returncode != 0:
        raise SystemExit(p.stderr[-3000:])
    r = json.loads((out / "results.json").read_text())
    key = next(lo["key"] for lo in r["loaders"] if lo["role"] == "training")
    cell = next(c for c in r["cells"] if c["dataset"] == key)
    loader = next(lo for lo in r["loaders"] if lo["key"] == key)
    report = (out / "report.md").read_text()
    seen = [json.loads(f.read_text()) for f in (out / "observed").glob("observed-*.json")]
    spans = next(lo["cpu"]["spans_wall"] for o in seen for lo in o["loaders"] if lo["role"] == "training")
    return {
        "link_bytes": carried() - b0,
        "link_mb_per_s_over_the_window": link.link_mb_per_s_over([tuple(s) for s in spans]),
        "verdict": [cell["verdict"]["bottleneck"], cell["verdict"]["input_bound"]],
        "wait_share": [cell["verdict"]["wait_share_low"], cell["verdict"]["wait_share_high"]],
        "first_pass": r["analysis"].get("first_pass"),
        "before": loader.get("before"),
        "fetched": {k: cell["fetched"].get(k) for k in ("method", "bytes", "source")},
        "fetched_mb_per_s": cell.get("fetched_mb_per_s"),
        "dataset_root": loader.get("dataset_root"),
        "verdict_line": next((ln for ln in report.splitlines() if ln.startswith("**Verdict")), ""),
        "zero_figures": [ln for ln in report.splitlines() if " 0.00 " in ln or " 0 kB" in ln],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", choices=sorted(LIBRARIES), default="litdata")
    ap.add_argument("--rate-mbit", type=float, default=4.0)
    ap.add_argument("--images", type=int, default=400)
    args = ap.parse_args()
    lib = LIBRARIES[args.library]
    name = f"bench_stream_cache ({args.library})"
    why = netfs.unavailable()
    if why:
        raise SystemExit(f"{name}: {why}")
    import importlib.util

    if importlib.util.find_spec(args.library) is None:
        raise SystemExit(f"{name}: {args.library} is not installed (pip install -e '.[test]', or litdata)")
    if args.library == "litdata" and importlib.util.find_spec("obstore") is not None:
        raise SystemExit(
            f"{name}: LitData's obstore client refuses http:// endpoints (pip uninstall obstore)"
        )
    with (
        tempfile.TemporaryDirectory(prefix="ioprof-stream-") as tmp,
        netfs.net_mount(Path(tmp), args.rate_mbit) as m,
    ):
        work = Path(tmp)
        shards = work / "shards"
        lib.write(photos.make_photo_folder(work / "photos", files=args.images), shards)
        served = m.serve_s3()
        env = {**os.environ, **served, "S3_ENDPOINT_URL": served["AWS_ENDPOINT_URL"]}  # Streaming's own
        _upload(m, shards, env)
        keys = [f"{PREFIX}/{f.name}" for f in sorted(shards.glob(lib.shards))]
        plain = m.plain_s3(BUCKET, keys, env).bytes_per_s / 1e6
        alone = _alone(m, lib, env, work / "cache")
        seen = _observed(m, lib, env, work / "cache", work / "out")
        shard_bytes = sum(f.stat().st_size for f in shards.glob(lib.shards))
    result = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "library": args.library,
        "rate_mbit": args.rate_mbit,
        "images": args.images,
        "chunk_bytes": shard_bytes,
        "plain_boto3_mb_per_s": plain,
        "alone": alone,
        "ioprof": seen,
    }
    figures.save(result, REPO / "reports" / "benchmarks" / f"{args.library}_stream.json")


if __name__ == "__main__":
    main()
