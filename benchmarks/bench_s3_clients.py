"""Which S3 client ioprof reads object storage with: boto3, obstore or s3fs, side by side (needs root).

Not a test: it prints and saves its figures (reports/benchmarks/s3_clients.json). An S3-API server
(moto's) runs inside the tests' network namespace (tests/support/netfs.py), its loopback shaped by
tc tbf, holding 160 photo-like JPEGs of about 110 kB. Each client, in a fresh process inside the
namespace, GETs every object (on the fast link, 8 times over) with 1 and with 8 threads (a client
per thread, as ioprof's readers and loader workers make them, made before the clock starts), three
rounds in turn; the figure is the median round's MB/s and objects/s. Two links: 8 Mbit/s (the tests' link: the link limits) and 1,000 Mbit/s (the client's
own cost per request shows, beside moto's). A client that is not installed is said so and skipped.

    sudo python benchmarks/bench_s3_clients.py        # pip install obstore s3fs first, to compare them
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

import netfs  # noqa: E402

from ioprof.datasets.synth import DatasetSpec  # noqa: E402

BUCKET = "bench"
RATES_MBIT = (8, 1000)
THREADS = (1, 8)
ROUNDS = 3
# Each key read this many times a round: a round of some seconds on the fast link too.
PASSES = {8: 1, 1000: 8}
OUT = REPO / "reports" / "benchmarks" / "s3_clients.json"

# Each reader: GET every key once with N threads, a client per thread; prints [objects, bytes, seconds].
READER = r"""
import json, os, sys, threading, time
client, threads, keys = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
endpoint, bucket = os.environ["AWS_ENDPOINT_URL"], sys.argv[4]

def make():
    if client == "boto3":
        import boto3
        c = boto3.session.Session().client("s3")
        return lambda k: c.get_object(Bucket=bucket, Key=k)["Body"].read()
    if client == "obstore":
        from obstore.store import S3Store
        s = S3Store(bucket, endpoint=endpoint, region="us-east-1", client_options={"allow_http": True})
        import obstore
        return lambda k: bytes(obstore.get(s, k).bytes())
    import s3fs
    fs = s3fs.S3FileSystem(endpoint_url=endpoint)
    return lambda k: fs.cat_file(f"{bucket}/{k}")

queue, lock, total = list(keys) * int(sys.argv[5]), threading.Lock(), [0]
ready = threading.Barrier(threads + 1)
def run():
    get = make()  # each thread's client, made before the clock starts
    ready.wait()
    while True:
        with lock:
            if not queue:
                return
            k = queue.pop()
        n = len(get(k))
        with lock:
            total[0] += n

ts = [threading.Thread(target=run) for _ in range(threads)]
for t in ts: t.start()
ready.wait()
t0 = time.perf_counter()
for t in ts: t.join()
keys = keys * int(sys.argv[5])
print(json.dumps([len(keys), total[0], time.perf_counter() - t0]))
"""


def _installed(client: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {client}"], capture_output=True).returncode == 0


def main() -> int:
    why = netfs.unavailable()
    if why:
        print(f"bench_s3_clients: {why}", file=sys.stderr)
        return 2
    clients = [c for c in ("boto3", "obstore", "s3fs") if _installed(c)]
    missing = [c for c in ("boto3", "obstore", "s3fs") if c not in clients]
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="ioprof-s3c-") as tmp,
        netfs.net_mount(Path(tmp), RATES_MBIT[0]) as m,
    ):
        env = m.serve_s3()
        m.serve(DatasetSpec(500, 375, 160), "photos")
        n = m.upload_s3(m.export / "photos", BUCKET, "p", env)
        keys = json.loads(
            m.s3_client(
                "print(json.dumps([o['Key'] for o in c.list_objects_v2(Bucket=sys.argv[1])['Contents']]))",
                BUCKET,
                env=env,
            )
        )
        keys = [k for k in keys if k.endswith(".jpg")]
        for rate in RATES_MBIT:
            m.set_rate(rate)
            for threads in THREADS:
                for client in clients:
                    runs = []
                    for _ in range(ROUNDS):
                        p = subprocess.run(
                            m.in_namespace(
                                sys.executable,
                                "-c",
                                READER,
                                client,
                                str(threads),
                                json.dumps(keys),
                                BUCKET,
                                str(PASSES[rate]),
                            ),
                            capture_output=True,
                            text=True,
                            env={**os.environ, **env},
                            timeout=600,
                        )
                        if p.returncode:
                            raise RuntimeError(f"{client}: {p.stderr[-2000:]}")
                        runs.append(json.loads(p.stdout))
                    objs, nbytes, _ = runs[0]
                    seconds = statistics.median(r[2] for r in runs)
                    row = {
                        "link_mbit": rate,
                        "threads": threads,
                        "client": client,
                        "objects": objs,
                        "mb": nbytes / 1e6,
                        "seconds_median": seconds,
                        "seconds_rounds": [r[2] for r in runs],
                        "mb_per_s": nbytes / 1e6 / seconds,
                        "objects_per_s": objs / seconds,
                    }
                    rows.append(row)
                    print(
                        f"{rate:>5} Mbit/s, {threads} thread(s), {client:8}: {row['mb_per_s']:7.2f} MB/s, "
                        f"{row['objects_per_s']:6.1f} objects/s (rounds {', '.join(f'{r[2]:.2f}' for r in runs)} s)"
                    )
    result = {
        "benchmark": "bench_s3_clients",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "objects_uploaded": n,
        "not_installed": missing,
        "rows": rows,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
