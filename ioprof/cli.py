"""Command line: one parser built from the command modules, and the one error boundary.

Exit codes: 0 success; 2 bad usage (argparse); 1 any other problem the user can fix,
printed as one line ``ioprof: error: …``; 130 interrupted (finished cells are kept).
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from ioprof.core.errors import IoprofError
from ioprof.core.version import __version__
from ioprof.host.processes import quick_exit

# Subcommands in the order ``ioprof --help`` lists them; each is ioprof.commands.<name>.
COMMANDS = (
    "sweep",
    "run",
    "whatif",
    "profile",
    "scale",
    "devices",
    "probe",
    "place",
    "compare",
    "gen",
    "report",
    "env",
)


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"ioprof.commands.{name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ioprof",
        description="Why is my PyTorch image training slow? Storage, CPU decode or GPU compute — measured.",
    )
    parser.add_argument("--version", action="version", version=f"ioprof {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = _module(name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    ns = build_parser().parse_args(args)
    from ioprof.render.terminal import TerminalProgress

    try:
        return int(_module(ns.command).run_from_args(ns, "ioprof " + shlex.join(args), TerminalProgress()))
    except IoprofError as e:
        print(f"ioprof: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ioprof: interrupted", file=sys.stderr)
        return 130


def console(argv: Sequence[str] | None = None) -> NoReturn:
    """The program (``ioprof`` and ``python -m ioprof``): ``main``, then a quick exit."""
    code: int | str | None
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's usage errors, --help and --version
        code = e.code
    quick_exit(code)
