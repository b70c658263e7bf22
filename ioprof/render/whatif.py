"""``report.md`` of ``ioprof whatif``: the alternatives ranked, the code each needs, and what was
not measured here, with why. Pure."""

from __future__ import annotations

from pathlib import Path

from ioprof.conclude.whatif import CONTROL
from ioprof.core.findings_whatif import RankedAlternative, Ranking
from ioprof.core.resultfile import atomic_write_text
from ioprof.core.results_whatif import AGAIN_EVERY, AlternativeResult, WhatifResult, is_current
from ioprof.core.thresholds import COMPARE_MIN_EFFECT
from ioprof.render import words
from ioprof.render.fmt import duration, mb, pct, rate, rate_span, share_ci, size
from ioprof.render.mdtable import table

WHERE = {"data": "your data's storage", "scratch": "scratch", "emulated": "emulated"}


def _cache(a: AlternativeResult) -> str:
    c = a.cell.cache if a.cell is not None else None
    if c is None:
        return "—"
    return f"{c.regime}, {'verified' if c.verified else '**NOT verified**'}"


def _vs_control(x: RankedAlternative) -> str:
    if is_current(x.name):
        return "—"
    if x.name == CONTROL:
        return "(the storage move)"
    if x.control == "baseline":
        return "your pipeline is its control"
    return f"{x.fix_gain or 0:.2f}× vs the loose files there"


def _on_data(x: RankedAlternative) -> str:
    if x.data_gain is None:
        return "—" if x.control != "baseline" else f"{x.gain:.2f}×"
    return f"{x.data_gain:.2f}×" + (" (estimate)" if x.data_gain_estimated else "")


def _row(i: int, x: RankedAlternative, a: AlternativeResult) -> list[str]:
    # a rate is never below 0: an interval from a few steps that reaches past it is shown from 0
    interval = (
        f" [{rate(max(0.0, x.low))}–{rate(x.high)}]" if x.low is not None and x.high is not None else " [± ?]"
    )
    cost = "—"
    if x.dataset_prep_s is not None and x.dataset_prep_bytes is not None:
        cost = f"{duration(x.dataset_prep_s)}, {size(x.dataset_prep_bytes)}"
    beyond = ("better" if (x.fix_gain or 0) > 1 else "worse") if x.beyond_noise else "no"
    if not x.beyond_noise and not is_current(x.name) and x.floor is not None and x.floor > COMPARE_MIN_EFFECT:
        beyond = f"no: within the {pct(x.floor, 0)} your pipeline moved around it"
    return [
        str(i),
        _label(a),
        rate(x.img_per_s) + interval,
        f"{x.gain:.2f}×",
        _vs_control(x),
        beyond,
        _on_data(x),
        pct(x.busy_share, 0),
        share_ci(a.cell.wait_share()) if a.cell else "—",
        f"{WHERE.get(a.where, a.where)} ({a.where_fs}); {_cache(a)}",
        cost,
    ]


def _rows(result: WhatifResult) -> list[list[str]]:
    r = result.ranking
    if r is None:
        return []
    by = {a.name: a for a in result.alternatives}
    return [_row(i, x, by[x.name]) for i, x in enumerate(r.ranked, 1)]


def _label(a: AlternativeResult) -> str:
    if is_current(a.name) and a.name != "baseline":
        return f"your pipeline as it is, run {a.name.removeprefix('baseline-')} (measured again)"
    text = ALTERNATIVES.get(a.name, a.name)
    if a.name == "cache" and "warm_share" in a.figures:
        text += f" ({pct(a.figures['warm_share'], 0)} of it)"
    return text


_HEAD = [
    "rank",
    "alternative",
    "img/s [95 % interval]",
    "vs current",
    "vs its control",
    "beyond its control's noise",
    "vs current, on your data's storage",
    "accelerator busy",
    "data wait",
    "read from; cache",
    "one-off cost for the whole dataset",
]


