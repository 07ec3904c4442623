"""What every check shares: the failure type, seeding, mode and state bookkeeping.

A check must leave the caller's world as it found it where it can (global RNG, the
model's train/eval flags, gradients it made), so a test that calls two checks in a row
sees the same thing as one that calls them apart. Checks that train (one step, a few
steps, overfitting) change the model and optimizer on purpose; their docstrings say so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

Forward = Callable[[nn.Module, Any], torch.Tensor]
LossFn = Callable[[torch.Tensor, Any], torch.Tensor]
TrainStep = Callable[[Any], Any]

# How many offending names a message lists before it says "and N more".
_MAX_NAMES = 6


class CheckFailed(AssertionError):
    """A training check saw the bug it looks for; the message says what it expected and saw.

    An ``AssertionError`` so pytest reports it as a test failure with the message alone.
    """


# pytest and tracebacks name an exception by its module: the public one, which users import.
CheckFailed.__module__ = "trainwreck.checks"


def fail(check: str, expected: str, seen: str, hint: str = "") -> CheckFailed:
    """One failure message shape for every check: expected, seen, then the likely causes."""
    message = f"{check}: expected {expected}; saw {seen}."
    if hint:
        message += f" {hint}"
    return CheckFailed(message)


def default_forward(model: nn.Module, inputs: Any) -> torch.Tensor:
    return model(inputs)


def split_batch(batch: Any) -> tuple[Any, Any]:
    """(inputs, targets) of a batch given as a pair (or a longer tuple/list: first two)."""
    if isinstance(batch, Sequence) and not isinstance(batch, torch.Tensor) and len(batch) >= 2:
        return batch[0], batch[1]
    raise TypeError(
        f"a batch must be (inputs, targets, ...); got {type(batch).__name__}: "
        "pass the batch your loader yields, e.g. next(iter(loader))"
    )


def to_float(value: Any) -> float:
    """A loss as a Python float, whether the caller returned a tensor or a number."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(
                f"a loss must be one number; got a tensor of shape {tuple(value.shape)} "
                "(reduce it with .mean() or return loss.item())"
            )
        return float(value.detach().item())
    if isinstance(value, (int, float)):
        return float(value)
    raise TypeError(f"a loss must be a number or a one-element tensor; got {type(value).__name__}")


def finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def trainable(model: nn.Module, ignore: Sequence[str] = ()) -> list[tuple[str, nn.Parameter]]:
    """Parameters that should train: requires_grad, and no name or prefix in ``ignore``."""
    return [
        (name, p)
        for name, p in model.named_parameters()
        if p.requires_grad and not any(name == i or name.startswith(i + ".") for i in ignore)
    ]


def name_list(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMES])
    more = len(names) - _MAX_NAMES
    return shown + (f" and {more} more" if more > 0 else "")


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run with the CPU RNG at ``seed`` and give the caller's RNG state back afterwards.

    Dropout masks and random choices inside a check then repeat exactly from run to run,
    and the project's own random stream is not shifted by calling a check.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextmanager
def kept_modes(model: nn.Module) -> Iterator[None]:
    """Restore every submodule's train/eval flag on exit (a check may flip them)."""
    flags = [(m, m.training) for m in model.modules()]
    try:
        yield
    finally:
        for module, training in flags:
            module.training = training


@contextmanager
def kept_state(model: nn.Module) -> Iterator[None]:
    """Restore parameters, buffers (batch-norm statistics) and gradients on exit."""
    state = {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()}
    grads = {n: (None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()}
    try:
        yield
    finally:
        with torch.no_grad():
            for key, value in model.state_dict(keep_vars=True).items():
                value.copy_(state[key])
        for name, p in model.named_parameters():
            p.grad = grads[name]


def is_mode_dependent(module: nn.Module) -> bool:
    """Dropout with p > 0 or batch norm: a module whose output depends on train/eval."""
    if isinstance(module, nn.modules.dropout._DropoutNd):
        return module.p > 0
    return isinstance(module, nn.modules.batchnorm._BatchNorm)


def mode_dependent(model: nn.Module) -> list[str]:
    """Names (with types) of the model's mode-dependent submodules, for messages."""
    return [
        f"{name or 'model'} ({type(module).__name__})"
        for name, module in model.named_modules()
        if is_mode_dependent(module)
    ]


def same_values(a: Any, b: Any) -> bool:
    """Equal results: tensors equal in shape and value, containers equal item by item."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_values(a[k], b[k]) for k in a)
    return a == b


def carries_graph(value: Any) -> bool:
    """Whether a result holds a tensor that requires grad (an autograd graph kept alive)."""
    if isinstance(value, torch.Tensor):
        return value.requires_grad
    if isinstance(value, (tuple, list)):
        return any(carries_graph(item) for item in value)
    if isinstance(value, dict):
        return any(carries_graph(item) for item in value.values())
    return False
