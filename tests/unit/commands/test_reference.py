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