def render_whatif_markdown(result: WhatifResult) -> str:
    r = result.ranking
    out = [f"# ioprof whatif — {result.run.started_at[:10]}", "", whatif_answer(r, result.setting), ""]
    out += ["## Ranked, each run end to end", "", *table(_HEAD, _rows(result)), ""]
    storage = result.data_storage
    estimate = (
        f"estimated from the bytes per image each reads against the {rate(storage.read_mb_per_s)} MB/s your "
        f"storage delivered read alone, cold, at {storage.concurrency} reader(s) (the lower of that and its own rate)"
        if storage is not None and storage.files
        else "not estimated: your storage was not read alone"
    )
    out += [
        f'"Accelerator busy" = img/s ÷ the compute ceiling ({rate(result.compute.img_per_s)} img/s, '
        f"{result.compute.label}). Each alternative is judged against its **control**, the measurement that shares "
        "its storage and cache regime: your current pipeline for those that read your data where it lives, and "
        "the same loose files copied to the scratch storage for copies made there (pre-resized files, shards) — "
        "so the scratch storage's speed is never credited to a fix. An alternative is better only when its "
        f"interval lies above its control's and it is faster by more than {_floor(result.ranking)}. On your data's own storage: "
        f"measured where the alternative read it; for copies made on other storage, {estimate}. The one-off cost "
        "of a copy (pre-resized files, shards) is what making it took for the sample, scaled to the whole dataset.",
        "",
    ]
    out += _changes(result) + _knobs(result) + _not_measured(result) + _how(result)
    return "\n".join(out)


def _floor(r: Ranking | None) -> str:
    """The smallest change that counts, and why: a window's interval cannot see how a shared machine
    drifts between one run and the next, so your pipeline's two runs measure it."""
    least = pct(COMPARE_MIN_EFFECT, 0)
    if r is None or r.drift is None:
        return f"{least} (a window cannot see how a shared machine drifts between one run and the next)"
    runs = sum(is_current(x.name) for x in r.ranked)
    return (
        f"{least}, or than your pipeline moved between its runs just before and just after it, where that "
        "is more: a window cannot see how a shared machine's pace drifts from one run to the next, so your "
        f"pipeline was measured {runs} times (first, after every {AGAIN_EVERY} alternatives, and last), and an "
        "alternative is read against the runs around it. Over the whole run they spread "
        f"{pct(r.drift, 0)} (fastest over slowest)"
    )


def _changes(result: WhatifResult) -> list[str]:
    r = result.ranking
    better = [
        x for x in (r.ranked if r else ()) if x.beyond_noise and (x.fix_gain or 0) > 1 and x.name in CODE
    ]
    if not better:
        return []
    out = ["## What to change", ""]
    for x in better:
        out += [
            f"**{ALTERNATIVES[x.name]}** ({x.fix_gain or 0:.2f}× over its control):",
            "",
            "```python",
            CODE[x.name],
            "```",
            "",
        ]
    return out


def _knobs(result: WhatifResult) -> list[str]:
    p = next((a for a in result.alternatives if a.name == "persistent_workers" and a.measured), None)
    if p is None:
        return []
    fresh, kept = p.figures.get("startup_fresh_s", 0.0), p.figures.get("startup_persistent_s", 0.0)
    saved = (
        f"{duration(fresh - kept)} saved per epoch (`{CODE['persistent_workers']}`)"
        if fresh > kept
        else "nothing saved here"
    )
    return [
        "## persistent_workers",
        "",
        f"At the start of each epoch the first batch arrives after {duration(fresh)} with fresh workers and "
        f"{duration(kept)} with persistent ones: {saved}.",
        "",
    ]


def _not_measured(result: WhatifResult) -> list[str]:
    missing = [a for a in result.alternatives if not a.measured]
    if not missing:
        return []
    return (
        ["## Not measured here", ""]
        + [f"- {ALTERNATIVES.get(a.name, a.name)}: {why_not(a.why_not)}." for a in missing]
        + [""]
    )


