"""A batch's images and bytes, however a collate function packed them."""

from __future__ import annotations

import collections
import dataclasses
from collections import UserDict

import numpy as np
import pytest
import torch

from ioprof.measure.batchtree import BUDGET, images_in, leaves, tensor_bytes


@dataclasses.dataclass
class Batch:
    images: torch.Tensor
    labels: torch.Tensor
    names: list[str]


class Slotted:
    __slots__ = ("labels", "pixels")

    def __init__(self) -> None:
        self.pixels = torch.zeros(5, 3, 2, 2)
        self.labels = torch.zeros(5, dtype=torch.long)


class Features(UserDict):  # type: ignore[type-arg]
    """As Hugging Face's BatchFeature: a mapping, not a dict."""


Pair = collections.namedtuple("Pair", "x y")


@pytest.mark.parametrize(
    ("batch", "images", "nbytes"),
    [
        (torch.zeros(7, 3), 7, 7 * 3 * 4),
        ((torch.zeros(3, 2), torch.zeros(3, dtype=torch.long)), 3, 3 * 2 * 4 + 3 * 8),
        ({"image": torch.zeros(4, 2), "label": torch.zeros(4)}, 4, 4 * 2 * 4 + 4 * 4),
        (
            Batch(torch.zeros(16, 3, 8, 8), torch.zeros(16, dtype=torch.long), ["a"] * 16),
            16,
            16 * 192 * 4 + 16 * 8,
        ),
        (Features(pixel_values=torch.zeros(9, 3)), 9, 9 * 3 * 4),
        (Slotted(), 5, 5 * 12 * 4 + 5 * 8),
        (Pair(np.zeros((6, 2)), torch.zeros(6)), 6, 6 * 4),  # NumPy counts as images, not as /dev/shm bytes
        ([torch.tensor(1.0), torch.zeros(2, 5)], 2, 4 + 2 * 5 * 4),  # a 0-dim tensor has no samples
        (["a", "b"], -1, 0),
        (None, -1, 0),
    ],
)
def test_a_batch_is_walked_as_pickle_walks_it(batch: object, images: int, nbytes: int) -> None:
    assert images_in(batch, -1) == images
    assert tensor_bytes(batch) == nbytes


def test_a_tensor_held_twice_counts_once_and_a_cycle_ends() -> None:
    t = torch.zeros(4, 4)
    cyclic: list[object] = [t, t]
    cyclic.append(cyclic)
    assert tensor_bytes(cyclic) == 64 and images_in(cyclic, -1) == 4


def test_the_walk_is_bounded_whatever_the_batch_refers_to() -> None:
    """A batch object holding its dataset (a long list) is walked no further than the budget: a
    batch's own data is a few hundred objects, and the walk runs at every batch."""

    class WithDataset:
        def __init__(self) -> None:
            self.images = torch.zeros(8, 3)
            self.dataset = [torch.zeros(1) for _ in range(3 * BUDGET)]

    assert images_in(WithDataset(), -1) == 8
    assert BUDGET // 2 < sum(1 for _ in leaves(WithDataset())) < BUDGET


def test_an_object_whose_attributes_raise_is_no_part_of_the_batch() -> None:
    class Raises:
        @property
        def shape(self) -> tuple[int, ...]:
            raise RuntimeError("not here")

    assert images_in([Raises(), torch.zeros(3)], -1) == 3
