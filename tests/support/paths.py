"""Where things are, for every test: the repository, its test data, the training scripts tests run."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
DATA = TESTS / "data"
AWKWARD = REPO / "datasets_fixtures" / "awkward"
SCRIPTS = TESTS / "scripts"
IMAGENET_LIKE = SCRIPTS / "train_imagenet_like.py"  # written here as PyTorch's ImageNet example is
IMAGENET_EXAMPLE = SCRIPTS / "thirdparty" / "pytorch_examples_imagenet" / "main.py"  # nobody here wrote it
