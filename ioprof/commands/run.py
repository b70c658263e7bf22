"""``ioprof run -- python train.py …``: the user's own training, unchanged, with ioprof attached.

The command runs in a child process with its stdout and stderr untouched. A ``sitecustomize``
on its ``PYTHONPATH`` attaches the observer (``observer.attach_from_env``) to every Python process
it starts — each rank under ``torchrun`` too. The observer writes what it saw into the output
folder; this process writes results.json and report.md as soon as a training window is measured
(the script goes on), and again when the script ends. The script's exit code is passed through;
``--stop-after`` ends the script once the window (and the probes) are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ioprof.commands import args, prepare_out_dir, writing_into
from ioprof.core.config import RunConfig, non_negative_int, positive_float, positive_int
from ioprof.core.errors import IoprofError

if TYPE_CHECKING:
    from ioprof.core.results import SweepResult
    from ioprof.measure.session import Progress

NAME = "run"
HELP = "run your own training command with ioprof attached: data wait, ceilings and verdict of its loaders"
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
        import ioprof.observer as _ioprof_watch
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = RunConfig()
    p.add_argument(
        "--steps",
        type=args.typed(positive_int, "steps"),
        default=argparse.SUPPRESS,
        help=f"batches measured per loader after warm-up (default {d.steps})",
    )
    p.add_argument(
        "--seconds",
        type=args.typed(positive_float, "seconds"),
        default=argparse.SUPPRESS,
        help=f"at most this long per loader's window (default {d.seconds:g})",
    )
    p.add_argument(
        "--warmup-steps",
        type=args.typed(non_negative_int, "warmup-steps"),
        default=argparse.SUPPRESS,
        help=f"batches skipped before measuring, plus one per loader worker (default {d.warmup_steps})",
    )
    p.add_argument(
        "--stop-after",
        action="store_true",
        default=argparse.SUPPRESS,
        help="end the script once the window and the probes are measured (default: let it run to its end)",
    )
    p.add_argument(
        "--no-probe",
        dest="probe",
        action="store_false",
        default=argparse.SUPPRESS,
        help="do not measure your loader alone after the window (it pauses your training about 15-30 s)",
    )
    p.add_argument(
        "--probe-seconds",
        type=args.typed(positive_float, "probe-seconds"),
        default=argparse.SUPPRESS,
        help=f"each measurement of your loader alone runs at least this long, at most 3x (default {d.probe_seconds:g})",
    )
    args.add_out(p)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="your training command, after --, e.g. -- python train.py --epochs 1")  # fmt: skip


def run_from_args(ns: argparse.Namespace, command_line: str, progress: Progress) -> int:
    command = tuple(ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv)
    return run(args.config_from(RunConfig, ns, command=command), command_line, progress)


def _check_command(command: tuple[str, ...]) -> None:
    if not command:
        raise IoprofError("give the command to run after --, e.g. ioprof run -- python train.py")
    exe = command[0]
    if shutil.which(exe) is None and not (os.sep in exe and os.access(exe, os.X_OK)):
        raise IoprofError(
            f"-- {exe}: no such command; give the command to run, e.g. ioprof run -- python train.py"
        )


def child_env(attach_dir: str, observed: Path, config: RunConfig) -> dict[str, str]:
    """The child's environment: ours, plus the attaching sitecustomize and what to watch."""
    from ioprof.observer import ENV, WatchConfig

    watch = WatchConfig(
        out_dir=str(observed), warmup_steps=config.warmup_steps, steps=config.steps, seconds=config.seconds,
        probe=config.probe, probe_seconds=config.probe_seconds,
    )  # fmt: skip
    path = os.pathsep.join(p for p in (attach_dir, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, ENV: json.dumps(asdict(watch))}


def run(config: RunConfig, command_line: str, progress: Progress) -> int:
    """Run the user's command, watched; write the report; return the command's exit code."""
    import ioprof

    _check_command(config.command)
    out = prepare_out_dir(config.out_dir, NAME)
    observed = out / "observed"
    observed.mkdir(exist_ok=True)
    for stale in observed.glob("observed-*.json"):  # an earlier run into the same --out: not this one's
        stale.unlink()
    with tempfile.TemporaryDirectory(prefix="ioprof-attach-") as attach:
        parent = str(Path(ioprof.__file__).resolve().parent.parent)
        (Path(attach) / "sitecustomize.py").write_text(SITECUSTOMIZE.format(parent=parent))
        progress(f"running {' '.join(config.command)} with ioprof attached; results go to {out}/")
        started = time.time()
        proc = subprocess.Popen(list(config.command), env=child_env(attach, observed, config))
        code, ended = _supervise(proc, config, observed, out, started, progress)
    result = _write(config, observed, out, started, code, ended)
    _say(result, out, code, ended)
    return 0 if ended == "stopped-by-ioprof" else code


def _supervise(
    proc: subprocess.Popen[bytes],
    config: RunConfig,
    observed: Path,
    out: Path,
    started: float,
    progress: Progress,
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
                _write(config, observed, out, started, None, "running")
                progress(
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


def _observations(observed: Path) -> list[dict[str, Any]]:
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


def _write(
    config: RunConfig, observed: Path, out: Path, started: float, code: int | None, ended: str
) -> SweepResult:
    from ioprof.analysis import analyze
    from ioprof.core import resultfile
    from ioprof.render import write_report
    from ioprof.userpipeline import build_result

    result = analyze(
        build_result(
            _observations(observed),
            command=" ".join(config.command),
            exit_code=code,
            ended=ended,
            config=config,
            started=started,
        )
    )
    with writing_into(out):
        resultfile.save(result, out / "results.json")
        write_report(result, out)
    return result


def _say(result: SweepResult, out: Path, code: int, ended: str) -> None:
    """One line on stderr: what was observed, and where the report is (the script's stdout is its own)."""
    from ioprof.render import words

    print(f"ioprof: {words.run_summary(result, code, ended)} Report: {out / 'report.md'}", file=sys.stderr)
