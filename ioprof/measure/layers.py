"""Where the time goes inside a training step: per phase, per layer, per operator.

- Phases of each minibatch, on the real loader and model: data wait, host→device copy, forward,
  backward, optimizer update, loss read — on the host clock on the CPU, CUDA events on a GPU.
- Layers: every leaf module's forward (a pre- and a post-hook) and backward. Backward is timed by
  tensor hooks on each module's output, which fire when the gradient of that output is ready;
  the engine then computes that module's backward until the next such event, so the span between
  consecutive events is charged to the module (exact for a chain, approximate where branches
  interleave). Module backward hooks are not used: they break on in-place activations (ResNet's
  ``ReLU(inplace=True)``). The hooks' cost is measured by timing steps with and without them.
- Operators: a few steps under ``torch.profiler``, its trace written for Perfetto / HTA, and the
  operators with the most self time.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ioprof.core.results_profile import LayerTimes, OperatorTime, PhaseTimes

PHASES = ("data_wait", "copy", "forward", "backward", "update", "loss_read")


class Clock:
    """Stamps on the host clock (CPU), or CUDA events read after a synchronize (GPU)."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def stamp(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, a: Any, b: Any) -> float:
        """Seconds from stamp ``a`` to stamp ``b`` (after a synchronize on CUDA)."""
        return max(0.0, a.elapsed_time(b) / 1e3) if self.cuda else max(0.0, b - a)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


@dataclass
class _Layer:
    name: str
    kind: str
    params: int
    forward_s: list[float] = field(default_factory=list)  # per step, summed over calls
    backward_s: list[float] = field(default_factory=list)
    activation_bytes: int = 0
    calls: int = 0


