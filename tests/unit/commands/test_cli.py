"""The command line through ``ioprof.cli.main`` in this process: help, usage errors, the quick
refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import paths
import pytest
from cli import ioprof

REPO = paths.REPO


@pytest.mark.parametrize(
    "args, needle",
    [
        (["sweep", "--data", "/nonexistent/images"], "--data /nonexistent/images: no such directory"),
        (  # refused before any request: a pattern that names no tar shards
            ["sweep", "--data", "https://h/train-{0..9}.jpg"],
            "--data https://h/train-{0..9}.jpg: https://h/train-0.jpg is not a .tar shard",
        ),
        (["report", "/nonexistent/results.json"], "/nonexistent/results.json: no such file"),
        (["sweep", "--precision", "fp16", "--device", "cpu"], "--precision fp16 needs a CUDA device"),
        (
            ["place", "--candidates", "/tmp", "--precision", "tf32", "--device", "cpu"],
            "--precision tf32 needs",
        ),
    ],
)
def test_user_errors_are_one_line_exit_1(args: list[str], needle: str, tmp_path: Path, in_process) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = in_process(*args)
    assert rc == 1
    lines = err.strip().splitlines()
    assert lines[-1] == f"ioprof: error: {needle}" or lines[-1].startswith(f"ioprof: error: {needle}")
    assert "Traceback" not in err
    assert not (tmp_path / "reports").exists()  # nothing made before the input was checked


def test_empty_folder_is_a_clear_error(tmp_path: Path, in_process) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "empty").mkdir()
    rc, _, err = in_process("sweep", "--data", str(tmp_path / "empty"))
    assert rc == 1 and "holds no images" in err and "Traceback" not in err


def test_bad_usage_exit_2(tmp_path: Path) -> None:
    p = ioprof("sweep", "--workers", "a,b", cwd=tmp_path)
    assert p.returncode == 2 and "positive integers" in p.stderr


def test_env_says_why_no_gpu(in_process) -> None:  # type: ignore[no-untyped-def]
    rc, out, _ = in_process("env")
    assert rc == 0
    assert "GPU telemetry (NVML):" in out and "CPU:" in out
    assert (
        "  h200: 4,703 img/s measured" in out and "  a100: 2,470 img/s published" in out
    )  # which a preset is


def test_gen_writes_manifest(tmp_path: Path) -> None:
    p = ioprof("gen", "--resolutions", "64x48", "--images", "8", "--out", str(tmp_path / "g"))
    assert p.returncode == 0, p.stderr
    manifest = json.loads((tmp_path / "g" / "manifest.json").read_text())
    assert manifest["datasets"][0]["files"] == 8
    assert len(list((tmp_path / "g" / "64x48").rglob("*.jpg"))) == 8


@pytest.mark.skipif(shutil.which("ioprof") is None, reason="the package is not installed (pip install -e .)")
def test_console_script_is_the_same_program() -> None:
    p = subprocess.run(["ioprof", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("ioprof ")


PROBE_ARGS = {
    "compute": ["--compute", "sim:500", "--batch-size", "4", "--model", "tiny", "--crop-px", "32"],
    # batches of 16: batches of 4 tiny images jittered past ±5 % until the ceiling's 8 s cap (2-8 s now)
    "decode": ["--workers", "2", "--loaders", "multiprocess", "--batch-size", "16", "--crop-px", "32"],
    "storage": ["--workers", "2"],
}


@pytest.mark.parametrize("stage", ["compute", "decode", "storage"])
def test_probe_measures_one_stage(stage: str, small_set: Path, tmp_path: Path) -> None:
    out = tmp_path / stage
    data_args = [] if stage == "compute" else ["--data", str(small_set)]
    p = ioprof("probe", stage, *data_args, *PROBE_ARGS[stage], "--out", str(out))
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "results.json").read_text())
    assert data["cells"] == []
    assert (data["compute"] is not None) == (stage == "compute")
    if stage != "compute":
        ceilings = data["ceilings"][0]
        assert bool(ceilings["decode"]) == (stage == "decode") and bool(ceilings["storage"]) == (
            stage == "storage"
        )
    report = (out / "report.md").read_text()
    assert "## Stage ceilings" in report and "![Training throughput" not in report
    # a probe is one ceiling, said so; not a sweep whose cells all failed
    assert report.startswith(f"# ioprof probe {stage} — ")
    assert f"**The {stage} ceiling alone**" in report
    assert "no cell finished" not in report and "## Every cell" not in report


@pytest.mark.parametrize(
    "stage, flag",
    [
        ("decode", "--precision"),
        ("decode", "--pin-memory"),
        ("storage", "--batch-size"),
        ("compute", "--data"),
    ],
)
def test_each_probe_offers_only_the_options_that_apply(stage: str, flag: str, tmp_path: Path) -> None:
    p = ioprof("probe", stage, flag, "x", cwd=tmp_path)
    assert p.returncode == 2 and "unrecognized arguments" in p.stderr


def test_every_option_of_every_command_has_help() -> None:
    from ioprof.cli import build_parser

    def walk(parser):  # type: ignore[no-untyped-def]
        for action in parser._actions:
            if action.option_strings and action.dest not in ("help", "version"):
                yield parser.prog, action
            for sub in getattr(action, "choices", None) or {}:
                if isinstance(action.choices, dict):
                    yield from walk(action.choices[sub])

    missing = [f"{prog} {a.option_strings[0]}" for prog, a in walk(build_parser()) if not a.help]
    assert missing == []


def test_the_cli_runs_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ioprof.cli import main

    assert main(["probe", "compute", *PROBE_ARGS["compute"], "--out", str(tmp_path / "o")]) == 0
    assert json.loads((tmp_path / "o" / "results.json").read_text())["compute"]["simulated"] is True
    assert main(["report", str(tmp_path / "nope")]) == 1
    assert capsys.readouterr().err.strip().endswith("no such file; pass the results.json of a finished run")


def test_probe_compute_reads_and_generates_no_dataset(
    tmp_path: Path,
    in_process,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("IOPROF_CACHE_DIR", str(cache))
    # a simulated step: the tiny model's real one (about 2 ms) never came within ±5 % on a noisy host
    # and ran to the ceiling's 20 s cap; what is asked here is that no dataset is made
    rc, _, err = in_process(
        "probe",
        "compute",
        "--compute",
        "sim:500",
        "--model",
        "tiny",
        "--crop-px",
        "32",
        "--out",
        str(tmp_path / "out"),
    )
    assert rc == 0, err
    assert not cache.exists() or not any(cache.iterdir())
    assert json.loads((tmp_path / "out" / "results.json").read_text())["datasets"] == []
