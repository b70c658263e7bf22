"""``ioprof place``'s decision and words on a recorded run (``python tests/support/record.py
place``): a fast candidate folder, a missing one and an emulated slow location (0.05 MB/s) against
a step of 200 img/s. The data stays where it is; the slow location is limited by its storage."""

from __future__ import annotations

import json
from pathlib import Path

from replay import recorded, replay

from ioprof.render.kinds import kind_of


def test_fast_and_slow_candidates(tmp_path: Path) -> None:
    margins = json.loads((recorded("place") / "recorded.json").read_text())["margins"]
    result, data = replay("place/fast-and-slow")
    by = {d["label"]: d for d in data["decisions"]}
    assert by[margins["fast"]]["keeps_busy"] is True
    slow = by["custom:0.05:0 (emulated)"]
    assert slow["keeps_busy"] is False and slow["limited_by"] == "storage"
    # MLPerf Storage's figure: the accelerators of this compute each storage alone keeps 90 % busy,
    # from its fastest rate at the interval's low end — none for 0.05 MB/s against 200 img/s
    fed = {d.label: (d.accelerators_fed, d.accelerators_at) for d in result.decisions}
    assert fed["custom:0.05:0 (emulated)"][0] == 0
    for cand in result.candidates:
        if cand.status == "ok" and cand.storage:
            best = max(cand.storage, key=lambda s: s.file_rate().value)
            low = best.file_rate().low if best.file_rate().known else best.file_rate().value
            want = int(low // (0.9 * result.compute.img_per_s))
            assert fed[cand.label] == (want, best.concurrency), (cand.label, low, result.compute.img_per_s)
    assert fed[margins["fast"]][0] >= 1  # the fast folder keeps at least this one busy
    statuses = {c["label"]: c["status"] for c in data["candidates"]}
    assert statuses[margins["missing"]] == "missing"
    assert data["recommendation"]["action"] == "keep"
    kind = kind_of(result)
    report = kind.write(result, tmp_path).read_text()
    assert report.splitlines()[2].startswith("**Keep the dataset where it is: it feeds ")
    assert kind.headline(result).startswith("Keep the dataset where it is")
    assert "accelerators its storage keeps ≥ 90 % busy" in report
    assert "missing: does not exist" in report and (tmp_path / "placement.png").exists()
