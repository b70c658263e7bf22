"""``python -m ioprof sweep`` end to end in a subprocess: every file written, the verdict, the
interface."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import paths
import pytest
from cli import ioprof

REPO = paths.REPO


TINY = ["--model", "tiny", "--crop-px", "32", "--batch-size", "4", "--steps", "10", "--images", "24"]


def _paced_by_the_step(c: dict) -> None:  # type: ignore[type-arg]
    """A cell paced by its 0.4 s step: its class follows its data-wait share's interval by the
    classes' bars (5 %, 20 %): not input-bound, and the step the bottleneck, where the whole
    interval lies under 5 % — the usual case. A serial loader reads and decodes in series with the
    step, and a batch the host makes late (100 ms or so on a loaded CI host) lifts the share (a CI
    run read borderline not/moderately, decode): the class then says what the waits say."""
    v = c["verdict"]
    low, high = v["wait_share_low"], v["wait_share_high"]
    assert low <= v["data_wait_share"] <= high, v

    def klass(share: float) -> str:
        return "highly" if share >= 0.20 else "moderately" if share >= 0.05 else "not"

    assert v["input_bound_range"] == [klass(low), klass(high)], v
    if klass(high) == "not":
        assert (v["bottleneck"], v["input_bound"]) == ("compute", "not"), v


@pytest.mark.slow
def test_sweep_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # a step far slower than any loader here (sim:10, 0.4 s a batch of 4): every cell compute-bound
    begun = time.time()
    p = ioprof(
        *"sweep --workers 2 --resolutions 64x48,256x192 --warmup-steps 1".split(),
        *TINY,
        "--compute",
        "sim:10",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "results.json").read_text())
    cells = {(c["dataset"], c["loader"], c["workers"]) for c in data["cells"]}
    assert cells == {
        (r, lo, w) for r in ("64x48", "256x192") for lo, w in (("serial", 0), ("multiprocess", 2))
    }
    for c in data["cells"]:
        assert (
            c["status"] == "ok" and c["steps"] == 10 and len(c["wait_s"]) == 10 and c["stopped_by"] == "steps"
        )
        assert c["img_per_s"] == pytest.approx(10.0, rel=0.1)  # the simulated step sets the pace
        _paced_by_the_step(c)
        assert c["requested_bytes"] > 0 and c["fetched"]["method"] in ("block-io", "ram")
        assert c["gpu"]["available"] is False and c["gpu"]["reason"]
        # the window's seconds since the epoch, within the run's, as long as the window
        start, end = c["window_wall_s"]
        assert begun <= start < end <= time.time() and end - start == pytest.approx(c["elapsed_s"], abs=0.05)
    # each dataset's verdict is its least waiting cell's: compute-bound where one of its cells is
    paced = {c["dataset"] for c in data["cells"] if c["verdict"]["input_bound"] == "not"}
    verdict = "compute-bound" if paced == {"64x48", "256x192"} else ""
    overall = (data["analysis"]["overall_bottleneck"], data["analysis"]["overall_input_bound"])
    assert (overall == ("compute", "not")) == (verdict == "compute-bound"), overall
    assert data["compute"]["simulated"] is True and data["compute"]["img_per_s"] == pytest.approx(
        10.0, rel=0.05
    )
    m = data["machine"]
    assert m["cpu_cores_logical"] >= 1 and m["ram_bytes"] > 0 and m["torch"] and m["torchvision"]
    assert data["datasets"][0]["fs_type"] and data["datasets"][0]["fs_kind"]
    assert data["run"]["device"] == "cpu" and data["schema_version"] == 2
    report = (out / "report.md").read_text()
    assert report.startswith("# ioprof sweep") and f"**Verdict: {verdict}" in report
    assert "![Training throughput against loader workers](throughput.png)" in report
    assert (out / "throughput.png").stat().st_size > 10_000
    assert len((out / "results.csv").read_text().splitlines()) == 5
    assert "[4/4]" in p.stderr  # progress was shown
    assert p.stdout.startswith(f"Verdict: {verdict}")

    (out / "report.md").unlink()
    p = ioprof("report", str(out))  # the folder will do
    assert p.returncode == 0, p.stderr
    assert (out / "report.md").read_text() == report


def _photos(root: Path, big_every: int | None) -> Path:
    """300 JPEGs of 320x240 in one class; where ``big_every``, one in that many (2 %) is 4000x3000
    instead — some 80 times the others' time to read, decode and crop."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    (root / "c").mkdir(parents=True)
    for i in range(300):
        big = big_every is not None and i % big_every == big_every // 2
        size = (4000, 3000) if big else (320, 240)
        pixels = rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)
        Image.fromarray(pixels).resize(size).save(root / "c" / f"{i:04d}.jpg", quality=90)
    return root


