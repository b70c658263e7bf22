"""The core: what every layer shares, and nothing that measures. No torch, no NVML, no pandas.

- ``config``: the frozen configs each command runs from, and the loader settings;
- ``results``: the measurements, frozen, with the unit in every field name;
- ``findings``: the conclusions' types (verdicts, advice, decisions, rankings), never sentences;
- ``resultfile``: results.json — one codec, atomic writes, schema migrations;
- ``stats``: pure statistics over raw samples (intervals, stopping looks);
- ``thresholds``, ``presets``: named constants with their sources;
- ``errors``: ``IoprofError``, what the user can fix, said in one line.

May import: the standard library and ``ioprof.core`` itself.
"""

__all__ = ["config", "errors", "findings", "presets", "resultfile", "results", "stats", "thresholds"]
