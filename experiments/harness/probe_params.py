"""Witness probes on parameters themselves (probes.py uses them), for the code the optimizer
and module hooks do not see: tensors no ``nn.Module`` holds (``w1 = torch.randn(...,
requires_grad=True)``), updates written by hand (``param.data -= lr * param.grad``, no
``torch.optim``), and units a zero initialisation left identical.

- ``leaves(loss)``: the leaf tensors a loss's graph reaches (its ``AccumulateGrad`` nodes),
  a few, for the stale-gradient probe when no module's parameter has a gradient;
- ``Updates``: whether, between two sampled backwards, a watched parameter moved while no
  ``torch.optim`` optimizer had stepped (``manual_updates``), and by how much against its
  gradient at the first such update (``manual_lr``: exactly the learning rate of a plain
  ``p -= lr * p.grad``); a slice of ``SLICE`` elements per parameter is copied, on the
  sampled backwards only;
- ``tied_units(params)``: the weight tensors (two or more dimensions, two or more rows)
  whose rows are all equal, read once after the second optimizer step: a zero
  initialisation that leaves a layer's units identical never breaks their symmetry, while
  one of a single output row, or one the gradient separates, is no such bug.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

MAX_LEAVES = 4  # parameters watched when no module holds them
MAX_NODES = 256  # graph nodes walked to find them
SLICE = 64  # elements of each watched parameter copied per sampled backward
_Tensor = torch.Tensor


def leaves(loss: Any) -> list[_Tensor]:
    """Up to ``MAX_LEAVES`` leaf tensors with a gradient that ``loss``'s graph reaches."""
    root = getattr(loss, "grad_fn", None)
    found: list[_Tensor] = []
    if root is None:
        return found
    queue, seen = [root], {id(root)}
    while queue and len(seen) <= MAX_NODES and len(found) < MAX_LEAVES:
        node = queue.pop(0)
        variable = getattr(node, "variable", None)
        if isinstance(variable, _Tensor) and variable.grad is not None:
            found.append(variable)
        for child, _ in getattr(node, "next_functions", ()):
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                queue.append(child)
    return found


def _head(tensor: _Tensor) -> _Tensor:
    return tensor.detach().reshape(-1)[:SLICE].clone()


class Updates:
    """Hand-written updates seen on the watched parameters (module docstring)."""

    def __init__(self) -> None:
        self.count = 0  # manual_updates
        self.lr: float | None = None  # manual_lr
        self._watch: list[tuple[_Tensor, _Tensor, _Tensor]] = []

    def watch(self, params: Iterable[_Tensor]) -> None:
        """After a sampled backward: remember each parameter and its gradient."""
        with torch.no_grad():
            self._watch = [(p, _head(p), _head(p.grad)) for p in params if p.grad is not None]

    def check(self, optimizer_stepped: bool) -> None:
        """Before the next backward: which watched parameters moved since."""
        watched, self._watch = self._watch, []
        if optimizer_stepped:  # torch.optim's steps are counted by their own hooks
            return
        with torch.no_grad():
            for param, before, grad in watched:
                now = param.detach().reshape(-1)[:SLICE]
                if now.shape != before.shape or torch.equal(now, before):
                    continue
                self.count += 1
                size = float(grad.abs().sum())
                if self.lr is None and size > 0:
                    self.lr = float((before - now).abs().sum()) / size


def tied_units(params: Iterable[_Tensor]) -> int:
    """How many of ``params`` have two or more rows, all equal (module docstring)."""
    tied = 0
    with torch.no_grad():
        for param in params:
            if param.dim() >= 2 and param.shape[0] >= 2 and bool((param == param[:1]).all()):
                tied += 1
    return tied
