"""Checks on what one backward pass and one step do to each parameter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from experiments.checks._common import (
    Forward,
    LossFn,
    TrainStep,
    default_forward,
    fail,
    kept_modes,
    name_list,
    seeded,
    split_batch,
    trainable,
)


def check_gradients(
    model: nn.Module,
    batch: Any,
    loss_fn: LossFn,
    *,
    forward: Forward | None = None,
    ignore: Sequence[str] = (),
    seed: int = 0,
) -> None:
    """Every parameter that should train gets a finite, non-zero gradient from one batch.

    Computes ``loss_fn(forward(model, inputs), targets)`` in train mode, calls backward,
    and inspects each parameter with ``requires_grad`` (minus names or prefixes in
    ``ignore``, for parts that legitimately get no gradient from this batch). Leaves the
    model's gradients and modes as they were. Catches: a loss with no graph (computed
    from ``.item()``, under ``no_grad``), activations detached inside ``forward``,
    layers the forward never uses, dead units from a zero init, NaN/inf gradients.
    Cannot catch: gradients of the wrong size or sign, anything the optimizer does
    afterwards (use ``check_params_change``).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    forward = forward or default_forward
    inputs, targets = split_batch(batch)
    params = trainable(model, ignore)
    if not params:
        raise ValueError("check_gradients: the model has no parameter with requires_grad")
    saved = {name: p.grad for name, p in params}
    try:
        for _, p in params:
            p.grad = None
        with kept_modes(model), seeded(seed):
            model.train()
            loss = loss_fn(forward(model, inputs), targets)
        if not (isinstance(loss, torch.Tensor) and loss.requires_grad):
            raise fail(
                "check_gradients",
                "a loss tensor attached to the model's graph",
                f"{type(loss).__name__} without a graph",
                "The loss was rebuilt from .item(), detached, or computed under "
                "torch.no_grad(): backward() cannot reach the model.",
            )
        loss.backward()
        missing = [n for n, p in params if p.grad is None]
        bad = [n for n, p in params if p.grad is not None and not torch.isfinite(p.grad).all()]
        zero = [n for n, p in params if p.grad is not None and not p.grad.any()]
    finally:
        for name, p in params:
            p.grad = saved[name]
    problems = []
    if missing:
        problems.append(f"no gradient for {name_list(missing)}")
    if bad:
        problems.append(f"NaN/inf gradient for {name_list(bad)}")
    if zero:
        problems.append(f"all-zero gradient for {name_list(zero)}")
    if problems:
        raise fail(
            "check_gradients",
            f"a finite, non-zero gradient for each of {len(params)} trainable parameters",
            "; ".join(problems),
            "No gradient: the parameter is off the loss's graph (a detach() or .data in "
            "forward, an unused layer). Zero: dead units (zero or constant init, ReLUs "
            "that never fire). Non-finite: overflow in the forward or the loss. Pass "
            "ignore=[...] for parameters that legitimately get none from this batch.",
        )


def check_params_change(
    model: nn.Module,
    batch: Any,
    train_step: TrainStep,
    *,
    ignore: Sequence[str] = (),
    seed: int = 0,
) -> None:
    """One ``train_step(batch)`` changes every parameter that should train.

    Snapshots the parameters with ``requires_grad`` (minus ``ignore``), runs one step
    under ``seed`` and compares. Trains the model (one step). Catches: no backward, no
    ``optimizer.step()``, ``zero_grad()`` between backward and step, step before
    backward, an optimizer holding other tensors than the model's (built before the
    model was re-created, given only the last layer), detached layers, a loss with no
    graph. Cannot catch: a step of the wrong size or direction (see
    ``check_loss_decreases``), gradients that accumulate across steps.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    params = trainable(model, ignore)
    if not params:
        raise ValueError("check_params_change: the model has no parameter with requires_grad")
    before = [p.detach().clone() for _, p in params]
    with seeded(seed):
        train_step(batch)
    unchanged = [n for (n, p), old in zip(params, before) if torch.equal(p.detach(), old)]
    broken = [n for n, p in params if not torch.isfinite(p.detach()).all()]
    if broken:
        raise fail(
            "check_params_change",
            "finite parameters after one step",
            f"NaN/inf in {name_list(broken)}",
        )
    if not unchanged:
        return
    if len(unchanged) == len(params):
        hint = (
            "The step changes nothing: backward() or optimizer.step() missing, zero_grad() "
            "between backward() and step(), step() before backward(), a loss with no "
            "graph, or an optimizer built on other parameters (the model re-created "
            "after the optimizer)."
        )
    else:
        hint = (
            "These never train: not given to the optimizer, cut off by a detach() in "
            "forward, or frozen by mistake; pass ignore=[...] if that is intended."
        )
    raise fail(
        "check_params_change",
        f"all {len(params)} trainable parameters to change after one step",
        f"{len(unchanged)} unchanged: {name_list(unchanged)}",
        hint,
    )
