"""Rendering: finished, concluded results in; report.md, CSV and plots out. Pure: no measuring,
no torch. One module per command with the command's name — ``sweep`` (a sweep or a probe),
``run``, ``place``, ``whatif``, ``compare``, ``scale``, ``devices``, ``profile`` — each with its
``write(result, out_dir)`` and ``headline(result)``; ``kinds`` is the one table from a result's
kind to its conclusion, writer and headline. Shared: ``words`` (every sentence), ``plots``,
``frames`` (pandas, for notebooks and results.csv), ``fmt``, ``mdtable``, ``results_csv``,
``terminal`` (progress lines).

May import: ``ioprof.conclude``, ``ioprof.core``.
"""

__all__ = [
    "compare",
    "devices",
    "fmt",
    "frames",
    "kinds",
    "mdtable",
    "place",
    "plots",
    "profile",
    "results_csv",
    "run",
    "scale",
    "sweep",
    "terminal",
    "whatif",
    "words",
]
