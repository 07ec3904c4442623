"""No information flows between the samples of a batch through the model.

Float inputs: the gradient of sample i's output with respect to every other sample's
input must be exactly zero (and non-zero for its own input). Integer inputs (token ids)
have no gradient, so the other samples are changed instead (each sequence rotated by one
position) and sample i's output must stay the same, while changing sample i must change it.

Batch norm mixes samples by design in train mode (each sample is normalised with the
batch's statistics), so the check runs the model in eval mode by default, where batch
norm uses its running statistics and dropout is off: whatever mixing remains is a bug.
``train_mode=True`` checks train mode instead, for models without batch norm.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from experiments.checks._common import Forward, default_forward, fail, kept_modes, kept_state

_HINT = (
    "A reshape that moves the batch dimension (view/reshape where a permute/transpose was "
    "meant, flattening with the wrong axis first), an operation over dim 0 (softmax, "
    "mean or norm across the batch), or state shared between samples."
)


def check_batch_independence(
    model: nn.Module,
    inputs: torch.Tensor,
    *,
    forward: Forward | None = None,
    sample: int = 0,
    train_mode: bool = False,
) -> None:
    """Output ``sample`` of a batch depends on its own input and on no other sample's.

    ``inputs`` is a batch with at least 2 samples along dim 0 and ``forward(model,
    inputs)`` returns outputs with the batch along dim 0. Leaves the model's modes,
    parameters, buffers and gradients as they were. Catches: flattening that mixes the
    batch dimension into the features (``x.view(-1, n)`` after moving axes), softmax or
    normalisation over dim 0, a leaked cross-sample state. Cannot catch: mixing that
    happens after the model (in the loss: the loss of a batch pairing logits with
    another sample's targets; ``check_overfit_batch`` sees that), mixing only in train
    mode when checked in eval mode.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    forward = forward or default_forward
    if not isinstance(inputs, torch.Tensor) or inputs.dim() == 0 or inputs.size(0) < 2:
        raise ValueError("check_batch_independence needs a tensor batch of at least 2 samples")
    if not -inputs.size(0) <= sample < inputs.size(0):
        raise ValueError(f"sample {sample} is outside a batch of {inputs.size(0)}")
    sample %= inputs.size(0)
    with kept_modes(model), kept_state(model):
        model.train(train_mode)
        if inputs.is_floating_point():
            _by_gradient(model, inputs, forward, sample)
        else:
            _by_perturbation(model, inputs, forward, sample)


def _by_gradient(model: nn.Module, inputs: torch.Tensor, forward: Forward, i: int) -> None:
    __tracebackhide__ = True
    x = inputs.detach().clone().requires_grad_(True)
    out = forward(model, x)
    _check_batch_dim(out, x)
    out[i].sum().backward()
    grad = x.grad
    if grad is None:
        raise fail(
            "check_batch_independence",
            f"output {i} to depend on the inputs",
            "no gradient reaches the inputs",
            "The forward detaches its input or does not use it.",
        )
    others = [j for j in range(x.size(0)) if j != i and grad[j].any()]
    if others:
        raise fail(
            "check_batch_independence",
            f"a zero gradient of output {i} with respect to every other sample's input",
            f"a non-zero gradient from {len(others)} of {x.size(0) - 1} other samples "
            f"(e.g. sample {others[0]}, max |grad| {grad[others[0]].abs().max().item():.3g})",
            _HINT,
        )
    if not grad[i].any():
        raise fail(
            "check_batch_independence",
            f"output {i} to depend on input {i}",
            "a zero gradient with respect to its own input",
            _HINT,
        )


def _by_perturbation(model: nn.Module, inputs: torch.Tensor, forward: Forward, i: int) -> None:
    __tracebackhide__ = True
    with torch.no_grad():
        base = forward(model, inputs)
        _check_batch_dim(base, inputs)
        others = inputs.clone()
        mask = torch.ones(inputs.size(0), dtype=torch.bool)
        mask[i] = False
        others[mask] = _rotated(inputs[mask])
        mine = inputs.clone()
        mine[i] = _rotated(inputs[i : i + 1])[0]
        changed_others = forward(model, others)
        changed_mine = forward(model, mine)
    if not torch.allclose(changed_others[i], base[i], rtol=1e-5, atol=1e-6):
        diff = (changed_others[i] - base[i]).abs().max().item()
        raise fail(
            "check_batch_independence",
            f"output {i} unchanged when only the other samples change",
            f"it moved by up to {diff:.3g}",
            _HINT,
        )
    if torch.equal(mine[i], inputs[i]):
        return  # a constant sequence: rotating it changes nothing to compare against
    if torch.allclose(changed_mine[i], base[i], rtol=1e-5, atol=1e-6):
        raise fail(
            "check_batch_independence",
            f"output {i} to change when input {i} changes",
            "the same output",
            _HINT,
        )


def _rotated(rows: torch.Tensor) -> torch.Tensor:
    """Each sample's values rotated by one position: valid ids, different content."""
    flat = rows.reshape(rows.size(0), -1)
    return flat.roll(1, dims=1).reshape(rows.shape)


def _check_batch_dim(out: Any, inputs: torch.Tensor) -> None:
    if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.size(0) != inputs.size(0):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(
            f"check_batch_independence: forward must return a tensor with the batch "
            f"({inputs.size(0)}) along dim 0; got {shape} (pass forward= to select it)"
        )
