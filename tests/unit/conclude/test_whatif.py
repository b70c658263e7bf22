"""``ioprof whatif``'s ranking: every alternative against its control, from hand-built cells."""

from __future__ import annotations

import pytest
from builders import MACHINE, RUN, cell, compute, dataset_info

from ioprof.conclude.whatif import conclude
from ioprof.core.results import SCHEMA_VERSION
from ioprof.core.results_whatif import AlternativeResult, WhatifResult


def ranked(data: dict) -> list[tuple[str, float, bool]]:  # type: ignore[type-arg]
    return [(r["name"], r["gain"], r["beyond_noise"]) for r in data["ranking"]["ranked"]]


def _result(*alts: AlternativeResult) -> WhatifResult:
    return WhatifResult(
        schema_version=SCHEMA_VERSION,
        kind="whatif",
        run=RUN,
        machine=MACHINE,
        config={},
        dataset=dataset_info(),
        sample_files=100,
        sample_bytes=10**7,
        compute=compute(1000.0),
        setting="4 workers",
        scratch="/tmp",
        scratch_fs="ext4",
        scratch_bytes=0,
        alternatives=alts,
    )


def test_an_alternative_wins_only_beyond_the_noise_of_both() -> None:
    base = AlternativeResult("baseline", True, "", cell(wait=0.05, step=0.05, jitter=0.01), "data", "ext4")
    fast = AlternativeResult(
        "resized-256",
        True,
        "",
        cell(wait=0.0, step=0.05, jitter=0.0),
        "scratch",
        "ext4",
        prep_s=2.0,
        prep_bytes=10**6,
        sample_bytes=10**7,
    )
    close = AlternativeResult(
        "prefetch-4", True, "", cell(wait=0.049, step=0.05, jitter=0.01), "data", "ext4"
    )
    r = conclude(_result(base, fast, close)).ranking
    assert r is not None and r.best == "resized-256" and not r.compute_bound
    by = {x.name: x for x in r.ranked}
    assert by["resized-256"].gain == pytest.approx(2.0, rel=0.05) and by["resized-256"].beyond_noise
    assert not by["prefetch-4"].beyond_noise  # within the baseline's interval
    assert by["resized-256"].dataset_prep_s == pytest.approx(
        2.0 * 20_000_000 / 10**7
    )  # scaled to the dataset
    nothing = conclude(
        _result(AlternativeResult("baseline", True, "", cell(wait=0.0, step=0.1), "data", "ext4"), close)
    )
    assert nothing.ranking is not None and nothing.ranking.best == "" and nothing.ranking.compute_bound
    # steady steps give tight intervals: 4 % faster lies outside them, yet is within how a shared machine drifts
    steady = AlternativeResult("baseline", True, "", cell(wait=0.002, step=0.05, jitter=0.0), "data", "ext4")
    slightly = AlternativeResult(
        "prefetch-8", True, "", cell(wait=0.0, step=0.05, jitter=0.0), "data", "ext4"
    )
    drift = conclude(_result(steady, slightly)).ranking
    assert drift is not None and drift.best == "" and not drift.ranked[0].beyond_noise
    assert drift.ranked[0].name == "prefetch-8" and drift.ranked[0].gain > 1.01


def test_a_copy_is_credited_only_with_its_gain_over_the_same_files_on_the_same_storage() -> None:
    """The issue's case: data on a slow link, copies on a fast scratch disk. Shards run 30x the
    baseline, but the loose files copied there (the control) run 19x: the fix gives 1.6x, the rest
    is the storage move, which is named as such; on the data's own storage the copy is estimated."""
    from dataclasses import replace

    from builders import storage

    from ioprof.render.whatif import whatif_answer

    def alt(name: str, step: float, where: str, **kw: object) -> AlternativeResult:
        c = replace(cell(wait=0.0, step=step, jitter=0.001, steps=40), bytes_per_step=(40_000 * 8,) * 40)
        return AlternativeResult(name, True, "", c, where, "fuse.sshfs" if where == "data" else "ext4", **kw)  # type: ignore[arg-type]

    base = alt("baseline", 0.30, "data")
    control = alt("loose-on-scratch", 0.016, "scratch")
    shards = alt("shards", 0.010, "scratch", prep_s=1.0, prep_bytes=10**7, sample_bytes=10**7)
    resized = alt("resized-256", 0.0155, "scratch", prep_s=1.0, prep_bytes=5 * 10**6, sample_bytes=10**7)
    result = replace(
        _result(base, control, shards, resized), data_storage=storage(2, 25.0, mean_bytes=40_000.0)
    )
    r = conclude(result).ranking
    assert r is not None and r.best == "shards" and r.storage_move == "loose-on-scratch"
    by = {x.name: x for x in r.ranked}
    assert by["shards"].gain == pytest.approx(30.0, rel=0.05)  # against the baseline: mostly the move
    assert (
        by["shards"].fix_gain == pytest.approx(1.6, rel=0.05) and by["shards"].control == "loose-on-scratch"
    )
    assert by["resized-256"].fix_gain == pytest.approx(1.03, rel=0.05) and not by["resized-256"].beyond_noise
    # on the data's own 1 MB/s storage, 40 kB per image feeds 25 img/s whatever the copy: about 1x
    assert by["shards"].data_gain_estimated and by["shards"].data_gain == pytest.approx(
        25 / (8 / 0.30), rel=0.05
    )
    text = whatif_answer(r, "2 workers")
    assert "is the best fix" in text and "1.58× its control" in text and "`ioprof place`" in text
    assert "30.00×" not in text