@pytest.mark.slow
def test_a_sweep_over_data_with_a_few_huge_images_names_them_and_what_they_cost(
    tmp_path: Path, figure: Callable[[str], None]
) -> None:
    """``sweep --data`` over photos of which 2 % are huge, for a simulated GPU that the two workers
    cannot feed: the cell's report names the huge files as the slowest samples and the share of the
    wait they cause, within 20 % of the truth — the same sweep over the same folder with those
    files at the others' size, its wait per batch against this window's. That sweep runs before
    and after this one: a shared host's pace drifts between runs, and the even cell's wait, the
    small difference of its workers' pace and the loop's, moves with it many times over; the two
    runs' mean is the truth and half their difference its own error, added to the 20 %."""
    # the cells alone: what the slow samples cost is read from the cell's own batches and samples,
    # never from the ceilings, which the probe would spend a third of each sweep's time on
    args = "--workers 2 --loaders multiprocess --compute sim:h200 --batch-size 16 --crop-px 64 --seed 0 --no-probe"
    args = [*args.split(), "--seconds", "10"]
    folders = {"huge": _photos(tmp_path / "huge", 50), "even": _photos(tmp_path / "even", None)}
    cells = {}
    for name in ("even-before", "huge", "even-after"):
        out = tmp_path / f"{name}-report"
        p = ioprof("sweep", "--data", str(folders[name.split("-")[0]]), *args, "--out", str(out))
        assert p.returncode == 0, p.stderr[-2000:]
        r = json.loads((out / "results.json").read_text())
        (cells[name],) = [c for c in r["cells"] if c["workers"] == 2]
        cells[name]["findings"] = r["analysis"]["findings"]
    huge = cells["huge"]
    waited = sum(huge["wait_s"])
    # each even run's wait per batch, over as many batches as this window's
    without = [
        len(huge["wait_s"]) * sum(e["wait_s"]) / len(e["wait_s"])
        for e in (cells["even-before"], cells["even-after"])
    ]
    truths = [1 - w / waited for w in without]
    truth, drift = sum(truths) / 2, abs(truths[0] - truths[1]) / 2
    slow = huge["inside"]["stages"]["per_sample"]["slow"]
    w = slow["wait"]
    figure(
        f"sweep --data, 2 % huge images: {w['value']:.3f} [{w['low']:.3f}–{w['high']:.3f}] of the cell's wait "
        f"replayed, truth {truth:.3f} ± {drift:.3f} ({waited:.2f} s over {len(huge['wait_s'])} batches; at the even "
        f"folder's wait per batch {without[0]:.2f} s before, {without[1]:.2f} s after); each sample's median "
        f"{huge['inside']['stages']['per_sample']['p50_s'] * 1e3:.1f} ms, max "
        f"{huge['inside']['stages']['per_sample']['max_s'] * 1e3:.1f} ms; the replay's wait "
        f"{slow['replayed_wait_s']:.2f} s against {slow['measured_wait_s']:.2f} s measured; of the loop's time "
        f"{slow['loop']['value']:.3f}, their own work on a CPU {slow['on_cpu']['value']:.3f}"
    )
    assert abs(slow["wait"]["value"] - truth) <= 0.2 * truth + drift, (slow, truths)
    (found,) = [f for f in huge["findings"] if f["kind"] == "slow-samples"]
    big = {f"{i:04d}.jpg" for i in range(25, 300, 50)}
    assert found["slowest"] and all(Path(name).name in big for _, _, name in found["slowest"]), found
    assert not [
        f
        for name in ("even-before", "even-after")
        for f in cells[name]["findings"]
        if f["kind"] == "slow-samples"
    ]


@pytest.mark.slow
def test_a_sweep_over_your_data_leaves_the_page_cache_as_it_found_it(
    tmp_path: Path, figure: Callable[[str], None]
) -> None:
    """``sweep --data`` over files the page cache holds, as on a host that trains on them: the
    storage ceilings and the cold cells evict every file, and the sweep reads back what the cache
    held once it is done, so that the training after it finds its files cached as before.
    ``fincore`` tells, outside ioprof. Beside them as many files nothing reads, cached at the same
    moment: the host's own reclaim takes pages from both, and only files gone whole from the
    data more often than from those by chance are the sweep's."""
    from groundtruth import CachedBeside

    cache = CachedBeside(tmp_path, 256, 192, 120, seed=3)
    out = tmp_path / "o"
    args = "--workers 2 --loaders multiprocess --compute sim:h200 --batch-size 16 --crop-px 64 --seconds 3"
    p = ioprof("sweep", "--data", str(cache.data), *args.split(), "--out", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    gone, gone_others = cache.gone_whole()
    figure(
        f"sweep --data: files gone whole after it {gone} of {len(cache.files)}, of as many untouched {gone_others}"
    )
    assert cache.as_found(), (gone, gone_others)
    r = json.loads((out / "results.json").read_text())
    back = r["run"]["read_back"]
    figure(
        f"sweep --data: {back['files']} cached files evicted, {back['bytes']:,} B read back in "
        f"{back['seconds']:.2f} s"
    )
    assert r["config"]["cache"] == "cold" and r["cells"] and r["ceilings"][0]["storage"]
    assert back["files"] == sum(cache.cached[f] > 0 for f in cache.files) and back["left_bytes"] == 0, back
    report = (out / "report.md").read_text()
    assert "- Page cache: Reading your files cold evicted the pages the page cache held of" in report
    assert "so your training finds the cache as it left it." in report
