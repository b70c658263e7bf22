"""Two or more runs of the same command compared: pure, no words.

Cells are matched on dataset, loader and workers; what is left is matched on dataset and loader
kind in worker order (so ``--workers 1`` against ``--workers 2`` pairs the two cells). A change is
real only when the two cells' 95 % intervals do not overlap and the rates differ by more than
``COMPARE_MIN_EFFECT``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ioprof.core.comparison import CellComparison, Comparison, RunComparison
from ioprof.core.results import CellResult, SweepResult
from ioprof.core.thresholds import COMPARE_MIN_EFFECT

# Settings that say where results went or how they were named, not what was measured.
NOT_SETTINGS = frozenset({"out_dir", "cache_dir"})


def _interval(c: CellResult) -> tuple[float, float] | None:
    i = c.throughput()
    return (i.low, i.high) if i.known else None


def compare_cells(a: CellResult, b: CellResult, min_effect: float = COMPARE_MIN_EFFECT) -> CellComparison:
    """Two cells' rates (each the figure its report shows: the loop's, or what its workers made
    where the loop drained a queue filled before its window) and whether they differ beyond noise."""
    ia, ib = _interval(a), _interval(b)
    rate_a, rate_b = a.throughput().value, b.throughput().value
    ratio = rate_b / rate_a if rate_a > 0 else 0.0
    low = high = None
    change = "within-noise"
    if ia and ib:
        if ia[0] > 0 and ia[1] > 0:
            low, high = ib[0] / ia[1], ib[1] / ia[0]
        # one interval wholly beyond the other's end is decided, even where a slow cell's reaches
        # down to 0 (too few batches for its lower end): its upper end is the bound
        apart = ib[0] > ia[1] or ib[1] < ia[0]
        if apart and abs(ratio - 1) > min_effect:
            change = "faster" if ratio > 1 else "slower"
    return CellComparison(
        dataset=a.dataset,
        setting_a=a.setting.label,
        setting_b=b.setting.label,
        img_per_s_a=rate_a,
        img_per_s_b=rate_b,
        interval_a=ia,
        interval_b=ib,
        ratio=ratio,
        ratio_low=low,
        ratio_high=high,
        wait_share_a=a.wait_share().value,
        wait_share_b=b.wait_share().value,
        change=change,
    )


def match(
    a: Sequence[CellResult], b: Sequence[CellResult]
) -> tuple[list[tuple[CellResult, CellResult]], list[str]]:
    """Pairs of cells to compare, and the cells left without a partner."""
    ok_a = [c for c in a if c.status == "ok" and c.steps]
    ok_b = [c for c in b if c.status == "ok" and c.steps]
    by_key = {c.key: c for c in ok_b}
    pairs = [(c, by_key.pop(c.key)) for c in ok_a if c.key in by_key]
    left_a = [c for c in ok_a if c.key not in {p[0].key for p in pairs}]
    left_b = list(by_key.values())
    for c in sorted(left_a, key=lambda c: c.workers):
        partner = next(
            (
                d
                for d in sorted(left_b, key=lambda d: d.workers)
                if (d.dataset, d.loader) == (c.dataset, c.loader)
            ),
            None,
        )
        if partner is not None:
            pairs.append((c, partner))
            left_b.remove(partner)
            left_a = [x for x in left_a if x is not c]
    unmatched = [f"{c.dataset} {c.setting.label}" for c in [*left_a, *left_b]]
    return pairs, unmatched


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str, str]]:
    keys = sorted((set(a) | set(b)) - NOT_SETTINGS)
    return [(k, repr(a.get(k)), repr(b.get(k))) for k in keys if a.get(k) != b.get(k)]


def _verdict(r: SweepResult) -> tuple[str, str, str]:
    a = r.analysis
    return (
        ("unknown", "unknown", "")
        if a is None
        else (a.overall_bottleneck, a.overall_input_bound, a.overall_dataset)
    )


def environment(a: SweepResult, b: SweepResult) -> list[tuple[str, str, str]]:
    """What differs besides the options: machine, libraries, where the data sat. The reasons people
    compare runs — a new library, another disk, another machine — leave the options unchanged."""
    ma, mb = a.machine, b.machine
    pairs = [
        ("machine", ma.hostname, mb.hostname),
        ("CPU", ma.cpu_model, mb.cpu_model),
        ("usable cores", str(ma.cpu_cores_usable), str(mb.cpu_cores_usable)),
        ("RAM", f"{ma.ram_bytes / 2**30:,.1f} GiB", f"{mb.ram_bytes / 2**30:,.1f} GiB"),
        ("GPU", str(ma.gpu), str(mb.gpu)),
        ("GPU driver", str(ma.gpu_driver), str(mb.gpu_driver)),
        ("Python", ma.python, mb.python),
        ("torch", ma.torch, mb.torch),
        ("torchvision", ma.torchvision, mb.torchvision),
        ("platform", ma.platform, mb.platform),
        ("ioprof", a.run.ioprof_version, b.run.ioprof_version),
    ]
    data_a = {d.label: d for d in a.datasets}
    for d in b.datasets:
        other = data_a.get(d.label)
        if other is not None:
            pairs.append(
                (
                    f"{d.label}: filesystem",
                    f"{other.fs_type} ({other.mount_source})",
                    f"{d.fs_type} ({d.mount_source})",
                )
            )
    return [(what, x, y) for what, x, y in pairs if x != y]


def compare_runs(
    reference: SweepResult, other: SweepResult, label: str, min_effect: float = COMPARE_MIN_EFFECT
) -> RunComparison:
    pairs, unmatched = match(reference.cells, other.cells)
    settings = differences(reference.config, other.config)
    if (
        reference.script is not None
        and other.script is not None
        and reference.script.command != other.script.command
    ):
        settings.append(("command", reference.script.command, other.script.command))
    ma = f"{reference.machine.hostname}: {reference.machine.cpu_model}, GPU {reference.machine.gpu}"
    mb = f"{other.machine.hostname}: {other.machine.cpu_model}, GPU {other.machine.gpu}"
    va, vb = reference.run.ioprof_version, other.run.ioprof_version
    verdicts = (_verdict(reference), _verdict(other))
    return RunComparison(
        label=label,
        settings=tuple(settings),
        other_machine=ma != mb,
        other_version=va != vb,
        machines=(ma, mb),
        versions=(va, vb),
        cells=tuple(compare_cells(x, y, min_effect) for x, y in pairs),
        unmatched=tuple(unmatched),
        verdicts=verdicts,
        verdict_changed=verdicts[0] != verdicts[1],
        environment=tuple(environment(reference, other)),
    )


def noise_floor(reference: SweepResult, repeats: Sequence[SweepResult]) -> tuple[float, float | None]:
    """The smallest change that counts: COMPARE_MIN_EFFECT, or more where the runs the user
    declared repeats of the reference differ more from it; and that spread."""
    pairs = [
        (a.throughput().value, b.throughput().value)
        for r in repeats
        for a, b in match(reference.cells, r.cells)[0]
    ]
    spread = [abs(b / a - 1) for a, b in pairs if a > 0]
    return max([COMPARE_MIN_EFFECT, *spread]), max(spread) if spread else None


def outcome(runs: Sequence[RunComparison]) -> str:
    """``slower`` when any matched cell of any run is slower beyond the noise; ``inconclusive``
    when no cell could be compared with intervals on both sides; else ``same``."""
    if any(r.slower for r in runs):
        return "slower"
    if not any(r.conclusive for r in runs):
        return "inconclusive"
    return "same"


def compare(
    results: Sequence[tuple[str, SweepResult]], repeats: Sequence[tuple[str, SweepResult]] = ()
) -> Comparison:
    """Every run against the first (the reference); ``repeats``: runs the user declared repeats."""
    (ref_label, ref), *others = results
    floor, spread = noise_floor(ref, [r for _, r in repeats])
    runs = tuple(compare_runs(ref, r, label, floor) for label, r in others)
    return Comparison(
        reference=ref_label,
        kind=ref.kind,
        runs=runs,
        min_effect=floor,
        repeats=len(repeats),
        repeat_spread=spread,
        outcome=outcome(runs),
    )
