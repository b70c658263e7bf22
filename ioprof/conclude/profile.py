"""An epoch's time predicted from a profile, and the profile's own checks: pure, no words.

The prediction multiplies the measured per-step means (data wait, and everything else) by the
steps of an epoch and adds the workers' start-up once. It assumes the regime it was measured in —
cold for the first epoch, warm for later ones when the dataset fits in RAM — and cannot know what
the run will add: evaluation passes, checkpoints, logging, other jobs on the machine, thermal limits.
"""

from __future__ import annotations

from dataclasses import replace

from ioprof.core.results_profile import EpochPrediction, PhaseTimes, ProfileConclusions, ProfileResult
from ioprof.core.stats import ratio_interval

COMPUTE_PHASES = ("copy", "forward", "backward", "update", "loss_read")


def predict(phases: PhaseTimes, regime: str, images: int, batch: int, startup_s: float) -> EpochPrediction:
    steps = images // batch
    n = max(1, len(phases.data_wait_s))
    wait = sum(phases.data_wait_s) / n
    compute = sum(phases.compute_s()) / n
    per_step = ratio_interval(phases.step_s(), [1.0] * len(phases.step_s()))
    total = startup_s + steps * (wait + compute)
    scale = steps * per_step.rel_half_width * per_step.value if per_step.known else None
    return EpochPrediction(
        regime=regime,
        images=images,
        steps=steps,
        startup_s=startup_s,
        input_s=steps * wait,
        compute_s=steps * compute,
        total_s=total,
        total_low_s=total - scale if scale is not None else None,
        total_high_s=total + scale if scale is not None else None,
    )


def conclude(result: ProfileResult) -> ProfileResult:
    """The epoch predictions, the check against a measured epoch, the hooks' cost, the top layer."""
    predictions = [predict(result.cold, "cold", result.epoch_images, result.batch_size, result.startup_s)]
    if result.warm is not None:
        predictions.append(
            predict(result.warm, "warm", result.epoch_images, result.batch_size, result.startup_s)
        )
    check = None
    m = result.measured_epoch
    if m is not None and m.seconds > 0:
        same = predict(
            result.cold if m.regime == "cold" else (result.warm or result.cold),
            m.regime,
            m.images,
            result.batch_size,
            result.startup_s,
        )
        check = (same.total_s - m.seconds) / m.seconds
    base = sum(result.cold.compute_s()) / max(1, len(result.cold.compute_s()))  # the same loader, no hooks
    hooked = sum(result.hooked.compute_s()) / max(1, len(result.hooked.compute_s()))
    n = max(1, len(result.hooked.forward_s))
    fwd_bwd = (sum(result.hooked.forward_s) + sum(result.hooked.backward_s)) / n
    layers = sum(layer.mean_s() for layer in result.layers)
    top = max(result.layers, key=lambda layer: layer.mean_s(), default=None)
    return replace(
        result,
        prediction=ProfileConclusions(
            predictions=tuple(predictions),
            check_error=check,
            hooks_cost=hooked / base - 1 if base > 0 else None,
            layers_cover=layers / fwd_bwd if fwd_bwd > 0 else None,
            top_layer=top.name if top else "",
        ),
    )
