"""The models ``ioprof devices`` trains, their synthetic input, and the timed training loop that
runs them on one device or, under DDP, on one rank.

The four models of the seed that compared a CPU, one GPU and two GPUs (an MLP and LeNet-5 on
MNIST-sized input, an LSTM over 28 steps of 28 features, a ResNet-152 on ImageNet-sized input),
plus the ResNet-50 every other command trains. Input is random tensors made once on the device:
what is timed is the model's step, not a loader.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torchvision import models

from ioprof.core.errors import IoprofError


@dataclass(frozen=True)
class DeviceModel:
    name: str
    input_shape: tuple[int, ...]  # one sample
    classes: int
    build: Callable[[], nn.Module]


class _LeNet5(nn.Sequential):
    def __init__(self) -> None:
        super().__init__(
            nn.Conv2d(1, 6, 5),
            nn.Tanh(),
            nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.Tanh(),
            nn.AvgPool2d(2),
            nn.Flatten(),
            nn.Linear(16 * 5 * 5, 120),
            nn.Tanh(),
            nn.Linear(120, 84),
            nn.Tanh(),
            nn.Linear(84, 10),
        )


class _LstmClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_size=28, hidden_size=128, num_layers=2, batch_first=True)
        self.head = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def _mlp() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )


DEVICE_MODEL_SPECS: dict[str, DeviceModel] = {
    m.name: m
    for m in (
        DeviceModel("mlp", (1, 28, 28), 10, _mlp),
        DeviceModel("lenet5", (1, 32, 32), 10, _LeNet5),
        DeviceModel("lstm", (28, 28), 10, _LstmClassifier),
        DeviceModel("resnet50", (3, 224, 224), 1000, lambda: models.resnet50(weights=None)),
        DeviceModel("resnet152", (3, 224, 224), 1000, lambda: models.resnet152(weights=None)),
    )
}


def device_model(name: str) -> DeviceModel:
    try:
        return DEVICE_MODEL_SPECS[name]
    except KeyError:
        raise IoprofError(f"--models {name}: unknown; use {', '.join(DEVICE_MODEL_SPECS)}") from None


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def gradient_bytes(model: nn.Module) -> int:
    """What DDP all-reduces per step: every trainable parameter's gradient."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


class Trainer:
    """SGD on one fixed synthetic batch, as a training step runs: forward, loss, backward, update.

    ``model`` may be wrapped in DistributedDataParallel: its backward then all-reduces.
    """

    def __init__(
        self, model: nn.Module, spec: DeviceModel, batch_size: int, device: torch.device, seed: int = 0
    ) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn((batch_size, *spec.input_shape), generator=g).to(device)
        self.y = torch.randint(0, spec.classes, (batch_size,), generator=g).to(device)
        self.model = model
        self.device = device
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.loss = nn.CrossEntropyLoss()

    def step(self) -> float:
        """One step, timed on the host clock until the device has finished it."""
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        self.loss(self.model(self.x), self.y).backward()
        self.opt.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - t0

    def steps(self, n: int) -> list[float]:
        return [self.step() for _ in range(n)]
