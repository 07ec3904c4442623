"""Checks on loss values: where training starts, whether it goes down, whether it can fit.

All three read the loss the project computes (a number, or a ``train_step(batch)`` that
returns the loss of the batch it trained on, computed before its update), so the
project's own loss code is what gets checked, not a re-implementation of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from experiments.checks._common import TrainStep, fail, finite, seeded, to_float

LOSS_KINDS = ("cross_entropy", "nll", "bce", "mse")


def expected_initial_loss(
    kind: str, *, num_classes: int | None = None, targets: torch.Tensor | None = None
) -> float:
    """The loss a freshly initialised model should start at, for a loss ``kind``.

    ``cross_entropy`` / ``nll`` over C classes: ln C (near-zero logits give every class
    1/C). ``bce`` (with logits): ln 2 (p = 0.5 for every sample, whatever the targets).
    ``mse``: the mean of ``targets ** 2`` (predictions near zero), 1.0 for standardized
    targets. These hold for inits that keep the outputs small (PyTorch's defaults on
    normalized inputs, or a small head init); a model built to start elsewhere (a bias set
    to the class prior) needs its own expected value.
    """
    if kind in ("cross_entropy", "nll"):
        if num_classes is None or num_classes < 2:
            raise ValueError(f"expected_initial_loss({kind!r}) needs num_classes >= 2")
        return math.log(num_classes)
    if kind == "bce":
        return math.log(2.0)
    if kind == "mse":
        if targets is None:
            raise ValueError("expected_initial_loss('mse') needs the targets of the batch")
        return float(targets.detach().float().pow(2).mean())
    raise ValueError(f"unknown loss kind {kind!r}; expected one of {', '.join(LOSS_KINDS)}")


def check_initial_loss(
    loss: float | torch.Tensor | Callable[[], Any],
    *,
    expected: float,
    rel_tol: float = 0.1,
    seed: int = 0,
) -> float:
    """The loss of an untrained model is within ``rel_tol`` of ``expected``.

    ``loss`` is the value, or a callable computing it (run once under ``seed``): the
    first ``train_step(batch)`` of a fresh model returns exactly this, since it computes
    the loss before updating. Catches: a sum instead of a mean (x batch size), logits
    that start large (init scale, unnormalized inputs), the wrong loss for the outputs
    (MSE on one-hot targets starts near 0.1, NLL on raw logits near 0), targets in the
    wrong form. Cannot catch: bugs that leave the first loss alone (a missing
    ``zero_grad``, the optimizer, most data bugs: shuffled labels still start at ln C),
    a double softmax (its first loss is ln C too).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    with seeded(seed):
        value = to_float(loss() if callable(loss) else loss)
    tolerance = rel_tol * abs(expected)
    if math.isfinite(value) and abs(value - expected) <= tolerance:
        return value
    if not math.isfinite(value):
        hint = "The loss is not finite before any training: a log of 0, a division by 0."
    elif value > expected:
        hint = (
            "Too high: a sum reduction instead of a mean, large initial logits "
            "(unnormalized inputs, an init with a large scale), or a loss that does not "
            "match the outputs."
        )
    else:
        hint = (
            "Too low: the loss is not the one you think (MSE on one-hot targets, NLL on "
            "raw scores instead of log-probabilities), or the targets leak into the inputs."
        )
    raise fail(
        "check_initial_loss",
        f"an initial loss of {expected:.4g} ± {tolerance:.2g}",
        f"{value:.4g}",
        hint,
    )


