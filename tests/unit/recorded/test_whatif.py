"""``ioprof whatif``'s ranking and words on recorded runs whose winner is known (recorded by
``python tests/support/record.py whatif``): a compute-bound baseline that nothing helps, and large
images on one decode-bound worker, which a pre-resized copy helps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay import replay

from ioprof.render.kinds import kind_of


def _ranked(data: dict[str, Any]) -> dict[str, tuple[float, bool]]:
    return {r["name"]: (r["gain"], r["beyond_noise"]) for r in data["ranking"]["ranked"]}


def test_a_compute_bound_run_is_told_nothing_helps() -> None:
    result, data = replay("whatif/compute-bound")
    assert data["ranking"]["best"] == "" and data["ranking"]["compute_bound"] is True
    headline = kind_of(result).headline(result)
    assert headline.startswith("Nothing beats your current setting") and "compute-bound" in headline
    names = {a["name"]: a for a in data["alternatives"]}
    assert names["gpu_decode"]["why_not"] == "needs-cuda" and names["pin_memory"]["measured"] is False


def test_large_images_on_one_decode_bound_worker_prefer_a_pre_resized_copy(tmp_path: Path) -> None:
    result, data = replay("whatif/large-images")
    assert data["ranking"]["best"] in ("resized-256", "resized-320")
    ranked = _ranked(data)
    # both copies decode far faster than the originals; which of the two wins is not asserted
    for name in ("resized-256", "resized-320"):
        gain, beyond = ranked[name]
        assert gain > 1.5 and beyond, data["ranking"]
    resized = next(a for a in data["alternatives"] if a["name"] == "resized-256")
    # the scratch folder is on the data's own filesystem: no control needed, the gain is measured there
    assert resized["prep_bytes"] < resized["sample_bytes"] and resized["where"] == "data"
    assert "loose-on-scratch" not in ranked
    report = kind_of(result).write(result, tmp_path).read_text()
    assert "## What to change" in report and "pre-resized to a 256 px short side" in report
