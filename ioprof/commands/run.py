"""``ioprof run -- python train.py …``: the user's own training, unchanged, with ioprof attached
(``ioprof.observe.run``). results.json and report.md are written as soon as a training window is
measured (the script goes on), and again when the script ends. The script's exit code is passed
through; ``--stop-after`` ends the script once the window (and the probes) are measured.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ioprof.commands import args, prepare_out_dir, writing_into
from ioprof.commands.values import non_negative_int, positive_float
from ioprof.core.config import RunConfig
from ioprof.core.errors import IoprofError

if TYPE_CHECKING:
    from ioprof.core.results import SweepResult
    from ioprof.measure.session import Progress

NAME = "run"
HELP = "run your own training command with ioprof attached: data wait, ceilings and verdict of its loaders"
_POLL_S = 0.25


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = RunConfig()
    args.add_step_count(p, f"batches measured per loader after warm-up (default {d.steps})")
    args.add_seconds(p, f"at most this long per loader's window (default {d.seconds:g})")
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
        help="do not measure your loader alone after the window (it pauses your training about --probe-seconds)",
    )
    p.add_argument(
        "--probe-seconds",
        type=args.typed(positive_float, "probe-seconds"),
        default=argparse.SUPPRESS,
        help=f"the pause to measure your loader alone and its storage: its parts share it, each stopping sooner "
        f"once its interval is within ±\N{NO-BREAK SPACE}5\N{NO-BREAK SPACE}%% (default {d.probe_seconds:g})",
    )
    args.add_inside(p)
    args.add_out(p)
    p.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND",
        help="your training command, after --, e.g. -- python train.py --epochs 1",
    )


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


def run(config: RunConfig, command_line: str, progress: Progress) -> int:
    """Run the user's command, watched; write the report; return the command's exit code."""
    from ioprof.core import resultfile
    from ioprof.observe.run import watch_command
    from ioprof.render import kinds

    _check_command(config.command)
    out = prepare_out_dir(config.out_dir, NAME)
    last: list[SweepResult] = []

    def report(result: SweepResult) -> None:
        result = kinds.conclude(result)
        with writing_into(out):
            resultfile.save(result, out / "results.json")
            kinds.write(result, out)
        last[:] = [result]

    code, ended = watch_command(config, out, report, progress)
    _say(last[0], out, code, ended)
    return 0 if ended == "stopped-by-ioprof" else code


def _say(result: SweepResult, out: Path, code: int, ended: str) -> None:
    """One line on stderr: what was observed, and where the report is (the script's stdout is its own)."""
    from ioprof.render.run import run_summary

    print(f"ioprof: {run_summary(result, code, ended)} Report: {out / 'report.md'}", file=sys.stderr)
