"""``ioprof compare`` on recorded runs of one sweep (2 workers; recorded by ``python
tests/support/record.py compare``): again, on one core of two, and with one worker fewer — the
step set from that host's own one-core decode rate, so that two cores keep up with it and one
cannot. The options are equal in the first three; only a declared repeat may set the noise floor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from replay import recorded


def _runs(tmp_path: Path) -> dict[str, Path]:
    """The recorded runs, copied where a test may change one."""
    out = {}
    for name in ("two", "again", "onecore", "one", "probe"):
        out[name] = tmp_path / name
        shutil.copytree(recorded(f"compare/{name}"), out[name])
    return out


def test_one_core_instead_of_two_is_slower_and_a_repeat_is_not(tmp_path: Path, in_process) -> None:  # type: ignore[no-untyped-def]
    runs = _runs(tmp_path)
    rc, out, err = in_process(
        "compare", *(str(runs[n]) for n in ("two", "again", "onecore", "one")), "--out", "c"
    )
    assert rc == 4, out + err  # slower beyond the noise: the CI gate
    data = json.loads((tmp_path / "c" / "comparison.json").read_text())
    again, onecore, one = data["runs"]
    assert data["repeats"] == 0 and data["min_effect"] == pytest.approx(0.10)
    assert again["settings"] == [] and [c["change"] for c in again["cells"]] == ["within-noise"]
    assert onecore["settings"] == [] and [c["change"] for c in onecore["cells"]] == ["slower"]
    assert ["usable cores", "2", "1"] in onecore["environment"]
    (c,) = one["cells"]
    assert one["settings"] == [["workers", "[2]", "[1]"]] and (c["setting_a"], c["setting_b"]) == (
        "2 workers",
        "1 worker",
    )
    assert f"slower beyond the noise: `{runs['onecore']}`" in out
    report = (tmp_path / "c" / "report.md").read_text()
    assert "What else differs (the environment" in report and "| usable cores | 2 | 1 |" in report
    assert "Outcome (exit code 4)" in report and "@" not in report.split("Verdict:")[1].splitlines()[0]
    assert (tmp_path / "c" / "compare.png").stat().st_size > 5_000


def test_a_declared_repeat_sets_the_floor_and_is_not_compared_as_a_run(tmp_path: Path, in_process) -> None:  # type: ignore[no-untyped-def]
    runs = _runs(tmp_path)
    rc, _, _ = in_process(
        "compare", str(runs["two"]), str(runs["onecore"]), "--repeat", str(runs["again"]), "--out", "c2"
    )
    data = json.loads((tmp_path / "c2" / "comparison.json").read_text())
    assert data["repeats"] == 1 and len(data["runs"]) == 1 and rc == 4
    # the repeat alone against the reference: nothing slower, exit 0
    rc, out, _err = in_process("compare", str(runs["two"]), str(runs["again"]), "--out", "c3")
    assert rc == 0 and "no cell slower beyond the noise" in out


def test_another_machine_is_warned_of_and_another_command_refused(tmp_path: Path, in_process) -> None:  # type: ignore[no-untyped-def]
    runs = _runs(tmp_path)
    other = json.loads((runs["again"] / "results.json").read_text())
    other["machine"]["hostname"] = "elsewhere"
    (runs["again"] / "results.json").write_text(json.dumps(other))
    rc, _, _ = in_process("compare", str(runs["two"]), str(runs["again"]), "--out", "c4")
    assert rc == 0 and "**Other machine**" in (tmp_path / "c4" / "report.md").read_text()
    rc, _out, err = in_process("compare", str(runs["two"]), str(runs["probe"]))  # a probe's run
    assert rc == 1 and err.startswith("ioprof: error: these runs are of different commands")
    assert len(err.strip().splitlines()) == 1
