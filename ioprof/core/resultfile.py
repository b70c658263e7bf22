"""``results.json``: one generic codec for every result, atomic writes, and schema migrations.

``save`` writes atomically (temporary file, then rename) with the permissions the user's umask
gives a new file, so that an interrupted run keeps every finished cell and a teammate can read
the report. ``load`` rebuilds the measurements only: verdicts, advice and findings are
recomputed by the caller. A file of an older schema version is brought up to date by the
migration steps in ``MIGRATIONS``, one version at a time; a newer one is refused with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ioprof.core import findings, findings_place, findings_run, findings_whatif
from ioprof.core.errors import IoprofError
from ioprof.core.results import SCHEMA_VERSION, SweepResult
from ioprof.core.results_devices import DevicesResult
from ioprof.core.results_place import PlaceResult
from ioprof.core.results_profile import ProfileResult
from ioprof.core.results_scale import ScaleResult
from ioprof.core.results_whatif import WhatifResult

AnyResult = SweepResult | PlaceResult | WhatifResult | ProfileResult | ScaleResult | DevicesResult

T = TypeVar("T")

# Conclusions, not measurements: written for readers, recomputed (not loaded) when rendering.
RECOMPUTED = frozenset(
    {"verdict", "analysis", "decisions", "recommendation", "ranking", "prediction", "conclusion"}
)


def to_jsonable(obj: Any) -> Any:
    """Dataclasses → dicts (plus their derived figures and a finding's kind), tuples → lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        if isinstance(obj, findings.Finding):
            out["kind"] = obj.kind
        out.update({f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)})
        derived = getattr(obj, "derived", None)
        if callable(derived):  # figures for readers of the file; ignored on load
            out.update(to_jsonable(derived()))
        return out
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    return obj


def _from(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        non_none = [a for a in args if a is not type(None)]
        return _from(non_none[0], value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_jsonable(tp, value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from(args[0], v) for v in value)
        if args:
            return tuple(_from(a, v) for a, v in zip(args, value, strict=True))
        return tuple(value)
    if tp is float:
        # A plain float written as null was NaN or ±inf when saved: an unknown (an interval with
        # too few groups). It comes back as NaN, which every renderer says is unknown.
        return math.nan if value is None else float(value)
    return value


# the conclusions' types, which results name for type checking only
_CONCLUSIONS = {**vars(findings), **vars(findings_place), **vars(findings_run), **vars(findings_whatif)}


def from_jsonable(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a dataclass tree from ``to_jsonable``'s output (unknown keys and conclusions skipped)."""
    hints = typing.get_type_hints(cls, localns=_CONCLUSIONS)
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data and f.name not in RECOMPUTED:
            kwargs[f.name] = _from(hints[f.name], data[f.name])
    return cls(**kwargs)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half.

    The file gets the mode a plain ``open()`` would give it (0666 less the umask), not the 0600
    of a temporary file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save(result: AnyResult, path: Path) -> None:
    atomic_write_text(path, json.dumps(to_jsonable(result), indent=2) + "\n")


def _migrate_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 → 2: per-step images and bytes, fetched bytes with their method, raw decode and
    storage samples did not exist. What version 1 measured is kept; what it did not is marked
    unknown (no interval, bytes fetched counted only by block I/O where that was the counter)."""
    for cell in data.get("cells", []):
        steps = int(cell.get("steps", 0))
        per = int(cell.get("images", 0)) // steps if steps else 0
        cell.setdefault("images_per_step", [per] * steps)
        io = cell.get("io") or {}
        if "read_bytes" in io:
            cell.setdefault(
                "fetched", {"bytes": io["read_bytes"], "method": "block-io", "source": "schema 1"}
            )
        cell.setdefault("bytes_per_step", [])
    warnings = data.pop("warnings", [])
    data.setdefault(
        "probe_failures",
        [{"dataset": "", "stage": "decode", "setting": "", "error": w} for w in warnings if "failed" in w],
    )
    data["schema_version"] = 2
    return data


# schema version → the step that brings a file of that version to the next one
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _migrate_1_to_2}


def migrate(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Bring ``data`` up to SCHEMA_VERSION, one step at a time; refuse what cannot be."""
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise IoprofError(f"{where}: not an ioprof results.json (no schema_version)")
    if version > SCHEMA_VERSION:
        raise IoprofError(
            f"{where}: schema_version {version} is newer than the {SCHEMA_VERSION} this ioprof reads; "
            "upgrade ioprof (pip install -U ioprof) to read it"
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise IoprofError(
                f"{where}: schema_version {version} cannot be read by this ioprof; re-run the measurement"
            )
        data = step(data)
        version = data["schema_version"]
    return data


def load(path: str | os.PathLike[str]) -> AnyResult:
    """Read a ``results.json`` (older schemas migrated); conclusions are left to recompute."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IoprofError(f"{p}: no such file; pass the results.json of a finished run") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IoprofError(f"{p}: not a readable results.json ({e})") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise IoprofError(f"{p}: not an ioprof results.json (no schema_version)")
    data = migrate(data, str(p))
    try:
        if data.get("kind") == "place":
            return from_jsonable(PlaceResult, data)
        if data.get("kind") == "whatif":
            return from_jsonable(WhatifResult, data)
        if data.get("kind") == "profile":
            return from_jsonable(ProfileResult, data)
        if data.get("kind") == "scale":
            return from_jsonable(ScaleResult, data)
        if data.get("kind") == "devices":
            return from_jsonable(DevicesResult, data)
        return from_jsonable(SweepResult, data)
    except (TypeError, KeyError, ValueError, IndexError) as e:
        raise IoprofError(f"{p}: results.json is damaged or incomplete ({e})") from None