def test_a_change_counts_only_beyond_how_far_the_pipeline_itself_moved_around_it() -> None:
    """This host's case: the user's pipeline ran 286 img/s first and 364 a few alternatives later,
    each with a narrow interval (a window cannot see the machine's pace move between runs), and a
    knob that changes nothing read 1.47x the first run. Measured again after every few
    alternatives, the pipeline's runs just before and after an alternative say how far the pace
    moved while it ran: a change counts only beyond that, against both of them."""
    from ioprof.core.results_whatif import again
    from ioprof.render.whatif import render_whatif_markdown, whatif_answer

    def alt(name: str, wait: float, step: float = 0.02) -> AlternativeResult:
        c = cell(wait=wait, step=step, jitter=0.0002, steps=60)
        return AlternativeResult(name, True, "", c, "data", "ext4")

    first, second, last = alt("baseline", 0.008), alt(again(2), 0.002), alt(again(3), 0.005)  # 286, 364, 320
    knob = alt("prefetch-8", 0.0, step=0.019)  # 421 img/s: 1.47x the run before it, 1.16x the run after
    fix = alt("decode_jpeg", 0.0, step=0.015)  # 533 img/s
    calm = alt("prefetch-4", 0.0, step=0.019)  # 421 img/s again, where the pace moved 14 %, not 27 %
    alone = conclude(_result(first, knob)).ranking  # measured once, the pipeline lets the knob count
    assert alone is not None and alone.best == "prefetch-8" and alone.drift is None
    result = conclude(_result(first, knob, second, fix, calm, last))
    r = result.ranking
    assert r is not None and r.drift == pytest.approx(364 / 286 - 1, rel=0.02)
    by = {x.name: x for x in r.ranked}
    assert not by["prefetch-8"].beyond_noise and by["prefetch-8"].floor == pytest.approx(0.27, abs=0.01)
    assert by["prefetch-4"].beyond_noise and by["prefetch-4"].floor == pytest.approx(364 / 320 - 1, rel=0.02)
    assert r.best == "decode_jpeg" and by["decode_jpeg"].beyond_noise
    assert not by[again(2)].beyond_noise and not by[again(3)].beyond_noise  # the pipeline again is no fix
    # each gain is read against the mean of the pipeline's runs around it
    assert by["decode_jpeg"].gain == pytest.approx(533 / ((364 + 320) / 2), rel=0.02)
    text = render_whatif_markdown(result)
    assert "no: within the 27 % your pipeline moved around it" in text
    assert "your pipeline was measured 3 times" in text
    assert "your pipeline as it is, run 2 (measured again)" in text
    assert "(4 workers, 286–364 img/s over its 3 runs)" in whatif_answer(r, "4 workers")


def test_an_alternative_whose_loop_drained_a_read_ahead_queue_gains_only_what_its_workers_made() -> None:
    """The same pipeline as the baseline, measured with a queue its workers filled before the window
    (a slow first step): its loop took 23 % more than they made. It is no fix, and its gain is what
    they made."""
    from builders import drained_cell

    base = AlternativeResult(
        "baseline", True, "", cell(workers=4, wait=0.03, step=0.05, steps=40, jitter=0.002), "data", "ext4"
    )
    ahead = AlternativeResult("prefetch-4", True, "", drained_cell(), "data", "ext4")
    r = conclude(_result(base, ahead)).ranking
    assert r is not None and r.best == ""
    by = {x.name: x for x in r.ranked}
    assert by["prefetch-4"].gain == pytest.approx(1.0, abs=0.02) and not by["prefetch-4"].beyond_noise
    assert by["prefetch-4"].data_wait_share == pytest.approx(0.37, abs=0.02)
