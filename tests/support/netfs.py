"""A real network filesystem for tests that can run as root: sshfs (FUSE, SFTP over TCP) to an
sshd inside a network namespace this helper creates, whose loopback is rate-limited with
``tc qdisc … tbf`` — and an HTTP server in the same namespace, behind the same link
(``serve_http``): a command run inside the namespace (``in_namespace``) reaches it at
``http://127.0.0.1:PORT``, every byte through the shaped loopback.

The sshfs daemon runs in this mount namespace (so the mount is visible to the code under test);
only its ssh transport runs inside the network namespace, through ``ssh_command``. All traffic
between the ssh client and sshd crosses the namespace's ``lo``, so the token bucket shapes the
link. Its burst must exceed lo's 64 kB MTU, or every full-size packet is dropped and the
connection dies.

Every ``unavailable()`` reason is a skip reason: the tests skip cleanly without root or tools.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ioprof.datasets.synth import DatasetSpec, generate

TOOLS = ("ip", "tc", "sshfs", "sshd", "ssh", "ssh-keygen", "fusermount3")
PORT = 2222
HTTP_PORT = 8088
S3_PORT = 5000
FAULTY_PORT = 5001  # the fault-injecting proxy in front of the S3 server
# tbf needs a burst larger than one packet; lo's MTU is 64 kB
BURST = "256kb"


def unavailable() -> str:
    """Why a rate-limited sshfs mount cannot be made here, or "" when it can."""
    if os.geteuid() != 0:
        return "needs root (network namespace, tc, FUSE mount)"
    for tool in TOOLS:
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed (Debian packages sshfs, openssh-server, iproute2)"
    if not Path("/dev/fuse").exists():
        return "no FUSE device (/dev/fuse missing)"
    return ""


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@dataclass
class NetMount:
    """A mounted sshfs folder whose link carries ``rate_mbit`` megabits per second."""

    mountpoint: Path
    export: Path  # the folder sshd serves (local disk): write the dataset here, read it at mountpoint
    netns: str
    rate_mbit: float
    sshfs: subprocess.Popen[bytes]
    http: subprocess.Popen[bytes] | None = None
    s3: subprocess.Popen[bytes] | None = None

    def in_namespace(self, *command: str) -> list[str]:
        """``command`` run inside the namespace: it reaches the HTTP server over the shaped link."""
        return ["ip", "netns", "exec", self.netns, *command]

    def serve_http(self) -> str:
        """Serve the export (local disk) over HTTP inside the namespace; returns its base URL."""
        if self.http is None:
            self.http = subprocess.Popen(
                self.in_namespace(
                    sys.executable,
                    "-m",
                    "http.server",
                    str(HTTP_PORT),
                    "--bind",
                    "127.0.0.1",
                    "--directory",
                    str(self.export),
                ),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self._wait_port(HTTP_PORT, self.http, "the HTTP server")
        return f"http://127.0.0.1:{HTTP_PORT}"

    def _wait_port(self, port: int, proc: subprocess.Popen[Any], what: str) -> None:
        deadline = time.monotonic() + 30
        while subprocess.run(
            self.in_namespace(
                "python3", "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), 1)"
            ),
            capture_output=True,
        ).returncode:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{what} in the namespace did not start")
            time.sleep(0.2)

    def serve_s3(self) -> dict[str, str]:
        """An S3-API server (moto's) inside the namespace, behind the shaped link; returns the
        environment a client in the namespace needs (endpoint, any credentials: moto takes all)."""
        if self.s3 is None:
            self.s3 = subprocess.Popen(
                self.in_namespace(sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(S3_PORT)),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self._wait_port(S3_PORT, self.s3, "the S3 server")
        return {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{S3_PORT}",
            "AWS_ACCESS_KEY_ID": "ioprof-test",
            "AWS_SECRET_ACCESS_KEY": "ioprof-test",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def stop_s3(self) -> None:
        """Stop the S3 server: every request after fails to connect."""
        if self.s3 is not None:
            self.s3.kill()
            self.s3.wait(timeout=10)
            self.s3 = None  # serve_s3 starts a new, empty one

    @contextmanager
    def faulty_s3(self, fail_share: float) -> Iterator[tuple[dict[str, str], subprocess.Popen[str]]]:
        """A proxy in front of the S3 server that answers ``fail_share`` of the requests 503
        SlowDown (``faulty_proxy``); yields the environment that reaches the store through it, and
        the proxy (its stdout: a line per request, ``ok`` or ``503``)."""
        env = self.serve_s3()
        proxy = subprocess.Popen(
            self.in_namespace(
                sys.executable,
                str(Path(__file__).with_name("faulty_proxy.py")),
                str(FAULTY_PORT),
                str(S3_PORT),
                str(fail_share),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            self._wait_port(FAULTY_PORT, proxy, "the fault-injecting proxy")
            yield {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{FAULTY_PORT}"}, proxy
        finally:
            proxy.kill()
            proxy.wait(timeout=10)
            if proxy.stdout is not None and not proxy.stdout.closed:
                proxy.stdout.close()

    def s3_client(self, code: str, *args: str, env: dict[str, str]) -> str:
        """Run ``code`` (python, with ``c``: a boto3 S3 client) inside the namespace; its stdout."""
        out = subprocess.run(
            self.in_namespace(
                sys.executable, "-c", "import boto3, sys, json, time\nc = boto3.client('s3')\n" + code, *args
            ),
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=300,
        )
        if out.returncode:
            raise RuntimeError(out.stderr[-2000:])
        return out.stdout

    def upload_s3(self, folder: Path, bucket: str, prefix: str, env: dict[str, str], copies: int = 1) -> int:
        """``folder``'s files put under ``s3://bucket/prefix/`` (at a fast rate, then the link's
        again); ``copies``: each file that many times, as ``0-NAME``, ``1-NAME``…"""
        rate = self.rate_mbit
        self.set_rate(1000)
        try:
            return int(
                self.s3_client(
                    "import pathlib\nfrom concurrent.futures import ThreadPoolExecutor\n"
                    "root = pathlib.Path(sys.argv[1])\n"
                    "c.create_bucket(Bucket=sys.argv[2])\n"
                    "jobs = [(str(f), f'{sys.argv[3]}/{f.relative_to(root).parent}/{i}-{f.name}')\n"
                    "        for f in sorted(p for p in root.rglob('*') if p.is_file()) for i in range(int(sys.argv[4]))]\n"
                    "with ThreadPoolExecutor(8) as pool:  # one request at a time took 8 s for 240 small files\n"
                    "    list(pool.map(lambda j: c.put_object(Bucket=sys.argv[2], Key=j[1], Body=pathlib.Path(j[0]).read_bytes()), jobs))\n"
                    "print(len(jobs))",
                    str(folder),
                    bucket,
                    prefix,
                    str(copies),
                    env=env,
                )
            )
        finally:
            self.set_rate(rate)

    def plain_s3(self, bucket: str, keys: list[str], env: dict[str, str]) -> PlainRead:
        """What a plain boto3 client gets over the link: each object read once, one at a time."""
        files, total, seconds = json.loads(
            self.s3_client(
                "keys = json.loads(sys.argv[2]); t0 = time.perf_counter(); n = 0\n"
                "for k in keys: n += len(c.get_object(Bucket=sys.argv[1], Key=k)['Body'].read())\n"
                "print(json.dumps([len(keys), n, time.perf_counter() - t0]))",
                bucket,
                json.dumps(keys),
                env=env,
            )
        )
        return PlainRead(files, total, seconds)

    def plain_http(self, urls: list[str], skip: int = 0) -> PlainRead:
        """What a plain client gets over the link: each URL read once, in order, one at a time;
        after the first ``skip`` read untimed (the link's burst drained, as in ``plain_read``)."""
        code = (
            "import json, sys, time, urllib.request\n"
            "urls = json.loads(sys.argv[1])\n"
            "for u in urls[:int(sys.argv[2])]: urllib.request.urlopen(u).read()\n"
            "urls = urls[int(sys.argv[2]):]; t0 = time.perf_counter(); n = 0\n"
            "for u in urls: n += len(urllib.request.urlopen(u).read())\n"
            "print(json.dumps([len(urls), n, time.perf_counter() - t0]))"
        )
        out = subprocess.run(
            self.in_namespace(sys.executable, "-c", code, json.dumps(urls), str(skip)),
            capture_output=True,
            text=True,
            check=True,
        )
        files, total, seconds = json.loads(out.stdout)
        return PlainRead(files, total, seconds)

    def serve(self, spec: DatasetSpec, name: str) -> Path:
        """A generated dataset copied into the export (local disk) and synced: its path on the mount."""
        src = self.export.parent / f"{name}-src"
        generate(spec, src)
        shutil.copytree(src, self.export / name)
        os.sync()
        return self.mountpoint / name

    def kill(self) -> None:
        """Kill the sshfs daemon: the mount stays, and every access fails (ENOTCONN)."""
        self.sshfs.send_signal(signal.SIGKILL)
        self.sshfs.wait(timeout=10)

    def link_bytes(self) -> Callable[[], int]:
        """A reader of the bytes the link has carried so far: the namespace's loopback, read from
        ``/proc/PID/net/dev`` of a process inside it (the kernel's count, after the shaping; the
        process looked for again when it is gone: a server stopped under a test)."""
        found: list[str] = []

        def read() -> int:
            for _ in range(2):
                if not found:
                    pids = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True)
                    found[:] = pids.stdout.split()[:1]
                try:
                    with open(f"/proc/{found[0]}/net/dev", encoding="ascii") as f:
                        lo = next(ln for ln in f if ln.partition(":")[0].strip() == "lo")
                    return int(lo.partition(":")[2].split()[8])  # transmitted bytes: each packet once
                except (OSError, IndexError):
                    found.clear()
            raise OSError(f"no process left in the namespace {self.netns}")

        return read

    def set_rate(self, rate_mbit: float) -> None:
        _run(
            "ip",
            "netns",
            "exec",
            self.netns,
            *"tc qdisc change dev lo root tbf rate".split(),
            f"{rate_mbit}mbit",
            "burst",
            BURST,
            "latency",
            "400ms",
        )
        self.rate_mbit = rate_mbit

    @contextmanager
    def readahead_kb(self, kb: int) -> Iterator[None]:
        """The mount's readahead (its backing device's ``read_ahead_kb``, 128 by default) set to
        ``kb`` for the block, then put back."""
        st = os.stat(self.mountpoint)
        knob = Path(f"/sys/class/bdi/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/read_ahead_kb")
        before = knob.read_text().strip()
        knob.write_text(str(kb))
        try:
            yield
        finally:
            knob.write_text(before)


