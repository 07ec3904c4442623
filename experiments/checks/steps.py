"""A plain training step built from parts, for projects that have no step function."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from experiments.checks._common import Forward, LossFn, TrainStep, default_forward, split_batch

OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]


def make_train_step(
    model: nn.Module,
    loss_fn: LossFn,
    optimizer_factory: OptimizerFactory,
    *,
    forward: Forward | None = None,
) -> TrainStep:
    """``train_step(batch) -> loss``: train mode, zero_grad, forward, loss, backward, step.

    The optimizer is built once, here, from ``optimizer_factory(model.parameters())``
    (e.g. ``lambda params: torch.optim.Adam(params, lr=1e-3)``), and kept across calls,
    as a training loop keeps it. The loss returned is the batch's loss before the update.
    Use the project's own step instead when it has one: the checks then test its code.
    """
    forward = forward or default_forward
    optimizer = optimizer_factory(model.parameters())

    def train_step(batch: Any) -> float:
        inputs, targets = split_batch(batch)
        model.train()
        optimizer.zero_grad()
        loss = loss_fn(forward(model, inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.item()

    return train_step
