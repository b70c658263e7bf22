"""``ioprof place``'s one decision, from hand-built measurements; the sample and its candidates."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from builders import compute, dataset_info, storage

from ioprof.conclude.place import conclude
from ioprof.core.results import SCHEMA_VERSION
from ioprof.core.results_place import CandidateResult, PlaceResult
from ioprof.render import place as place_words
from ioprof.runners.place import TEMP_PREFIX, measure_candidate, pick_sample


def leftovers(*folders: Path) -> list[Path]:
    return [p for f in folders if f.exists() for p in f.iterdir() if p.name.startswith(TEMP_PREFIX)]


def _candidate(label: str, kind: str, img_per_s: float, write: float | None = None) -> CandidateResult:
    return CandidateResult(
        label,
        label,
        kind,
        "ok",
        "",
        "ext4",
        "/dev/x",
        False,
        100,
        10**7,
        write,
        (storage(1, img_per_s / 4), storage(4, img_per_s)),
    )


def test_decision_logic_on_hand_built_measurements() -> None:
    from builders import MACHINE, RUN, decode

    result = PlaceResult(
        schema_version=SCHEMA_VERSION,
        kind="place",
        run=RUN,
        machine=MACHINE,
        config={},
        dataset=dataset_info(mean_bytes=100_000.0, files=10_000),
        ram_available_bytes=10**6,
        epochs=10,
        compute=compute(1000.0),
        decode=(decode("multiprocess", 1, 300.0), decode("multiprocess", 4, 1200.0)),
        candidates=(
            _candidate("current location", "current", 500.0),
            _candidate("/fast", "candidate", 5000.0, 100.0),
        ),
    )
    r = conclude(result)
    cur, fast = r.decisions
    assert (cur.predicted_img_per_s, cur.limited_by, cur.keeps_busy) == (500.0, "storage", False)
    assert (fast.predicted_img_per_s, fast.limited_by, fast.keeps_busy, fast.best_workers) == (
        1000.0,
        "compute",
        True,
        4,
    )
    assert fast.copy_s == pytest.approx(10.0)  # 1 GB at 100 MB/s
    assert fast.saved_s == pytest.approx((20.0 - 10.0) * 10)  # 10 epochs: it does not fit in RAM
    assert fast.copy_pays_off is True and fast.fits
    assert r.recommendation is not None and (r.recommendation.action, r.recommendation.location) == (
        "move",
        "/fast",
    )
    assert place_words.recommendation(r.recommendation).startswith(
        "Move the dataset to /fast: it feeds 1,000 img/s with 4 workers"
    )


def _two_places(ram: int, current_keeps_pages: bool | None = True) -> PlaceResult:
    """1 GB on a storage-bound current location (500 img/s against 1,000 of compute), and a fast
    candidate that copies at 20 MB/s (50 s for the whole dataset), over 10 epochs."""
    from builders import MACHINE, RUN, decode

    current = replace(_candidate("current location", "current", 500.0), keeps_pages=current_keeps_pages)
    return PlaceResult(
        schema_version=SCHEMA_VERSION,
        kind="place",
        run=RUN,
        machine=MACHINE,
        config={},
        dataset=dataset_info(mean_bytes=100_000.0, files=10_000),
        ram_available_bytes=ram,
        epochs=10,
        compute=compute(1000.0),
        decode=(decode("multiprocess", 4, 1200.0),),
        candidates=(current, _candidate("/fast", "candidate", 5000.0, 20.0)),
    )


def test_one_decision_from_which_epochs_read_the_storage() -> None:
    """The issue's case: a faster candidate whose copy does not pay must not be recommended."""
    # fits in RAM, pages kept: only the first epoch reads the storage (20 s there, 10 s on /fast)
    r = conclude(_two_places(ram=10**12))
    cur, fast = r.decisions
    assert (
        cur.reading_epochs == 1 and fast.saved_s == pytest.approx(10.0) and fast.copy_s == pytest.approx(50.0)
    )
    assert fast.copy_pays_off is False
    assert r.recommendation is not None and r.recommendation.action == "keep-copy-does-not-pay"
    text = place_words.recommendation(r.recommendation)
    assert text.startswith("Keep the dataset where it is: /fast would feed 1,000 img/s, but copying it there")
    assert "only the first of the 10 epochs reads the storage" in text and "warm the page cache" in text
    # does not fit: every epoch reads it, the copy pays
    r = conclude(_two_places(ram=10**6))
    assert r.decisions[0].reading_epochs == 10 and r.decisions[1].saved_s == pytest.approx(100.0)
    assert r.recommendation is not None and r.recommendation.action == "move"
    # fits, but the filesystem drops read pages (sshfs): every epoch reads it too
    r = conclude(_two_places(ram=10**12, current_keeps_pages=False))
    assert r.decisions[0].reading_epochs == 10 and r.recommendation is not None
    assert r.recommendation.action == "move"
    assert "drops read pages at every open" in place_words.recommendation(r.recommendation)


def test_a_candidate_that_cannot_hold_the_whole_dataset_is_never_recommended() -> None:
    from builders import MACHINE, RUN, decode

    # the sample fits on the fast tmpfs, the 1 GB dataset does not: it must not be recommended
    small = replace(_candidate("/dev/shm", "candidate", 5000.0, 100.0), free_bytes=200_000_000)
    roomy = replace(_candidate("/nvme", "candidate", 2000.0, 100.0), free_bytes=50 * 10**9)
    result = PlaceResult(
        schema_version=SCHEMA_VERSION,
        kind="place",
        run=RUN,
        machine=MACHINE,
        config={},
        dataset=dataset_info(mean_bytes=100_000.0, files=10_000),
        ram_available_bytes=10**6,
        epochs=10,
        compute=compute(1000.0),
        decode=(decode("multiprocess", 4, 1200.0),),
        candidates=(_candidate("current location", "current", 500.0), small, roomy),
    )
    r = conclude(result)
    by = {d.label: d for d in r.decisions}
    assert by["/dev/shm"].fits is False and by["/nvme"].fits is True
    assert r.recommendation is not None and r.recommendation.location == "/nvme"


def test_sample_is_large_enough_or_everything(small_set: Path) -> None:
    paths = sorted(str(p) for p in small_set.rglob("*.jpg"))
    sample, size = pick_sample(paths, 0)
    assert sorted(sample) == paths  # a small set is taken whole
    assert size == sum(Path(p).stat().st_size for p in paths)


def test_unusable_candidates_are_reported_not_fatal(small_set: Path, tmp_path: Path) -> None:
    sample, size = pick_sample(sorted(str(p) for p in small_set.rglob("*.jpg")), 0)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    kw = {"dataset_bytes": size, "seed": 0, "progress": print}
    assert measure_candidate(sample, size, str(tmp_path / "nope"), [1], **kw).status == "missing"  # type: ignore[arg-type]
    assert measure_candidate(sample, size, str(a_file), [1], **kw).status == "missing"  # type: ignore[arg-type]
    ok = measure_candidate(sample, size, str(tmp_path), [1, 2], **kw)  # type: ignore[arg-type]
    assert ok.status == "ok" and ok.write_mb_per_s and len(ok.storage) == 2
    assert ok.storage[0].files == len(sample) and ok.free_bytes
    assert not leftovers(tmp_path)
