"""The layers, read from the folders: a module is covered the day it is added to one.

Imports point one way: entry points (``cli``, ``commands/``, ``observe/``, ``notebook``) →
``runners/`` → ``sources/`` → ``measure/`` → ``datasets/`` → ``host/`` → ``core/``, and entry points →
``render/`` → ``conclude/`` → ``core/``. ``core``, ``conclude`` and ``render`` never load torch
or NVML; nothing below the runners imports a renderer; no module imports itself back through
others (no cycles, lazy imports included); no function is longer than 80 lines, no module longer
than 700.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import paths

REPO = paths.REPO


PACKAGE = REPO / "ioprof"


# what each layer may import, besides itself
MAY_IMPORT = {
    "core": set(),
    "host": {"core"},
    "datasets": {"core", "host"},
    "measure": {"core", "host", "datasets"},
    "sources": {"core", "host", "datasets", "measure"},
    "runners": {"core", "host", "datasets", "measure", "sources"},
    "conclude": {"core"},
    "render": {"core", "conclude"},
}


PURE = ("core", "conclude", "render")


def _modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = f.relative_to(REPO).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _layer(module: str) -> str:
    """The folder a module lives in ("" for the package's top level: entry points)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else ""


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The ioprof modules ``module`` imports, at the top or inside functions (``from pkg import
    sub`` imports the submodule ``pkg.sub``, not ``pkg``'s own code)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            out |= subs
            if len(subs) < len(node.names):
                out.add(node.module)
    return {m for m in out if m in known and m != module}


def test_imports_point_one_way() -> None:
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        layer = _layer(name)
        if layer not in MAY_IMPORT:
            continue
        for dep in _imports(name, path, set(modules)):
            target = _layer(dep)
            if target and target != layer and target not in MAY_IMPORT[layer]:
                wrong.append(f"{name} ({layer}) imports {dep} ({target})")
            if not target:
                wrong.append(f"{name} ({layer}) imports the entry point {dep}")
    assert wrong == []


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {n: _imports(n, p, set(modules)) for n, p in modules.items()}
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" → ".join([*trail[trail.index(nxt) :], nxt]) if nxt in trail else nxt)
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])
    assert cycles == []


def test_core_conclusions_and_renderers_load_neither_torch_nor_nvml() -> None:
    pure = sorted(n for n in _modules() if _layer(n) in PURE)
    assert len(pure) > 20  # the folders are where they should be
    code = (
        f"import sys; import {', '.join(pure)};"
        "print(sorted(m for m in ('torch', 'pynvml', 'torchvision') if m in sys.modules))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert p.stdout.strip() == "[]"


def test_no_function_is_longer_than_80_lines() -> None:
    long = []
    for f in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno:
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    long.append(f"{f.relative_to(REPO)}:{node.lineno} {node.name} ({length} lines)")
    assert long == []


def test_no_module_is_longer_than_700_lines() -> None:
    """A module a reader can hold: a longer one is split along the lines its functions follow."""
    long = [
        f"{f.relative_to(REPO)} ({n} lines)"
        for f in sorted(PACKAGE.rglob("*.py"))
        if (n := len(f.read_text().splitlines())) > 700
    ]
    assert long == []
