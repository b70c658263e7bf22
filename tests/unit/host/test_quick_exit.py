"""The program's quick exit: everything ``sys.exit`` would do for the user is done — the exit code,
the other threads' work, the exit handlers (temporary folders removed), the buffered output — and
only the native libraries' teardown is skipped."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import paths

CHILD = """
import atexit, sys, tempfile, threading, time
from pathlib import Path
from ioprof.host.processes import quick_exit

out = Path(sys.argv[1])
keep = tempfile.TemporaryDirectory(dir=out)  # removed by its finalizer at exit
(Path(keep.name) / "x").write_text("x")
atexit.register(lambda: (out / "atexit").write_text("ran"))
def late():
    time.sleep(0.3)
    (out / "thread").write_text("done")
threading.Thread(target=late).start()
for _ in range(5000):  # the last few kB still in Python's buffer when it exits
    sys.stdout.write("line\\n")
quick_exit(CODE)
"""


def _child(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    src = textwrap.dedent(CHILD).replace("CODE", code)
    return subprocess.run(
        [sys.executable, "-c", src, str(tmp_path)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(paths.REPO)},
        timeout=60,
    )


def test_the_quick_exit_keeps_the_code_the_threads_the_handlers_and_the_output(tmp_path: Path) -> None:
    p = _child(tmp_path, "3")
    assert p.returncode == 3, p.stderr
    assert p.stdout == "line\n" * 5000
    assert (tmp_path / "thread").read_text() == "done" and (tmp_path / "atexit").read_text() == "ran"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["atexit", "thread"]  # the temporary folder went


def test_a_message_as_the_exit_code_is_printed_and_exits_1(tmp_path: Path) -> None:
    p = _child(tmp_path, "'ioprof: stopped'")
    assert (p.returncode, p.stderr.strip()) == (1, "ioprof: stopped")
