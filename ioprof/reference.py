"""The command reference, written from the parser: ``python -m ioprof.reference > docs/reference.md``.

Each command's ``--help`` at a fixed width, under its own heading, so the reference says what
the parser accepts and nothing else (a unit test compares the two).
"""

from __future__ import annotations

import argparse
import functools

from ioprof.cli import COMMANDS, build_parser

WIDTH = 100


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name (argparse keeps them on its one subparsers action)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = functools.partial(argparse.HelpFormatter, width=WIDTH)
    return parser.format_help().rstrip()


def _sections(parser: argparse.ArgumentParser, name: str, level: int) -> list[str]:
    """A command's help under its heading, then its own subcommands' (``probe storage``…)."""
    out = ["", f"{'#' * level} {name}", "", "```", _help(parser), "```"]
    for sub, p in _subparsers(parser).items():
        out += _sections(p, f"{name} {sub}", level + 1)
    return out


def markdown() -> str:
    """The whole reference: the program's help, then each command's, in ``--help``'s order."""
    parser = build_parser()
    commands = _subparsers(parser)
    out = [
        "# Command reference",
        "",
        "Written from the parser by `python -m ioprof.reference > docs/reference.md`; do not edit by hand.",
        "",
        "```",
        _help(parser),
        "```",
    ]
    for name in COMMANDS:
        out += _sections(commands[name], f"ioprof {name}", 2)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