def _run_steps(train_step: TrainStep, batches: Iterable[Any], seed: int) -> list[float]:
    with seeded(seed):
        return [to_float(train_step(batch)) for batch in batches]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def check_loss_decreases(
    train_step: TrainStep,
    batches: Iterable[Any],
    *,
    min_drop: float = 0.1,
    seed: int = 0,
) -> list[float]:
    """A few training steps on real batches lower the loss by at least ``min_drop``.

    Runs ``train_step`` once per batch (different batches, as training sees them), then
    compares the mean loss of the last third of the steps with the first third: it must
    be at most ``(1 - min_drop)`` times as large, and every loss finite. Returns the
    losses. Trains the model. Catches: a learning rate 100x too large (the loss bounces
    or blows up) or 100x too small, an optimizer that barely moves (plain SGD at Adam's
    learning rate), updates that never happen. Cannot catch: bugs that still learn at
    first (label noise, a missing shuffle, leakage, a mis-set schedule later on); pick
    ``min_drop`` from what the correct setup does in the same steps.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    losses = _run_steps(train_step, batches, seed)
    if len(losses) < 3:
        raise ValueError(f"check_loss_decreases needs at least 3 batches; got {len(losses)}")
    if not finite(losses):
        step = next(i for i, v in enumerate(losses) if not math.isfinite(v))
        raise fail(
            "check_loss_decreases",
            "finite losses",
            f"{losses[step]} at step {step + 1} of {len(losses)}",
            "The updates are too large (learning rate, missing mean reduction) or a "
            "log/division meets 0.",
        )
    third = max(1, len(losses) // 3)
    first, last = _mean(losses[:third]), _mean(losses[-third:])
    if last <= (1 - min_drop) * first:
        return losses
    direction = "rose" if last > first else "fell too little"
    raise fail(
        "check_loss_decreases",
        f"the mean loss of the last {third} steps at most {1 - min_drop:.2f}x "
        f"that of the first {third}",
        f"{first:.4g} -> {last:.4g} ({direction}; losses {_brief(losses)})",
        "Nothing is learned at the expected speed: check the learning rate and the "
        "optimizer, that backward() and step() both run each batch, and zero_grad().",
    )


def _brief(losses: list[float]) -> str:
    shown = [f"{v:.3g}" for v in losses[:4]]
    if len(losses) > 6:
        shown.append("...")
    shown += [f"{v:.3g}" for v in losses[-2:]] if len(losses) > 4 else []
    return ", ".join(shown)


def check_overfit_batch(
    batch: Any,
    train_step: TrainStep,
    *,
    steps: int = 100,
    max_ratio: float = 0.1,
    min_loss: float | None = 0.0,
    seed: int = 0,
) -> list[float]:
    """Training on one batch over and over drives its loss to ``max_ratio`` of the start.

    A model that cannot memorise one small batch cannot learn the data set: the classic
    first check of a new loop. Runs ``train_step(batch)`` ``steps`` times; the mean of
    the last three losses must be at most ``max_ratio`` times the first; with
    ``min_loss`` set (default 0.0, right for cross-entropy, NLL and MSE) no loss may fall
    below it. Returns the losses. Trains the model. Catches: no learning at all (missing
    backward/step/zero_grad order), a capped loss (softmax before cross-entropy), a
    collapsed model (zero init, dead units), NLL on raw scores (the loss falls below 0).
    Cannot catch: bugs that hurt generalisation only (leakage, label noise, no
    shuffling, eval-time bugs), nor mixing or mispairing that is the same on every pass
    over the batch (a fixed batch mixed the same way is still memorisable).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    losses = _run_steps(train_step, [batch] * steps, seed)
    if not finite(losses):
        step = next(i for i, v in enumerate(losses) if not math.isfinite(v))
        raise fail("check_overfit_batch", "finite losses", f"{losses[step]} at step {step + 1}")
    if min_loss is not None and min(losses) < min_loss:
        raise fail(
            "check_overfit_batch",
            f"losses >= {min_loss:g} (this loss cannot go lower)",
            f"{min(losses):.4g}",
            "A loss that falls without bound: NLL on raw scores instead of "
            "log_softmax outputs, or a sign error.",
        )
    start, end = losses[0], _mean(losses[-3:])
    if end <= max_ratio * start:
        return losses
    raise fail(
        "check_overfit_batch",
        f"the loss on one repeated batch to fall to {max_ratio:g}x its start within {steps} steps",
        f"{start:.4g} -> {end:.4g} ({end / start:.2f}x)",
        "The model cannot memorise one batch: no effective updates, a capped loss "
        "(softmax before cross-entropy), or a model without the capacity (dead units "
        "from a zero init, activations removed, a learning rate far too small).",
    )
