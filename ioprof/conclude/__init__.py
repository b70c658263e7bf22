"""Conclusions, pure: a result in, the same result with its conclusions out — no torch, no I/O, no
words. One module per command with the command's name, each with its ``conclude(result)``:
``sweep`` (verdicts, advice; also a user's own run), ``checks`` (the sweep's findings), ``place``
(the one placement decision), ``whatif`` (alternatives against their controls), ``compare`` (runs
against a reference), ``scale`` (how many ranks stay busy), ``devices`` (whether another GPU pays),
``profile`` (the epoch predicted).

May import: ``ioprof.core``.
"""

__all__ = ["checks", "compare", "devices", "place", "profile", "scale", "sweep", "whatif"]
