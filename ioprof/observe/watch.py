"""Watching from code: ``with ioprof.watch(): train()``, or ``for batch in ioprof.watch(loader)``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from ioprof.core.results import SweepResult
from ioprof.observe.observer import Watcher
from ioprof.observe.watching import WatchConfig


class Watch:
    """Observes the DataLoaders and optimizer steps of a block of code (or of one loader)."""

    def __init__(
        self, loader: Any = None, config: WatchConfig | None = None, *, marks: Callable[[], Any] | None = None
    ) -> None:
        self._only = loader
        self.config = config or WatchConfig()
        self.watcher = Watcher(replace(self.config, out_dir=""), only=loader, marks=marks)
        self._started = time.time()

    def __enter__(self) -> Watch:
        self.watcher.install()
        return self

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        self.watcher.uninstall()
        self.watcher.stop_samplers()
        if isinstance(error, BaseException):
            self.watcher.failed(error)

    def __iter__(self) -> Iterator[Any]:
        """``for batch in ioprof.watch(loader)``: iterate that loader, watched."""
        if self._only is None:
            raise TypeError(
                "ioprof.watch() without a loader is used as a context manager: with ioprof.watch(): ..."
            )
        with self:
            yield from self._only

    def result(self) -> SweepResult:
        """The observed run as a result (like ``ioprof run``'s results.json), analyzed."""
        from ioprof.observe.result import build_result
        from ioprof.render import kinds

        observations = [self.watcher.observation()]
        result = build_result(
            observations,
            command="ioprof.watch()",
            exit_code=None,
            ended="running",
            config=self.config,
            started=self._started,
        )
        return kinds.conclude(result)

    def write_report(self, out_dir: str) -> str:
        """Write results.json, report.md and plots into ``out_dir``; returns report.md's path."""
        from pathlib import Path

        from ioprof.core import resultfile
        from ioprof.render import kinds

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        result = self.result()
        resultfile.save(result, out / "results.json")
        return str(kinds.write(result, out))

    def verdict(self) -> str:
        """The verdict in one line."""
        from ioprof.render import kinds

        return kinds.headline(self.result())


def watch(loader: Any = None, *, steps: int = 100, seconds: float | None = 60.0, probe: bool = True) -> Watch:
    """Watch your own training from code.

    ``with ioprof.watch() as w: train()`` observes every DataLoader and optimizer step inside the
    block; ``for batch in ioprof.watch(loader)`` observes one loader. Then ``w.verdict()``,
    ``w.result()`` or ``w.write_report(folder)``.
    """
    return Watch(loader, WatchConfig(steps=steps, seconds=seconds, probe=probe))