def _how(result: WhatifResult) -> list[str]:
    d, m = result.dataset, result.machine
    return [
        "## How this was measured",
        "",
        f"- A shuffled sample of {result.sample_files} files ({mb(result.sample_bytes)}) of `{d.path}` ({d.listed_files} files, "
        f"{size(d.listed_bytes)}, on {d.fs_type}), only read. Each alternative ran end to end on it: the same transforms, "
        f"batch {result.run.batch_size} and training step ({result.compute.label}), cache regime "
        f"{result.config.get('cache')}, until its interval was within ± 5 % or {result.config.get('seconds')} s.",
        f"- Copies and shards were made in a scratch folder in `{result.scratch}` ({result.scratch_fs}; "
        f"{size(result.scratch_bytes)} at most) and removed afterwards. Alternatives read there are marked so; when "
        "that is other storage than the data's, the same loose files were measured there too, as the control of "
        "every copy made there.",
        *(
            [
                f"- The shards were also written to `{result.scratch_store}` in your data's store and streamed from "
                "there (your pipeline on the store is their control), then removed; nothing was written to your "
                "data's prefix."
            ]
            if result.scratch_store
            else []
        ),
        *(
            [
                f"- Only the alternatives asked for were tried (`--only {','.join(result.config['only'])}`): the rest were not."
            ]
            if result.config.get("only")
            else []
        ),
        f"- Machine: {m.cpu_model}, {m.cpu_cores_usable} usable cores; device {result.run.device}.",
        *words.read_back_lines(result.run),
        "",
        f"Command: `{result.run.command}`; ioprof {result.run.ioprof_version}.",
        "",
    ]


def write(result: WhatifResult, out_dir: Path) -> Path:
    """Write report.md for ``ioprof whatif``; returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "report.md"
    atomic_write_text(report, render_whatif_markdown(result))
    return report


def headline(result: WhatifResult) -> str:
    return whatif_answer(result.ranking, result.setting).replace("**", "")


ALTERNATIVES = {
    "baseline": "your pipeline as it is",
    "threads": "a thread pool instead of worker processes (torchdata)",
    "decode_jpeg": "torchvision.io.decode_jpeg on the CPU instead of PIL",
    "gpu_decode": "batched nvJPEG decode on the GPU",
    "resized-256": "a copy pre-resized to a 256 px short side",
    "resized-320": "a copy pre-resized to a 320 px short side",
    "shards": "packed shards (tar, read sequentially)",
    "loose-on-scratch": "the same files (or shards), copied to the scratch storage (the copies' control)",
    "more-workers": "twice the loader's workers (twice the requests in flight)",
    "threads-per-worker-4": "4 threads reading each worker's batch (4× the requests in flight, no more processes)",
    "prefetch-1": "prefetch_factor=1",
    "prefetch-4": "prefetch_factor=4",
    "prefetch-8": "prefetch_factor=8",
    "in_order": "in_order=False (batches handed over as they are made)",
    "persistent_workers": "persistent_workers=True",
    "pin_memory": "pin_memory=True",
    "cache": "the share of the dataset RAM can hold, warm",
}


WHY_NOT = {
    "needs-cuda": "needs a CUDA device; this machine has none",
    "not-built": "not built yet: it has never been run on a GPU with ioprof",
    "needs-workers": "applies to worker processes, and the current setting has none",
    "needs-two-workers": "applies to two worker processes or more: one worker makes its batches in order",
    "already-small": "the images are already that small",
    "emulated": "storage is emulated here: there is no page cache to warm",
    "object-store": "no page cache holds an object from a store: the local copy (loose files on the scratch "
    "folder) is the cache to compare",
    "sharded": "applies to loose image files; your data is already tar shards",
    "sharded-not-built": "not measured on tar shards in this version",  # results of ioprof 0.1.0
    "not-requests": "applies to data read by requests (an object store, shards over HTTP); more workers on a "
    "filesystem are the sweep's question (`ioprof sweep --workers`)",
}


# The change each alternative needs in a training script, in a few lines.
CODE = {
    "threads": """from torchdata.nodes import Batcher, Loader, Mapper, ParallelMapper, SamplerWrapper
node = ParallelMapper(SamplerWrapper(sampler), map_fn=dataset.__getitem__, num_workers=N, method="thread")
loader = Loader(Mapper(Batcher(node, batch_size=B, drop_last=True), collate_fn))""",
    "decode_jpeg": """from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2
dataset = ImageFolder(root, loader=lambda p: decode_jpeg(read_file(p), mode=ImageReadMode.RGB),
    transform=v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
                          v2.ToDtype(torch.float32, scale=True), v2.Normalize(mean, std)]))""",
    "resized-256": """# once, offline: every image with its short side at 256 px (e.g. PIL's Image.thumbnail, or
