"""Attaching to a process started by ``ioprof run``: its ``sitecustomize`` calls ``attach_from_env``,
which installs the watcher once torch's DataLoader and optimizer modules are imported."""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ioprof.observe.observer import Watcher
from ioprof.observe.watching import ENV, WatchConfig

_ACTIVE: Watcher | None = None


_PATCH_AFTER = ("torch.utils.data.dataloader", "torch.optim.optimizer")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Installs the watcher as soon as torch's DataLoader and optimizer modules are imported,
    without importing torch itself into every process ``ioprof run`` starts."""

    def __init__(self, on_ready: Callable[[], None]) -> None:
        self._on_ready = on_ready
        self._seen: set[str] = set()
        self._wrapped: set[str] = set()

    def complete(self, name: str) -> bool:
        """Fully imported: through this finder, or before it was installed."""
        return name in self._seen or (name in sys.modules and name not in self._wrapped)

    def find_spec(self, name: str, path: Sequence[str] | None = None, target: Any = None) -> Any:
        if name not in _PATCH_AFTER or name in self._wrapped:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module
        self._wrapped.add(name)

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            self._seen.add(name)
            if all(self.complete(m) for m in _PATCH_AFTER):
                self._on_ready()

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def attach_from_env() -> Watcher | None:
    """Attach to this process if ``ioprof run`` asked for it (``IOPROF_WATCH``)."""
    global _ACTIVE
    raw = os.environ.get(ENV)
    if not raw or _ACTIVE is not None:
        return _ACTIVE
    try:
        import psutil  # noqa: F401  (the observer reads the loader's processes through it)
    except ImportError:
        sys.stderr.write("ioprof: cannot observe this process: psutil is not installed in this Python\n")
        return None
    watcher = Watcher(WatchConfig(**json.loads(raw)))
    _ACTIVE = watcher
    installed = threading.Event()

    def ready() -> None:
        if not installed.is_set():
            installed.set()
            watcher.install()

    if all(m in sys.modules for m in _PATCH_AFTER):
        ready()
    else:
        sys.meta_path.insert(0, _AfterImport(ready))
    own_hook = sys.excepthook

    def excepthook(kind: Any, error: BaseException, tb: Any) -> None:
        own_hook(kind, error, tb)
        watcher.failed(error)

    sys.excepthook = excepthook

    attached_in = os.getpid()

    def probe_at_exit() -> None:
        if os.getpid() != attached_in:
            return  # a forked worker ending (multiprocessing runs threading's exit hooks in it)
        try:
            watcher.at_exit()
        except Exception as e:  # a probe at exit must never change how the script ends
            watcher.errors.append(f"{type(e).__name__}: {e}"[:300])

    def at_exit() -> None:
        if os.getpid() == attached_in and (watcher.loaders or watcher.optimizer_steps):
            watcher.stop_readings()
            watcher.write("exit")

    # The probe at exit runs while the interpreter is still whole: threading's own exit hooks
    # run before any atexit function, multiprocessing's among them (a probe starts workers).
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(probe_at_exit)
        atexit.register(at_exit)
    else:  # a Python without it: both at exit, the probe first (atexit runs them last in, first out)
        atexit.register(at_exit)
        atexit.register(probe_at_exit)
    return watcher
