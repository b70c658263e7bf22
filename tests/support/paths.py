"""Where things are, for every test: the repository, its test data, the training scripts tests run."""

from __future__ import annotations

import hashlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
DATA = TESTS / "data"
AWKWARD = REPO / "datasets_fixtures" / "awkward"
SCRIPTS = TESTS / "scripts"
IMAGENET_LIKE = SCRIPTS / "train_imagenet_like.py"  # written here as PyTorch's ImageNet example is
IMAGENET_EXAMPLE = SCRIPTS / "thirdparty" / "pytorch_examples_imagenet" / "main.py"  # nobody here wrote it
# the suite's own datasets (width, height, images), made by ``conftest`` and by ``record.py`` alike:
# small photos, and large ones whose decode is the expensive part
SMALL_SET = (96, 72, 48)
LARGE_SET = (1024, 768, 24)


def tree_digest(root: Path) -> str:
    """A digest of every name, mode, mtime and byte under ``root``: equal before and after means untouched."""
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        st = f.lstat()
        h.update(f"{f.relative_to(root)} {st.st_mode} {st.st_mtime_ns}".encode())
        if f.is_file():
            h.update(f.read_bytes())
    return h.hexdigest()
