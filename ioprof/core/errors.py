"""The one exception type for problems the user can fix."""

from __future__ import annotations


class IoprofError(Exception):
    """A problem the user can fix: the message names the flag or path to change.

    The CLI prints it as one line, ``ioprof: error: <message>``, and exits 1.
    Programming errors are not IoprofErrors; they keep their tracebacks.
    """
