from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import paths
import pytest

from ioprof.datasets.synth import DatasetSpec, generate

REPO = paths.REPO

# Started in the background by a shell without job control (`.ci/run &`, nohup), the tests inherit
# SIGINT ignored, and so would every ioprof they start: Python then never raises KeyboardInterrupt,
# and the tests of Ctrl-C would see the run finish instead. A handler here is reset to the default
# in each child at exec, where an ignored signal would stay ignored.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--core-each",
        action="store_true",
        help="under pytest-xdist, hold each worker and all it starts to one core of its own (the link "
        "lane: tests marked `link` run two at a time, each a one-core machine with its own shaped link)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """``--core-each``: worker gwN runs on the Nth core it may use, and so does every process it
    starts (the affinity is inherited): its pace and its runs are that core's alone, whatever the
    other worker does on the other. Its runs' CPU truths are their cgroups' (``groundtruth.CpuGroup``):
    a core's line in ``/proc/stat`` also holds the interrupts it serves for the whole machine."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if config.getoption("--core-each") and worker.startswith("gw"):
        cores = sorted(os.sched_getaffinity(0))
        index = int(worker[2:])
        if index >= len(cores):
            raise pytest.UsageError(
                f"--core-each: worker {worker} has no core of its own ({len(cores)} cores)"
            )
        for thread in os.listdir("/proc/self/task"):  # an affinity is a thread's: execnet's too
            os.sched_setaffinity(int(thread), {cores[index]})


@pytest.fixture(scope="session")
def small_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """48 photo-like JPEGs at 96x72 in 4 class folders."""
    root = tmp_path_factory.mktemp("data") / "96x72"
    generate(DatasetSpec(*paths.SMALL_SET), root)
    return root


@pytest.fixture(scope="session")
def large_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 photo-like JPEGs at 1024x768: decoding them is the expensive part."""
    root = tmp_path_factory.mktemp("data") / "1024x768"
    generate(DatasetSpec(*paths.LARGE_SET), root)
    return root


@pytest.fixture()
def blob_files(tmp_path: Path) -> list[str]:
    """40 files of 256 kB of random bytes (for raw-read measurements)."""
    paths = []
    for i in range(40):
        p = tmp_path / f"blob_{i:03d}.bin"
        p.write_bytes(os.urandom(256 * 1024))
        paths.append(str(p))
    return paths


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated default datasets go to a test folder, never the user's cache."""
    monkeypatch.setenv("IOPROF_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ioprof-cache"))


@pytest.fixture()
def in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """``ioprof ARGS`` run by ``cli.main`` in ``tmp_path``: (exit code, stdout, stderr)."""
    from ioprof.cli import main

    monkeypatch.chdir(tmp_path)

    def call(*args: str) -> tuple[int, str, str]:
        try:
            rc = main(list(args))
        except SystemExit as e:  # argparse's usage errors
            rc = int(e.code or 0)
        out, err = capsys.readouterr()
        return rc, out, err

    return call


_FIGURES: list[str] = []


@pytest.fixture(scope="session")
def figure() -> Callable[[str], None]:
    """Say a figure a test checked against its ground truth: printed in the run's summary, so a
    CI log carries what ioprof measured beside what the plain reader or the kernel saw."""
    return _FIGURES.append


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every end-to-end test runs a live rig: marked ``rig``, so that the inner loop
    (``pytest -m "not rig"``) leaves them out, as it leaves out the unit tests marked so — except
    those marked ``shares_cores``, which time nothing against the host and run beside another."""
    for item in items:
        e2e = "tests/e2e/" in item.nodeid or item.nodeid.startswith("e2e/")
        if e2e and item.get_closest_marker("shares_cores") is None:
            item.add_marker(pytest.mark.rig)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under pytest-xdist a test runs in a worker process, whose summary nobody sees: the figures
    it said travel to the controller on its report, which carries ``user_properties``."""
    outcome = yield
    if os.environ.get("PYTEST_XDIST_WORKER") and _FIGURES:
        outcome.get_result().user_properties.extend(("figure", line) for line in _FIGURES)
        _FIGURES.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        _FIGURES.extend(str(value) for name, value in report.user_properties if name == "figure")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _FIGURES:
        terminalreporter.section("figures checked against ground truth")
        for line in _FIGURES:
            terminalreporter.write_line(line)
