"""Running a user's training command with ioprof attached, and turning what it saw into results.

The command runs in a child process with its stdout and stderr untouched. A ``sitecustomize``
on its ``PYTHONPATH`` attaches the observer (``observer.attach_from_env``) to every Python process
it starts — each rank under ``torchrun`` too. The observer writes what it saw into the output
folder's ``observed/``; ``watch_command`` reads it back as results (``result.build_result``) as
soon as every rank's training window is measured (the script goes on) and again when the script
ends, and hands each to the caller. ``--stop-after`` ends the script once the window (and the
probes) are measured.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from ioprof.core.config import RunConfig
from ioprof.core.results import SweepResult
from ioprof.observe.observation import Observation

_POLL_S = 0.25

SITECUSTOMIZE = """\
# Written by `ioprof run`: attach ioprof to this Python process, then run the sitecustomize
# this one stands in front of, if any. Delete-safe: it lives in a temporary folder.
import os as _os
import sys as _sys

_here = _os.path.dirname(_os.path.abspath(__file__))
_parent = {parent!r}
try:
    _sys.path.insert(0, _parent)
    try:
        import ioprof.observe.attach as _ioprof_watch
    finally:
        _sys.path.remove(_parent)
    _ioprof_watch.attach_from_env()
except Exception as _e:
    _sys.stderr.write(f"ioprof: could not attach to this process ({{type(_e).__name__}}: {{_e}})\\n")
import importlib.machinery as _machinery
import importlib.util as _util

_spec = _machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
)
if _spec is not None and _spec.loader is not None:
    _module = _util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
"""


def child_env(attach_dir: str, observed: Path, config: RunConfig) -> dict[str, str]:
    """The child's environment: ours, plus the attaching sitecustomize and what to watch."""
    from ioprof.observe.watching import ENV, WatchConfig

    watch = WatchConfig(
        out_dir=str(observed),
        warmup_steps=config.warmup_steps,
        steps=config.steps,
        seconds=config.seconds,
        probe=config.probe,
        probe_seconds=config.probe_seconds,
        inside=config.inside,
    )
    path = os.pathsep.join(p for p in (attach_dir, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, ENV: json.dumps(asdict(watch))}


Report = Callable[[SweepResult], None]


def watch_command(
    config: RunConfig, out: Path, report: Report, say: Callable[[str], None]
) -> tuple[int, str]:
    """Run the user's command, watched; ``report`` each result (when the windows are measured,
    and at the end); return (the command's exit code, how it ended)."""
    import ioprof

    observed = out / "observed"
    observed.mkdir(exist_ok=True)
    for stale in observed.glob("observed-*.json"):  # an earlier run into the same --out: not this one's
        stale.unlink()
    rows = observed / "stages"  # the workers' stage rows (``measure.stages``), read by each rank
    shutil.rmtree(rows, ignore_errors=True)
    rows.mkdir()
    with tempfile.TemporaryDirectory(prefix="ioprof-attach-") as attach:
        parent = str(Path(ioprof.__file__).resolve().parent.parent)
        (Path(attach) / "sitecustomize.py").write_text(SITECUSTOMIZE.format(parent=parent))
        say(f"running {' '.join(config.command)} with ioprof attached; results go to {out}/")
        started = time.time()
        proc = subprocess.Popen(list(config.command), env=child_env(attach, observed, config))

        def reported(code: int | None, ended: str) -> SweepResult:
            result = results(config, observed, started, code, ended)
            report(result)
            return result

        code, ended = _supervise(proc, config, observed, out, reported, say)
    reported(code, ended)
    shutil.rmtree(rows, ignore_errors=True)
    return code, ended


def _supervise(
    proc: subprocess.Popen[bytes],
    config: RunConfig,
    observed: Path,
    out: Path,
    report: Callable[[int | None, str], SweepResult],
    say: Callable[[str], None],
) -> tuple[int, str]:
    """Wait for the command; report as soon as its windows are measured; stop it if asked."""
    interrupted = []
    old = signal.signal(signal.SIGINT, lambda *_: interrupted.append(True))  # the child gets Ctrl-C too
    reported = stopped = False
    try:
        while proc.poll() is None:
            time.sleep(_POLL_S)
            windows = _windows_done(observed)
            if windows and not reported:
                report(None, "running")
                say(
                    f"window measured; report written to {out / 'report.md'}"
                    + ("" if config.stop_after else "; your script goes on")
                )
                reported = True
            if config.stop_after and windows and not stopped:
                proc.terminate()  # torchrun passes it to its ranks
                stopped = True
    finally:
        signal.signal(signal.SIGINT, old)
    code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    if stopped:
        return code, "stopped-by-ioprof"
    if interrupted or code in (130, 128 + signal.SIGINT):
        return code, "interrupted"
    return code, "finished" if code == 0 else "failed"


def _observations(observed: Path) -> list[Observation]:
    out = []
    for f in sorted(observed.glob("observed-*.json")):
        try:
            out.append(json.loads(f.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue  # being replaced right now: read it next time
    return [o for o in out if o.get("loaders")]


def _windows_done(observed: Path) -> bool:
    """Every rank has measured its training window."""
    obs = _observations(observed)
    ranks = {
        o["rank"]
        for o in obs
        if any(lo["role"] == "training" and lo["window"] == "complete" for lo in o["loaders"])
    }
    return bool(obs) and len(ranks) >= max(o.get("world_size", 1) for o in obs)


def results(config: RunConfig, observed: Path, started: float, code: int | None, ended: str) -> SweepResult:
    """Every process's observations so far, as one result (not yet concluded)."""
    from ioprof.observe.result import build_result

    return build_result(
        _observations(observed),
        command=" ".join(config.command),
        exit_code=code,
        ended=ended,
        config=config,
        started=started,
    )
