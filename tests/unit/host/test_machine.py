"""What the machine gives a run: the memory a container's cgroup leaves for the page cache."""

from __future__ import annotations

from pathlib import Path

from ioprof.host.machine import cgroup_memory


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_cgroup_v2_limit_is_the_tightest_of_the_cgroup_and_its_parents(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "cg/memory.max": "max\n",
            "cg/memory.current": "100\n",
            "cg/kube/memory.max": "8589934592\n",
            "cg/kube/memory.current": "1073741824\n",
            "cg/kube/pod/memory.max": "max\n",
            "cg/kube/pod/memory.current": "1000\n",
        },
    )
    (tmp_path / "self").write_text("0::/kube/pod\n")
    assert cgroup_memory(str(tmp_path / "self"), str(tmp_path / "cg")) == (8589934592, 1073741824)


def test_cgroup_v1_memory_controller_and_no_limit(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "cg/memory/job/memory.limit_in_bytes": "2147483648\n",
            "cg/memory/job/memory.usage_in_bytes": "5\n",
            "cg/memory/memory.limit_in_bytes": "9223372036854771712\n",
            "cg/memory/memory.usage_in_bytes": "9\n",
        },
    )
    (tmp_path / "self").write_text("5:devices:/\n4:memory:/job\n1:cpu:/\n")
    assert cgroup_memory(str(tmp_path / "self"), str(tmp_path / "cg")) == (2147483648, 5)
    (tmp_path / "self").write_text("4:memory:/\n")  # the root only: 2^63 rounded down means no limit
    assert cgroup_memory(str(tmp_path / "self"), str(tmp_path / "cg")) is None
    assert cgroup_memory(str(tmp_path / "missing"), str(tmp_path / "cg")) is None
