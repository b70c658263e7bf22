"""The ioprof command line as a user runs it: ``python -m ioprof …`` in a process of its own, from
this checkout, its output captured (forked from ``cliserver``, which paid the imports once)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import cliserver
from paths import REPO

_OUTPUT = Path(tempfile.mkdtemp(prefix="ioprof-cli-"))  # the forked commands' stdout and stderr
atexit.register(shutil.rmtree, _OUTPUT, True)


def _env(env: dict[str, str] | None) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(env or {})}


def ioprof(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    preexec_fn: Callable[[], None] | None = None,
    fresh: bool = False,
    prefix: tuple[str, ...] = (),
    cgroup_procs: Path | None = None,
    cpus: set[int] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m ioprof ARGS``: through ``cliserver`` (the imports paid once), or as a fresh
    process where ``fresh`` or ``preexec_fn`` asks for one. ``prefix``: what it runs under (a
    network namespace's ``ip netns exec NAME``); ``cgroup_procs``: the ``cgroup.procs`` of a
    cgroup it runs in, with its workers (``slowdisk``'s throttle), from before its first read;
    ``cpus``: the cores it may run on, as under ``taskset -c``."""
    full_env = _env(env)
    if preexec_fn is None and not fresh:  # a forked child of a process that imported ioprof once
        done = cliserver.run(
            list(args),
            cwd=cwd or REPO,
            env=full_env,
            timeout=timeout,
            scratch=_OUTPUT,
            prefix=prefix,
            cgroup_procs=cgroup_procs,
            cpus=cpus,
        )
        if done is not None:
            return done
    if cgroup_procs is not None and preexec_fn is None:
        preexec_fn = partial(cgroup_procs.write_text, "0")  # "0": the process that writes it
    if cpus and preexec_fn is None:
        preexec_fn = partial(os.sched_setaffinity, 0, cpus)
    return subprocess.run(
        [*prefix, sys.executable, "-m", "ioprof", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=full_env,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def ioprof_start(
    *args: str,
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
    cgroup_procs: Path | None = None,
    fresh: bool = False,
) -> cliserver.Started | subprocess.Popen[str]:
    """``python -m ioprof ARGS`` started, not waited for, to be used as a ``subprocess.Popen``
    with ``stdout`` and ``stderr`` piped (``pid``, ``stderr`` read as it comes, ``send_signal``,
    ``communicate``, ``returncode``): forked from ``cliserver`` where its server is free, else a
    fresh process (always where ``fresh``). ``prefix`` and ``cgroup_procs`` as in ``ioprof``."""
    full_env = _env(env)
    started = None
    if not fresh:
        started = cliserver.start(
            list(args), cwd=REPO, env=full_env, scratch=_OUTPUT, prefix=prefix, cgroup_procs=cgroup_procs
        )
    if started is not None:
        return started
    return subprocess.Popen(
        [*prefix, sys.executable, "-m", "ioprof", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        preexec_fn=None if cgroup_procs is None else partial(cgroup_procs.write_text, "0"),
    )


def ioprof_run(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``ioprof run ARGS``: a training command under ioprof."""
    return ioprof("run", *args, cwd=cwd, timeout=timeout)


def until_cell(proc: cliserver.Started | subprocess.Popen[str], position: str = "[2/2]") -> None:
    """Read a running sweep's progress (its stderr) until the cell at ``position`` starts
    measuring — the moment to inject a fault under it."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if position in line and "measuring" in line:
            return
    raise AssertionError("".join(seen))
