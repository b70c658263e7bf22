"""DESIGN's one-way dependencies: deciding and rendering never load torch or pynvml; measuring
never imports a renderer; only render/ writes sentences about results."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PURE = ("conclude", "core", "render")
MEASURING = (
    "measure", "host", "runners", "datasets",
)  # fmt: skip


def test_analysis_and_renderers_load_neither_torch_nor_nvml() -> None:
    code = (
        f"import sys; import {', '.join('ioprof.' + m for m in PURE)};"
        "print(sorted(m for m in ('torch', 'pynvml', 'torchvision') if m in sys.modules))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert p.stdout.strip() == "[]"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_measuring_code_never_imports_a_renderer() -> None:
    offenders = []
    for name in MEASURING:
        target = REPO / "ioprof" / name
        files = sorted(target.rglob("*.py")) if target.is_dir() else [target.with_suffix(".py")]
        for f in files:
            if any(m.startswith("ioprof.render") for m in _imports(f)):
                offenders.append(str(f.relative_to(REPO)))
    assert offenders == []


def test_no_function_is_longer_than_80_lines() -> None:
    long = []
    for f in sorted((REPO / "ioprof").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno:
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    long.append(f"{f.relative_to(REPO)}:{node.lineno} {node.name} ({length} lines)")
    assert long == []
