"""Which modules behave differently in ``train()`` and ``eval()``: the witness of the mode
operators needs a module whose mode matters, not just a top-level ``training`` flag (a
model without dropout or batch norm trains the same in eval mode).

A module depends on its mode when it is a dropout with ``p > 0``, a batch norm, an
instance norm that tracks running statistics, an RNN or attention layer with dropout, or
any other module whose ``forward`` reads ``self.training`` (its code names ``training``).
``ModeModules.of(module)`` lists those under a top-level module, cached per module (the
walk runs once per model, not per forward).
"""

from __future__ import annotations

import weakref
from typing import Any

from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import _DropoutNd
from torch.nn.modules.instancenorm import _InstanceNorm

_BY_CLASS: dict[type, bool] = {}


def depends_on_mode(module: nn.Module) -> bool:
    if isinstance(module, _DropoutNd):
        return float(module.p) > 0
    if isinstance(module, _InstanceNorm):
        return bool(module.track_running_stats)
    if isinstance(module, _BatchNorm):
        return True
    if isinstance(module, (nn.RNNBase, nn.MultiheadAttention)):
        return float(module.dropout) > 0
    cls = type(module)
    known = _BY_CLASS.get(cls)
    if known is None:
        forward = getattr(cls, "forward", None)
        code = getattr(forward, "__code__", None)
        known = _BY_CLASS[cls] = bool(code is not None and "training" in code.co_names)
    return known


class ModeModules:
    """Per top-level module, its mode-dependent modules (cached by identity)."""

    __slots__ = ("_cache",)

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Any, tuple[nn.Module, ...]]] = {}

    def of(self, module: nn.Module) -> tuple[nn.Module, ...]:
        entry = self._cache.get(id(module))
        if entry is not None and entry[0]() is module:
            return entry[1]
        try:
            found = tuple(m for m in module.modules() if depends_on_mode(m))
            ref = weakref.ref(module)
        except (TypeError, RuntimeError, AttributeError):  # an odd module: nothing to say
            return ()
        if len(self._cache) > 64:  # models re-created every step: keep the cache small
            self._cache.clear()
        self._cache[id(module)] = (ref, found)
        return found


def modes(found: tuple[nn.Module, ...]) -> tuple[bool, bool]:
    """(some mode-dependent module is in eval mode, some is in training mode)."""
    off = on = False
    for module in found:
        if module.training:
            on = True
        else:
            off = True
    return off, on
