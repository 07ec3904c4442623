"""The witness probes' call wrappers (probes.py): the calls no telemetry hook sees.

- the dropout functions of ``torch.nn.functional`` (``nn.Dropout`` and attention call
  them): whether a forward dropped anything, and with which ``p``;
- ``clip_grad_norm_`` / ``clip_grad_value_``: called before this step's backward, the
  threshold, whether it cut the gradient (``clip_grad_norm_``'s returned total norm
  above ``max_norm``; a value clip counts as cutting, unmeasured), and the threshold of the
  first clip that cut (``clip_cut_at``: a threshold scaled where every step is cut anyway
  cuts as often, but to another size);
- ``GradScaler.scale`` / ``unscale_`` of an enabled scaler (a disabled one does nothing);
- ``nn.Module.load_state_dict``: how often, and whether the tensors loaded are the module's
  own (a "best" state kept without a copy restores nothing); ``Optimizer.load_state_dict``
  of a state that holds something (momentum buffers, step counts): how often (a test that
  compares the restored state never steps, so the first step's state cannot show it);
- ``Optimizer.zero_grad`` / ``nn.Module.zero_grad``: how often (a gradient rescaled in place
  by a clip is not a cleared one);
- ``DataLoader.__iter__``: iterations in a shuffled order (probe_loaders.py).

Each wrapper is installed with ``install(probes, patch)``; ``patch(owner, name, value)``
is the telemetry's (it undoes them with the rest).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import wraps
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.utils import clip_grad

from experiments.harness import probe_loaders
from experiments.harness import probes_mechanism as mechanism
from experiments.harness.probes import Probes

DROPOUTS = (
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
)
_Tensor = torch.Tensor


def install(probes: Probes, patch: Callable[[Any, str, Any], None]) -> None:
    for name in DROPOUTS:
        if hasattr(F, name):
            patch(F, name, _dropout(probes, getattr(F, name)))
    for owner in (torch.nn.utils, clip_grad):
        patch(owner, "clip_grad_norm_", _clip(probes, clip_grad.clip_grad_norm_, norm=True))
        patch(owner, "clip_grad_value_", _clip(probes, clip_grad.clip_grad_value_, norm=False))
    scaler = torch.amp.GradScaler
    patch(scaler, "scale", _scaler(probes, scaler.scale, "scaler_scale"))
    patch(scaler, "unscale_", _scaler(probes, scaler.unscale_, "scaler_unscale"))
    patch(torch.nn.Module, "load_state_dict", _load(probes, torch.nn.Module.load_state_dict))
    optimizer = torch.optim.Optimizer
    patch(optimizer, "load_state_dict", _load_optimizer(probes, optimizer.load_state_dict))
    for owner in (torch.optim.Optimizer, torch.nn.Module):
        patch(owner, "zero_grad", _zero_grad(probes, owner.zero_grad))
    mechanism.install(probes, patch)  # cross_entropy's input, the clamps
    probe_loaders.install(probes, patch)  # the loaders' order


def _zero_grad(probes: Probes, original: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(original)
    def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
        probes.zero_grads += 1
        return original(self, *args, **kwargs)

    return zero_grad


def _dropout(probes: Probes, original: Callable[..., Any]) -> Callable[..., Any]:
    defaults = inspect.signature(original).parameters
    default_p = defaults["p"].default
    default_training = defaults["training"].default

    @wraps(original)
    def dropout(
        input: Any, p: float = default_p, training: bool = default_training, *args, **kwargs
    ):
        if training and p:
            probes.dropouts += 1
            if len(probes.dropout_p) < 8 and p not in probes.dropout_p:
                probes.dropout_p.add(float(p))
                probes.dirty = True
        return original(input, p, training, *args, **kwargs)

    return dropout


def _clip(probes: Probes, original: Callable[..., Any], norm: bool) -> Callable[..., Any]:
    keyword = "max_norm" if norm else "clip_value"

    @wraps(original)
    def clip(*args: Any, **kwargs: Any) -> Any:
        if not probes.backward_since_step:
            probes.event("clip_before_backward")
        probes.counts["clip_calls"] += 1
        limit = args[1] if len(args) > 1 else kwargs.get(keyword)
        if probes.clip_max is None and isinstance(limit, (int, float)):
            probes.clip_max = float(limit)
            probes.dirty = True
        result = original(*args, **kwargs)
        if not norm or not isinstance(limit, (int, float)):
            probes.counts["clip_active"] += 1
            probes.cut_at(limit)
        elif isinstance(result, _Tensor):
            cut = result.detach() > limit
            if cut.is_cpu:
                if cut:
                    probes.counts["clip_active"] += 1
                    probes.cut_at(limit)
            elif len(probes.clip_pending) < 4096:
                probes.clip_pending.append((cut, float(limit)))
        return result

    return clip


def _scaler(probes: Probes, original: Callable[..., Any], count: str) -> Callable[..., Any]:
    @wraps(original)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.is_enabled():
            probes.counts[count] += 1
        return original(self, *args, **kwargs)

    return call


def _load(probes: Probes, original: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(original)
    def load_state_dict(self: torch.nn.Module, state_dict: Any, *args: Any, **kwargs: Any):
        probes.counts["module_loads"] += 1
        probes.dirty = True
        try:
            own = self.state_dict(keep_vars=True)
            if any(
                isinstance(value, _Tensor)
                and isinstance(own.get(key), _Tensor)
                and value.numel()
                and value.data_ptr() == own[key].data_ptr()
                for key, value in state_dict.items()
            ):
                probes.event("self_loads")
        except (AttributeError, RuntimeError, TypeError):
            pass
        return original(self, state_dict, *args, **kwargs)

    return load_state_dict


def _load_optimizer(probes: Probes, original: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(original)
    def load_state_dict(self: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(state_dict, dict) and state_dict.get("state"):
            probes.counts["optimizer_loads"] += 1
            probes.dirty = True
        return original(self, state_dict, *args, **kwargs)

    return load_state_dict