class LayerHooks:
    """Forward and backward times of every leaf module, step by step."""

    def __init__(self, model: nn.Module, clock: Clock) -> None:
        self.clock = clock
        self.layers: dict[str, _Layer] = {}
        self._handles: list[Any] = []
        self._starts: dict[int, Any] = {}
        self._step_fwd: list[tuple[str, Any, Any]] = []
        self._grad_ready: list[tuple[Any, str]] = []
        self._modules = [(n, m) for n, m in model.named_modules() if n and not list(m.children())]
        for name, module in self._modules:
            params = sum(p.numel() for p in module.parameters(recurse=False))
            self.layers[name] = _Layer(name, type(module).__name__, params)
        self.attach()

    def attach(self) -> None:
        """Time the layers from the next step on (their figures accumulate across attachments)."""
        for name, module in self._modules:
            self._handles.append(module.register_forward_pre_hook(self._pre(name)))
            self._handles.append(module.register_forward_hook(self._post(name)))

    def _pre(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any) -> None:
            self._starts[id(module)] = self.clock.stamp()

        return hook

    def _post(self, name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            self._step_fwd.append((name, self._starts.pop(id(module)), self.clock.stamp()))
            if isinstance(output, torch.Tensor):
                self.layers[name].activation_bytes = output.numel() * output.element_size()
                if output.requires_grad:
                    output.register_hook(lambda grad: self._grad_ready.append((self.clock.stamp(), name)))

        return hook

    def end_step(self, backward_end: Any) -> None:
        """Charge this step's forward spans and backward spans to their layers."""
        self.clock.sync()
        forward: dict[str, float] = defaultdict(float)
        backward: dict[str, float] = defaultdict(float)
        calls: dict[str, int] = defaultdict(int)
        for name, a, b in self._step_fwd:
            forward[name] += self.clock.seconds(a, b)
            calls[name] += 1
        events = self._grad_ready
        for (t, name), (t_next, _) in zip(events, [*events[1:], (backward_end, "")], strict=True):
            backward[name] += self.clock.seconds(t, t_next)
        for name, layer in self.layers.items():
            layer.forward_s.append(forward.get(name, 0.0))
            layer.backward_s.append(backward.get(name, 0.0))
            layer.calls = calls.get(name, layer.calls)
        self._step_fwd, self._grad_ready = [], []

    def remove(self) -> None:
        """Stop timing (until ``attach``): steps run as they would without ioprof."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def results(self, step_s: float) -> tuple[LayerTimes, ...]:
        return tuple(
            LayerTimes(
                name=layer.name,
                kind=layer.kind,
                params=layer.params,
                activation_bytes=layer.activation_bytes,
                calls_per_step=layer.calls,
                forward_s=tuple(layer.forward_s),
                backward_s=tuple(layer.backward_s),
                share_of_step=(statistics.fmean(layer.forward_s) + statistics.fmean(layer.backward_s))
                / step_s
                if step_s > 0 and layer.forward_s
                else 0.0,
            )
            for layer in self.layers.values()
        )


@dataclass
class StepRunner:
    """One training step in phases: the model, its loss and optimizer, on ``device``."""

    model: nn.Module
    device: torch.device
    non_blocking: bool = False

    def __post_init__(self) -> None:
        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
        self.clock = Clock(self.device)

    def step(self, it: Iterator[Any], hooks: LayerHooks | None = None) -> tuple[dict[str, float], int] | None:
        """Run one step; returns seconds per phase and the images (None when the batch held none).

        The data wait is the host's time in ``next()``; the other phases are on the device's clock.
        """
        t0 = time.perf_counter()
        batch = next(it)
        wait = time.perf_counter() - t0
        images, labels = (batch.images, batch.labels) if hasattr(batch, "images") else batch
        if images is None:
            return None
        c = self.clock
        s = [c.stamp()]
        x = images.to(self.device, non_blocking=self.non_blocking)
        y = labels.to(self.device, non_blocking=self.non_blocking)
        s.append(c.stamp())
        loss = self.loss_fn(self.model(x), y)
        s.append(c.stamp())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        s.append(c.stamp())
        self.optimizer.step()
        s.append(c.stamp())
        loss.item()
        s.append(c.stamp())
        if hooks is not None:
            hooks.end_step(s[3])
        c.sync()
        out = {"data_wait": wait}
        for phase, a, b in zip(PHASES[1:], s[:-1], s[1:], strict=True):
            out[phase] = c.seconds(a, b)
        return out, int(images.shape[0])


def phase_times(samples: list[tuple[dict[str, float], int]]) -> PhaseTimes:
    return PhaseTimes(
        data_wait_s=tuple(s["data_wait"] for s, _ in samples),
        copy_s=tuple(s["copy"] for s, _ in samples),
        forward_s=tuple(s["forward"] for s, _ in samples),
        backward_s=tuple(s["backward"] for s, _ in samples),
        update_s=tuple(s["update"] for s, _ in samples),
        loss_read_s=tuple(s["loss_read"] for s, _ in samples),
        images=tuple(n for _, n in samples),
    )


def top_operators(prof: Any, cuda: bool, limit: int = 15) -> tuple[OperatorTime, ...]:
    """The operators with the most self time in a ``torch.profiler`` run, with their share."""
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    # operators only: not the profiler's step marks, the autograd engine's wrappers, or the DataLoader's scope
    skip = ("ProfilerStep", "autograd::engine", "enumerate(DataLoader)")
    averages = [e for e in prof.key_averages() if not e.key.startswith(skip)]
    total = sum(getattr(e, key) for e in averages) or 1
    ranked = sorted(averages, key=lambda e: getattr(e, key), reverse=True)[:limit]
    return tuple(OperatorTime(e.key, getattr(e, key) / 1e6, getattr(e, key) / total, e.count) for e in ranked)


@contextmanager
def _quiet_native_stderr() -> Iterator[None]:
    """Silence file descriptor 2 for a moment: the profiler's native library prints start/stop
    lines (and "no GPU" errors on a CUDA build without one) that are not the user's business."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def trace(run_steps: Callable[[int], object], steps: int, path: Path, cuda: bool) -> tuple[OperatorTime, ...]:
    """``steps`` steps under torch.profiler: the Chrome/Perfetto trace at ``path``, the top operators."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = profile(activities=activities, record_shapes=False)
    with _quiet_native_stderr():
        prof.start()
    try:
        run_steps(steps)
    finally:
        with _quiet_native_stderr():
            prof.stop()
    prof.export_chrome_trace(str(path))
    return top_operators(prof, cuda)