# `mogrify -resize "256x256^" *.jpg`), then point ImageFolder at the copy""",
    "resized-320": """# once, offline: every image with its short side at 320 px, then point ImageFolder at the copy""",
    "shards": """import webdataset as wds  # pack once: tar files of a few hundred MB, key.jpg + key.cls
dataset = (wds.WebDataset("shards/shard-{00000..00999}.tar", shardshuffle=True)
           .shuffle(1000).decode("pil").to_tuple("jpg", "cls").map_tuple(transform, int))
loader = DataLoader(dataset, batch_size=B, num_workers=N)""",
    "prefetch-1": "DataLoader(..., prefetch_factor=1)",
    "prefetch-4": "DataLoader(..., prefetch_factor=4)",
    "prefetch-8": "DataLoader(..., prefetch_factor=8)",
    "persistent_workers": "DataLoader(..., persistent_workers=True)",
    "in_order": "DataLoader(..., in_order=False)  # batches may come in another order than the sampler's",
    "more-workers": "DataLoader(..., num_workers=2 * N)  # each worker makes its own client after the fork",
    "threads-per-worker-4": """class Threaded(Dataset):  # DataLoader hands each worker its batch's indices here
    def __getitems__(self, indices):  # a pool made in the worker, after the fork
        self.pool = getattr(self, "pool", None) or ThreadPoolExecutor(4)
        return [self.decode(b, i) for i, b in zip(indices, self.pool.map(self.get_object, indices))]""",
    "pin_memory": "DataLoader(..., pin_memory=True); batch.to(device, non_blocking=True)",
    "cache": "# more RAM for the page cache (or a smaller dataset): the warm share is served from memory",
}


def why_not(code: str) -> str:
    if code.startswith("missing:"):
        package = code.split(":", 1)[1]
        return f"{package} is not installed (pip install {package})"
    if code.startswith("pages-not-kept:"):
        fs = code.split(":", 1)[1]
        return (
            f"it cannot be warm here: {fs} drops read pages at every open (checked: files read and closed were no "
            "longer resident), so every epoch reads the storage whatever RAM there is"
        )
    return WHY_NOT.get(code, code)


def _on_its_data(x: RankedAlternative) -> str:
    if x.data_gain is None or x.control == "baseline":
        return ""
    how = (
        "estimated from the bytes per image it reads against the bandwidth your storage delivered read alone"
        if x.data_gain_estimated
        else "measured"
    )
    return f" On your data's own storage it would give about {x.data_gain:.2f}× ({how})."


def whatif_answer(r: Ranking | None, setting: str) -> str:
    """``ioprof whatif``'s first sentence: each fix credited with its gain over its control only,
    the storage move named as what it is."""
    if r is None or not r.ranked:
        return "**No answer** — your current pipeline could not be measured."
    runs = sorted(x.img_per_s for x in r.ranked if is_current(x.name))
    pace = f"{rate_span(runs[0], runs[-1])} img/s" + (f" over its {len(runs)} runs" if len(runs) > 1 else "")
    now = f"your current setting ({setting}, {pace})"
    move = next((x for x in r.ranked if x.name == r.storage_move), None)
    move_text = (
        f" The same loose files on the scratch storage run {move.gain:.2f}× faster than where they live: that "
        f"part of any gain is moving the data, not changing how it is read — `ioprof place` measures where it "
        "should live and whether the copy pays."
        if move is not None
        else ""
    )
    if r.best:
        best = next(x for x in r.ranked if x.name == r.best)
        against = (
            "its control, the same loose files on the same scratch storage"
            if best.control != "baseline"
            else now
        )
        return (
            f"**{words.first_up(ALTERNATIVES.get(best.name, best.name))} is the best fix: {rate(best.img_per_s)} img/s, "
            f"{best.fix_gain or 0:.2f}× {against}** — beyond the noise of both.{_on_its_data(best)}{move_text}"
        )
    if move is not None:
        return (
            f"**No fix beats its control beyond the noise; moving the data does**: the same loose files on the "
            f"scratch storage run {move.gain:.2f}× {now} — that is where the data lives, not how it is read: "
            "`ioprof place` measures where it should live and whether the copy pays."
        )
    if r.compute_bound:
        return (
            f"**Nothing beats {now} beyond the noise: training is compute-bound here, so a faster input pipeline "
            "cannot speed it up.**"
        )
    return (
        f"**Nothing measured beats {now} beyond the noise**, though it is {r.baseline_input_bound} input-bound: "
        "see what was not measured here."
    )
