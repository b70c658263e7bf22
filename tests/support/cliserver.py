"""``python -m ioprof ARGS`` for the end-to-end tests, without paying its imports each time.

Every ``python -m ioprof`` spends about 3 s importing torch, torchvision (which imports
torch._dynamo), matplotlib and ioprof before it does anything; the end-to-end tests start some
70 of them. A server process imports them once; for each command it forks a child that sets the
command's working folder, environment and ``sys.argv``, sends its output to files (its stderr
to a FIFO where the caller reads it as it comes: a command started to have a fault injected at
a line of its progress), and runs ``ioprof.cli.console`` — the program's own entry point, to its own exit code. The child is a
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
from typing import Any, TextIO

_servers: dict[tuple[str, ...], subprocess.Popen[str] | None] = {}  # by the prefix they run under
_lock = threading.Lock()


@atexit.register
def _stop() -> None:
    for proc in _servers.values():
        if proc is None:
            continue
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):  # closed here, not left to a warning at exit
            if pipe is not None:
                pipe.close()


def _child(req: dict[str, Any], err: int | None) -> None:
    """In the forked child: the command's folder, environment, argv and output; then ioprof."""
    os.setsid()  # its own process group: a timeout kills it and its workers together
    if req.get("cgroup_procs"):  # a throttled cgroup (``slowdisk``): before anything is read
        Path(req["cgroup_procs"]).write_text(str(os.getpid()))
    if req.get("cpus"):  # as ``taskset -c``: torch's threads as a process started there would count them
        os.sched_setaffinity(0, req["cpus"])
        import torch

        torch.set_num_threads(len(req["cpus"]))  # the OpenMP runtime counted the cores at import
    out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if err is None:
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
        # a streamed stderr is a FIFO the caller reads: opened here, before the fork (the open
        # waits for the caller's), so that the caller never waits on a child that failed early
        err = os.open(req["stderr"], os.O_WRONLY) if req["stream"] else None
        pid = os.fork()
        if pid == 0:
            try:
                _child(req, err)
            finally:
                os._exit(70)
        if err is not None:
            os.close(err)  # the child's now: its end of file is the command's (and its workers') end
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


class Started:
    """A command running in a forked child of a server, used as a ``subprocess.Popen`` is:
    ``pid``, ``stderr`` (its lines as they are written, through a FIFO, where it was started with
    ``stream``), ``send_signal``, ``communicate``, ``returncode``. The server is the command's
    until it has finished: a command started meanwhile starts as a fresh process."""

    def __init__(
        self, argv: list[str], server: subprocess.Popen[str], out: Path, err: Path, stream: bool
    ) -> None:
        assert server.stdout is not None
        self.args, self._reply, self._out, self._err = ["ioprof", *argv], server.stdout, out, err
        self.stderr: TextIO | None = open(err, encoding="utf-8") if stream else None  # noqa: SIM115
        self.pid: int = json.loads(self._reply.readline())["pid"]
        self.returncode: int | None = None

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Its output (what of ``stderr`` was not read yet) once it has exited; past ``timeout``
        it is killed with its process group and ``subprocess.TimeoutExpired`` raised."""
        done: dict[str, Any] = {}

        def finish() -> None:
            if self.stderr is not None:  # read to its end first: a full FIFO would stop the child
                done["err"] = self.stderr.read()
                self.stderr.close()
            done["rc"] = json.loads(self._reply.readline())["rc"]

        reader = threading.Thread(target=finish, daemon=True)
        reader.start()
        reader.join(timeout)
        timed_out = reader.is_alive()
        try:
            if timed_out:
                os.killpg(self.pid, signal.SIGKILL)
                reader.join()
            self.returncode = done["rc"]
        finally:
            _lock.release()
        out, err = self._out.read_text(), done["err"] if "err" in done else self._err.read_text()
        if timed_out:
            raise subprocess.TimeoutExpired(self.args, timeout or 0, out, err)
        return out, err


def start(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    scratch: Path,
    stream: bool = True,
    prefix: tuple[str, ...] = (),
    cgroup_procs: Path | None = None,
    cpus: set[int] | None = None,
) -> Started | None:
    """``python -m ioprof ARGV`` started in a forked child of the server that runs under ``prefix``
    (a network namespace's ``ip netns exec NAME``: one server each), in the cgroup whose
    ``cgroup.procs`` is given (its workers with it), on the ``cpus`` given (as ``taskset -c``);
    None where there is no server, or its server is busy with a command started before (the
    caller then starts a fresh process)."""
    # ``ip netns exec`` mounts the namespace's own sysfs over /sys, and with it hides the cgroups
    # from a server started under it: such a run joins its cgroup before the prefix, in a fresh process
    if prefix and cgroup_procs:
        return None
    if os.environ.get("IOPROF_TEST_FRESH") or not _lock.acquire(blocking=False):
        return None
    server = _servers.get(prefix)
    if server is None or server.poll() is not None:
        server = _servers[prefix] = _start(prefix)
    if server is None:
        _lock.release()
        return None
    assert server.stdin is not None
    scratch.mkdir(parents=True, exist_ok=True)
    n = len(list(scratch.iterdir()))
    out, err = scratch / f"{n}.out", scratch / f"{n}.err"
    if stream:
        os.mkfifo(err)
    req = {
        "argv": argv,
        "cwd": str(cwd),
        "env": env,
        "stdout": str(out),
        "stderr": str(err),
        "stream": stream,
    }
    req["cgroup_procs"] = str(cgroup_procs) if cgroup_procs else None
    req["cpus"] = sorted(cpus) if cpus else None
    server.stdin.write(json.dumps(req) + "\n")
    server.stdin.flush()
    return Started(argv, server, out, err, stream)


def run(argv: list[str], *, timeout: float, **where: Any) -> subprocess.CompletedProcess[str] | None:
    """``start`` (``where``: its keywords), waited for: its exit code and output; past ``timeout``
    killed with its workers, and ``subprocess.TimeoutExpired`` raised."""
    started = start(argv, stream=False, **where)
    if started is None:
        return None
    out, err = started.communicate(timeout)
    return subprocess.CompletedProcess(started.args, started.returncode, out, err)
