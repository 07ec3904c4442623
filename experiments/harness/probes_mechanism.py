"""Witness probes for the mechanisms of the operators that stand for real faults (issue 32),
beside the others (probes.py, probe_calls.py), from the same hooks or a few call wrappers:

- ``Networks``: which network each of the first ``FORWARD_ORDER`` top-level forwards ran
  (its index in order of first use: a loss computed with a sibling network of the same
  class shows as another index at that place), and how many forwards ran in all (a loop
  whose inner loop no longer runs has fewer);
- ``second_input``: a forward's second tensor argument, the target of a loss module that
  is a plain ``nn.Module`` (no functional loss sees it); ``gradients``: a digest of the
  gradient norms at an optimizer's first step (a removed ``.detach()`` changes gradients,
  not values);
- ``install``: wrappers of ``cross_entropy`` (its input rows already probabilities: a
  softmax applied before it) and of the clamps (``torch.clamp``/``clip``, their ``min``
  and ``max`` forms and the tensor methods): whether a clamp run with autograd on cut
  values above its upper bound or below its lower one. Each check is a reduction over the
  tensor, so it runs on the first ``HEAD`` calls and every ``EVERY``-th (digest.py); the
  counts compare between runs because both sample the same calls.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import wraps
from typing import Any

import torch
import torch.nn.functional as F

from experiments.harness.digest import EVERY, HEAD, digest

FORWARD_ORDER = 128  # top-level forwards whose network is recorded
# Rows summing to 1 within this, all entries >= 0: probabilities, not logits.
PROBABILITY_TOLERANCE = 1e-4
_Tensor = torch.Tensor
_grad_enabled = torch.is_grad_enabled


class Networks:
    """Which network each top-level forward ran (module docstring)."""

    __slots__ = ("_known", "forwards", "order")

    def __init__(self) -> None:
        self.forwards = 0
        self.order: list[int] = []
        self._known: dict[int, tuple[Any, int]] = {}  # id -> (weakref, index)

    def see(self, module: Any) -> None:
        self.forwards += 1
        order = self.order
        if len(order) >= FORWARD_ORDER:
            return
        known = self._known.get(id(module))
        if known is None or known[0]() is not module:  # new, or another module on that id
            try:
                known = (weakref.ref(module), len(self._known))
            except TypeError:
                return
            self._known[id(module)] = known
        order.append(known[1])


def second_input(args: tuple, sequence: Any) -> Any:
    """The digest of a forward's second tensor argument (a loss module's target) where
    ``sequence`` samples its next one, None where it does not; False: no such argument
    (the forward is not in the sequence)."""
    if len(args) < 2 or not isinstance(args[1], _Tensor):
        return False
    return digest(args[1]) if sequence.want() else None


def gradients(params: list[_Tensor]) -> Any:
    """A digest of the parameters' gradient norms (at an optimizer's first step)."""
    grads = [p.grad for p in params if p.grad is not None and not p.grad.is_sparse]
    if not grads:
        return None
    try:
        with torch.no_grad():
            return digest(torch.stack(torch._foreach_norm(grads)).float())
    except RuntimeError:  # mixed devices or dtypes
        return None


class _Sample:
    """Calls counted one by one; ``take()`` says whether this one is checked."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def take(self) -> bool:
        n = self.n
        self.n = n + 1
        return n < HEAD or n % EVERY == 0


def install(probes: Any, patch: Callable[[Any, str, Any], None]) -> None:
    patch(F, "cross_entropy", _cross_entropy(probes, F.cross_entropy))
    clamps = _Sample()  # one schedule for every spelling of a clamp
    for owner in (torch, torch.Tensor):
        for name in ("clamp", "clip", "clamp_min", "clamp_max"):
            if hasattr(owner, name):
                patch(owner, name, _clamp(probes, getattr(owner, name), name, clamps))


def _cross_entropy(probes: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    # Two schedules: the evaluation's few calls are not thinned by the training's many.
    training, evaluation = _Sample(), _Sample()

    @wraps(original)
    def cross_entropy(input: Any, *args: Any, **kwargs: Any) -> Any:
        sample = training if _grad_enabled() else evaluation
        if sample.take() and isinstance(input, _Tensor) and _probabilities(input):
            probes.event("ce_on_probabilities")
        return original(input, *args, **kwargs)

    return cross_entropy


def _probabilities(values: _Tensor) -> bool:
    """Whether the class dimension (1; 0 for one sample) holds probabilities."""
    classes = 1 if values.dim() > 1 else 0
    if not values.is_floating_point() or values.dim() == 0 or values.shape[classes] < 2:
        return False
    try:
        with torch.no_grad():
            values = values.detach()
            sums = values.sum(dim=classes)
            near = bool(((sums - 1).abs() <= PROBABILITY_TOLERANCE).all())
            return near and bool(values.min() >= 0)
    except Exception:  # an odd tensor (sparse, a subclass): the loss itself will say
        return False


def _clamp(probes: Any, original: Any, name: str, sample: _Sample) -> Callable[..., Any]:
    @wraps(original)
    def clamp(input: Any, *args: Any, **kwargs: Any) -> Any:
        if _grad_enabled() and isinstance(input, _Tensor) and sample.take():
            lower, upper = _bounds(name, args, kwargs)
            _cut(probes, input, lower, upper)
        return original(input, *args, **kwargs)

    return clamp


def _bounds(name: str, args: tuple, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    if name == "clamp_min":
        return (args[0] if args else kwargs.get("min")), None
    if name == "clamp_max":
        return None, (args[0] if args else kwargs.get("max"))
    lower = args[0] if args else kwargs.get("min")
    upper = args[1] if len(args) > 1 else kwargs.get("max")
    return lower, upper


def _cut(probes: Any, values: _Tensor, lower: Any, upper: Any) -> None:
    """Count a clamp that changed values below its lower or above its upper bound."""
    if values.numel() == 0 or values.is_complex():
        return
    try:
        with torch.no_grad():
            values = values.detach()
            if lower is not None and bool((values < lower).any()):
                probes.counts["clamp_below"] += 1
                probes.dirty = True
            if upper is not None and bool((values > upper).any()):
                probes.counts["clamp_above"] += 1
                probes.dirty = True
    except Exception:  # a bound of another device or type, an odd tensor: let clamp say
        return
