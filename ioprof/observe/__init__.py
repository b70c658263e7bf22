"""Observing a user's own process: ``ioprof run -- python train.py`` (``run``) and
``ioprof.watch()`` (``observer``), in their process, changing nothing they wrote. ``window``
keeps each loader's measured window; ``producers`` tells whom the loop waits for and what it did
meanwhile; ``probe`` measures the user's
pipeline alone in a pause of their training; ``result`` turns what every process saw into a result.

An entry point (it runs inside the user's process): it may use ``ioprof.measure``,
``ioprof.datasets``, ``ioprof.host``, ``ioprof.core``, and the conclusions and renderers.
"""

__all__ = ["observer", "probe", "producers", "result", "run", "window"]