@dataclass(frozen=True)
class PlainRead:
    """What a plain reader got over the link: files read once each, in order, one at a time."""

    files: int
    bytes: int
    seconds: float

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds

    @property
    def mean_file_bytes(self) -> float:
        return self.bytes / self.files


def plain_read(root: Path, files: int | None = None, skip: int = 0) -> PlainRead:
    """Read the first ``files`` JPEGs under ``root`` (all by default) in name order, once each;
    after ``skip`` files read untimed first — more than ``BURST`` of them drain the link's token
    bucket, whose burst would otherwise count as link rate in a short read."""
    found = sorted(root.rglob("*.jpg"))
    for f in found[:skip]:
        f.read_bytes()
    paths = found[skip:][:files]
    t0 = time.perf_counter()
    total = sum(len(f.read_bytes()) for f in paths)
    return PlainRead(len(paths), total, time.perf_counter() - t0)


@contextmanager
def net_mount(workdir: Path, rate_mbit: float) -> Iterator[NetMount]:
    """sshfs mount of ``workdir/export`` over a link of ``rate_mbit``; everything undone on exit."""
    netns = f"ioprof-{uuid.uuid4().hex[:8]}"
    export = workdir / "export"
    mnt = workdir / "mnt"
    keys = workdir / "keys"
    for d in (export, mnt, keys):
        d.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation folder
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "host"))
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "client"))
    shutil.copy(keys / "client.pub", keys / "authorized_keys")
    config = keys / "sshd_config"
    config.write_text(
        f"Port {PORT}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\nPidFile {keys / 'sshd.pid'}\n"
        "PermitRootLogin yes\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "Subsystem sftp internal-sftp\nLogLevel ERROR\n"
    )
    sshd: subprocess.Popen[bytes] | None = None
    sshfs: subprocess.Popen[bytes] | None = None
    mounted: NetMount | None = None
    made_ns = False
    try:
        _run("ip", "netns", "add", netns)
        made_ns = True
        _run("ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up")
        _run(
            "ip",
            "netns",
            "exec",
            netns,
            *"tc qdisc add dev lo root tbf rate".split(),
            f"{rate_mbit}mbit",
            "burst",
            BURST,
            "latency",
            "400ms",
        )
        sshd_bin = shutil.which("sshd") or "/usr/sbin/sshd"
        sshd = subprocess.Popen(
            ["ip", "netns", "exec", netns, sshd_bin, "-D", "-e", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        ssh = (
            f"ip netns exec {netns} ssh -F none -i {keys / 'client'} -p {PORT} "
            "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
            "-o BatchMode=yes -o Compression=no"
        )
        deadline = time.monotonic() + 20
        log = workdir / "sshfs.log"
        while True:
            # foreground (-f): the daemon is this Popen, so a test can kill it
            with open(log, "wb") as err:
                sshfs = subprocess.Popen(
                    ["sshfs", "-f", f"root@127.0.0.1:{export}", str(mnt), "-o", f"ssh_command={ssh}"],
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            if _wait_mounted(mnt, sshfs, 10):
                break
            sshfs.kill()
            sshfs.wait()
            if time.monotonic() > deadline:
                raise RuntimeError(f"sshfs did not mount: {log.read_text()}")
            time.sleep(0.5)  # sshd may still be starting
        mounted = NetMount(mnt, export, netns, rate_mbit, sshfs)
        yield mounted
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True, check=False)
        for p in (sshfs, sshd, *((mounted.http, mounted.s3) if mounted is not None else ())):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        if made_ns:
            subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)


def _wait_mounted(mnt: Path, proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if os.path.ismount(mnt):
            return True
        time.sleep(0.1)
    return False


@dataclass(frozen=True)
class Served:
    """What the shared rig serves: an ImageFolder tree and a zip of it on the mount, tar shards
    over HTTP, and what a plain reader gets over the same link (the ground truth for MB/s)."""

    data: Path  # on the mount: train/ (120 photo-like JPEGs of 40 kB), val/ (24)
    archive: Path  # on the mount: data/train as one zip (stored, not compressed)
    shard_urls: list[str]  # over HTTP: tar shards of 640 small JPEGs (8 kB)
    plain_mb_per_s: float  # a plain reader of data/train over the mount, one file at a time
    plain_http_mb_per_s: float  # a plain client of the shards over HTTP, one at a time
    hf: Path | None = None  # on the mount: data/train saved as a Hugging Face dataset (Arrow files)


def serve_everything(mount: NetMount) -> Served:
    """The datasets every test on the rig reads, served once for the whole test run."""
    import zipfile

    from ioprof.datasets.discover import find_images
    from ioprof.runners.pipelines import write_shards

    data = mount.serve(DatasetSpec(256, 192, 120, seed=0), "data/train").parent
    mount.serve(DatasetSpec(256, 192, 24, seed=1), "data/val")
    with zipfile.ZipFile(mount.export / "train.zip", "w", zipfile.ZIP_STORED) as z:
        for f in sorted((mount.export / "data" / "train").rglob("*.jpg")):
            z.write(f, str(f.relative_to(mount.export / "data" / "train")))
    src = mount.export.parent / "shards-src"
    generate(DatasetSpec(128, 96, 640, seed=4), src)
    images = find_images(src)
    shards, _, _ = write_shards(images.paths, images.labels, mount.export / "shards", 200_000)
    hf = save_hf(mount.export / "data" / "train", mount.export / "hf")
    os.sync()
    base = mount.serve_http()
    urls = [f"{base}/shards/{Path(s).name}" for s in shards]
    plain = plain_read(data / "train", 60)
    http = mount.plain_http(urls[:8])
    return Served(
        data,
        mount.mountpoint / "train.zip",
        urls,
        plain.bytes_per_s / 1e6,
        http.bytes_per_s / 1e6,
        mount.mountpoint / "hf" if hf else None,
    )


@contextmanager
def served_rig(prefix: str, rate_mbit: float) -> Iterator[tuple[Served, Path]]:
    """The rig a benchmark runs third-party scripts on: a fresh mount behind ``rate_mbit``, every
    dataset served on it (``serve_everything``), and an empty folder to work in; all removed after."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, net_mount(Path(tmp), rate_mbit) as m:
        served = serve_everything(m)
        work = Path(tmp) / "work"
        work.mkdir()
        yield served, work


def save_hf(folder: Path, out: Path) -> bool:
    """``folder``'s class folders of JPEGs saved as a Hugging Face dataset (image bytes and a class
    label in an Arrow file); False where ``datasets`` is not installed."""
    try:
        import datasets
    except ImportError:
        return False
    files = sorted(folder.rglob("*.jpg"))
    names = sorted({f.parent.name for f in files})
    ds = datasets.Dataset.from_dict(
        {"image": [str(f) for f in files], "label": [names.index(f.parent.name) for f in files]},
        features=datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=names)}),
    )
    ds.save_to_disk(str(out))  # the images' bytes go into the Arrow file: it reads nothing else
    return True


def script_argv(name: str, served: Served, work: Path) -> list[str]:
    """A training script's command line (after the interpreter) on the rig's data, as the tests and
    ``benchmarks/bench_run_pause.py`` run it: ``timm`` (timm's train.py, unchanged), ``hf`` (a Hugging
    Face dataset of the rig's photographs), ``zip`` (the members of one zip). ``work``: where a
    script may write (timm's output folder)."""
    from paths import SCRIPTS

    if name == "timm":
        return [
            str(SCRIPTS / "thirdparty" / "timm_train" / "train.py"),
            *("--data-dir", str(served.data), "--val-split", "val", "--output", str(work / "timm-out")),
            *"--model mobilenetv3_small_050 --device cpu --no-prefetcher -j 2 -b 8 --epochs 2 --img-size 96".split(),
        ]
    if name == "hf":
        return [
            str(SCRIPTS / "train_hf.py"),
            str(served.hf),
            *"-a squeezenet1_1 -b 8 -j 2 --crop 32 --epochs 2".split(),
        ]
    if name == "zip":
        return [
            str(SCRIPTS / "train_archive.py"),
            str(served.archive),
            *"-b 8 -j 2 --crop 32 --epochs 2".split(),
        ]
    raise ValueError(f"no such script on the rig: {name}")
