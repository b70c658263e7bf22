"""How long the sweep's in-memory sample takes to copy from an object store whose every request
waits before its first byte, one read at a time against SAMPLE_READERS in flight.

Not a test: it prints and saves its figures (reports/benchmarks/sample_copy.json). An S3-API server
(moto's) on this host holds 240 photo-like JPEGs of about 12 kB; the tests' proxy
(tests/support/faulty_proxy.py) sits in front of it, failing nothing and holding every request
50 ms first (a store's time to first byte: tens of ms for S3 in a region). ``load_sample`` copies
the 240 objects through it as the sweep does before its decode ceilings, with 1 reader and with
SAMPLE_READERS, alternating, three rounds each; the figure is each's median seconds.

    python benchmarks/bench_sample_copy.py
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import figures  # noqa: E402

DELAY_S = 0.05
IMAGES = 240
ROUNDS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing answered on port {port}")


def main() -> int:
    import boto3

    from ioprof.datasets import objects
    from ioprof.datasets.dataset import store_dataset
    from ioprof.datasets.synth import DatasetSpec, generate
    from ioprof.measure import sample

    store_port, proxy_port = _free_port(), _free_port()
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    )
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    moto = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(store_port)], **quiet
    )
    proxy = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests/support/faulty_proxy.py"),
            str(proxy_port),
            str(store_port),
            "0",
            str(DELAY_S),
        ],
        **quiet,
    )
    try:
        _wait_port(store_port)
        _wait_port(proxy_port)
        with tempfile.TemporaryDirectory(prefix="ioprof-bench-") as tmp:
            root = Path(tmp) / "data"
            generate(DatasetSpec(128, 96, IMAGES, seed=2), root)
            put = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{store_port}")
            put.create_bucket(Bucket="bench")
            for f in sorted(root.rglob("*.jpg")):
                put.put_object(Bucket="bench", Key=f"p/{f.parent.name}/{f.name}", Body=f.read_bytes())
        os.environ["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{proxy_port}"
        ds = store_dataset("s3://bench/p", seed=0, progress=lambda _: None)
        seconds: dict[int, list[float]] = {1: [], sample.SAMPLE_READERS: []}
        for _ in range(ROUNDS):
            for readers in seconds:
                objects.client()  # this thread's client made before the clock, as in the sweep
                with_readers = sample.SAMPLE_READERS
                sample.SAMPLE_READERS = readers
                try:
                    t0 = time.perf_counter()
                    s = sample.load_sample(ds.images, ds.fs, seed=0)
                    seconds[readers].append(time.perf_counter() - t0)
                finally:
                    sample.SAMPLE_READERS = with_readers
                assert s.files == IMAGES, s.files
    finally:
        proxy.kill()
        moto.kill()
    median = {r: statistics.median(v) for r, v in seconds.items()}
    figures.save(
        {
            "benchmark": "the sweep's in-memory sample copied from an object store, 1 reader vs SAMPLE_READERS",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
            "objects": IMAGES,
            "first_byte_delay_s": DELAY_S,
            "seconds_by_readers": {str(r): [round(x, 2) for x in v] for r, v in seconds.items()},
            "median_s_by_readers": {str(r): round(m, 2) for r, m in median.items()},
            "speedup": round(median[1] / median[sample.SAMPLE_READERS], 2),
        },
        REPO / "reports" / "benchmarks" / "sample_copy.json",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
