"""The command reference in ``docs/`` says what the parser accepts: the same commands, each with
the same options (compared by name, so another Python's help layout does not matter)."""

from __future__ import annotations

import re

import paths

from ioprof.reference import markdown

REFERENCE = paths.REPO / "docs" / "reference.md"


def _options_by_command(text: str) -> dict[str, set[str]]:
    """Each heading's command and the option names its help lists."""
    out: dict[str, set[str]] = {}
    command = ""
    for line in text.splitlines():
        heading = re.match(r"^#{2,3} (ioprof .+)$", line)
        if heading:
            command = heading.group(1)
            out[command] = set()
        elif command:
            out[command] |= set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line))
    return out


def test_the_reference_lists_every_command_and_option_the_parser_has() -> None:
    written = _options_by_command(REFERENCE.read_text())
    parsed = _options_by_command(markdown())
    assert written.keys() == parsed.keys(), "regenerate: python -m ioprof.reference > docs/reference.md"
    for command, options in parsed.items():
        assert written[command] == options, (
            f"{command}: regenerate docs/reference.md (python -m ioprof.reference > docs/reference.md)"
        )
    assert "--workers" in parsed["ioprof sweep"] and "--stop-after" in parsed["ioprof run"]


def test_the_readme_is_a_short_guide_whose_links_into_docs_lead_somewhere() -> None:
    readme = (paths.REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)\)", readme)
    assert "docs/reference.md" in links and "docs/method.md" in links
    missing = [link for link in links if not (paths.REPO / link).is_file()]
    assert not missing, missing
    for doc in (paths.REPO / "docs").glob("*.md"):
        for link in re.findall(r"\]\(([\w./-]+\.md)\)", doc.read_text()):
            assert (doc.parent / link).is_file(), f"{doc.name}: {link}"


def test_every_command_line_the_docs_show_is_one_the_parser_accepts() -> None:
    """A command copied from the README or a page of ``docs/`` runs as written: each line of a code
    block that calls ``python -m ioprof`` parses, its optional parts given (a renamed option or
    command fails here)."""
    import contextlib
    import io
    import shlex

    from ioprof.cli import build_parser

    parser = build_parser()
    pages = [paths.REPO / "README.md", *sorted((paths.REPO / "docs").glob("*.md"))]
    refused, checked = [], 0
    for page in pages:
        blocks = re.findall(r"```[a-z]*\n(.*?)```", page.read_text(), flags=re.S)
        for line in (ln for block in blocks for ln in block.splitlines()):
            command = line.split("#")[0].strip()
            if "python -m ioprof " not in command or command.startswith(("usage", "Written")):
                continue
            tail = command.split("python -m ioprof ", 1)[1].split("&&")[0]
            # [--option VALUE]: the option given; A|B: the first of the choices
            words = [w.strip("[]").split("|")[0] for w in shlex.split(tail)]
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    parser.parse_args(words)
                checked += 1
            except SystemExit:
                refused.append(f"{page.name}: {command}")
    assert not refused, refused
    assert checked >= 20, checked  # the pages' examples were found
