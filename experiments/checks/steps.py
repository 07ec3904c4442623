"""Training steps for the checks that take one: a plain step built from parts, for projects
that have no step function, and a step that drives a project's ``fit()`` one batch at a
time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from experiments.checks._common import (
    Forward,
    LossFn,
    TrainStep,
    default_forward,
    fail,
    split_batch,
)

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


def one_batch_loader(batch: Any) -> DataLoader:
    """A ``DataLoader`` yielding exactly ``batch`` (a tuple of tensors) once per pass: what
    a ``fit()``-style API takes, so that one epoch of it is one step on that batch."""
    tensors = tuple(batch)
    return DataLoader(TensorDataset(*tensors), batch_size=len(tensors[0]))


@contextmanager
def recorded_losses() -> Iterator[list[float]]:
    """Every ``loss.backward()`` run inside the block, as the loss's value (the project's
    own loss, seen where it is used, whatever API computed it)."""
    seen: list[float] = []
    original = torch.Tensor.backward

    def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if self.numel() == 1:
            seen.append(float(self.detach()))
        return original(self, *args, **kwargs)

    torch.Tensor.backward = backward  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        torch.Tensor.backward = original  # type: ignore[method-assign]


def make_fit_step(fit: Callable[[Any], Any]) -> TrainStep:
    """``train_step(batch) -> loss`` that drives a ``fit()``-style API one step at a time,
    for the checks that take a step: ``fit(batch)`` must train once on that batch (e.g.
    ``lambda batch: trainer.fit(model, one_batch_loader(batch), epochs=1)``). The loss
    returned is the one its first ``backward()`` ran on, before the update; a ``fit``
    that runs no backward (its loop broken, or a library that does not call
    ``Tensor.backward``) fails with a ``CheckFailed`` saying so."""

    def train_step(batch: Any) -> float:
        __tracebackhide__ = True
        with recorded_losses() as losses:
            fit(batch)
        if not losses:
            raise fail(
                "make_fit_step",
                "fit(batch) to run loss.backward() at least once",
                "no backward",
                "The training loop never computed a gradient: backward() removed, a loss "
                "with no graph, or fit() stopped before its first step.",
            )
        return losses[0]

    return train_step
