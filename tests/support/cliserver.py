"""``python -m ioprof ARGS`` for the end-to-end tests, without paying its imports each time.

Every ``python -m ioprof`` spends about 3 s importing torch, torchvision (which imports
torch._dynamo), matplotlib and ioprof before it does anything; the end-to-end tests start some
70 of them. A server process imports them once; for each command it forks a child that sets the
command's working folder, environment and ``sys.argv``, sends its output to files, and runs
``ioprof.cli.console`` — the program's own entry point, to its own exit code. The child is a
process of its own, as ``python -m ioprof`` is: its workers, its exit code, a signal that kills
it, all as before. Only the imports are shared (copy-on-write pages: a test that reads the
training process's own memory should start a fresh process — ``fresh=True`` in ``cli.ioprof``).

The server never runs torch code, so no thread of torch's exists when it forks. It takes one
command at a time, over its stdin and stdout (a JSON line each way).

Set ``IOPROF_TEST_FRESH=1`` to start every command as a fresh process instead.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

_servers: dict[tuple[str, ...], subprocess.Popen[str] | None] = {}  # by the prefix they run under
_lock = threading.Lock()


@atexit.register
def _stop() -> None:
    for proc in _servers.values():
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def _child(req: dict[str, Any]) -> None:
    """In the forked child: the command's folder, environment, argv and output; then ioprof."""
    os.setsid()  # its own process group: a timeout kills it and its workers together
    if req.get("cgroup_procs"):  # a throttled cgroup (``slowdisk``): before anything is read
        Path(req["cgroup_procs"]).write_text(str(os.getpid()))
    if req.get("cpus"):  # as ``taskset -c``: torch's threads as a process started there would count them
        os.sched_setaffinity(0, req["cpus"])
        import torch

        torch.set_num_threads(len(req["cpus"]))  # the OpenMP runtime counted the cores at import
    out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = [str(Path(sys.modules["ioprof"].__file__ or "ioprof").with_name("__main__.py")), *req["argv"]]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from ioprof.cli import console

    console()  # exits


def serve() -> None:
    """The server: import what ``python -m ioprof`` imports, then fork a child per request."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot
    import torch  # noqa: F401
    import torchvision  # noqa: F401

    import ioprof.cli
    import ioprof.render.kinds
    import ioprof.runners.place
    import ioprof.runners.sweep
    import ioprof.runners.whatif  # noqa: F401

    assert threading.active_count() == 1, "a thread at fork: the children could deadlock"
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _child(req)
            finally:
                os._exit(70)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)


def _start(prefix: tuple[str, ...]) -> subprocess.Popen[str] | None:
    here = Path(__file__).resolve().parent
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-c", "import cliserver; cliserver.serve()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(here.parent.parent), str(here)))},
    )
    assert proc.stdout is not None
    if json.loads(proc.stdout.readline() or "{}").get("ready"):
        return proc
    proc.kill()
    return None


def run(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    scratch: Path,
    prefix: tuple[str, ...] = (),
    cgroup_procs: Path | None = None,
    cpus: set[int] | None = None,
) -> subprocess.CompletedProcess[str] | None:
    """``python -m ioprof ARGV`` in a forked child of the server that runs under ``prefix`` (a
    network namespace's ``ip netns exec NAME``: one server each), in the cgroup whose
    ``cgroup.procs`` is given (its workers with it), on the ``cpus`` given (as ``taskset -c``);
    None where there is no server (the caller then starts a fresh process)."""
    if os.environ.get("IOPROF_TEST_FRESH"):
        return None
    with _lock:
        server = _servers.get(prefix)
        if server is None or server.poll() is not None:
            server = _servers[prefix] = _start(prefix)
        if server is None:
            return None
        assert server.stdin is not None and server.stdout is not None
        scratch.mkdir(parents=True, exist_ok=True)
        n = len(list(scratch.iterdir()))
        out, err = scratch / f"{n}.out", scratch / f"{n}.err"
        req = {"argv": argv, "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
        req["cgroup_procs"] = str(cgroup_procs) if cgroup_procs else None
        req["cpus"] = sorted(cpus) if cpus else None
        server.stdin.write(json.dumps(req) + "\n")
        server.stdin.flush()
        pid = json.loads(server.stdout.readline())["pid"]
        done: dict[str, Any] = {}
        reply = server.stdout
        reader = threading.Thread(target=lambda: done.update(json.loads(reply.readline())))
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            os.killpg(pid, signal.SIGKILL)
            reader.join()
            raise subprocess.TimeoutExpired(["ioprof", *argv], timeout, out.read_text(), err.read_text())
        return subprocess.CompletedProcess(["ioprof", *argv], done["rc"], out.read_text(), err.read_text())
