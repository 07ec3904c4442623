"""The held-out evaluation: the loop's own test of the model the script trained.

A loop may name one (``loop.holdout=module:function``; every reference loop does). The
child installs a ``Capture`` before the script starts; it remembers the last optimizer
that stepped and, the first time each optimizer steps, the modules that hold its
parameters (one scan of the live objects per optimizer, so nothing runs per forward).
When the script has ended, ``evaluate`` picks the module whose parameters the optimizer
held (the outermost one that covers the most of them) and calls the function on it with
the run's seed and device. It writes one ``holdout`` record: ``metric``, ``loss``,
``chance``, ``optimizer`` (class name) or ``error`` (why it could not run). The function's
module is imported here, by the harness, never by the script: a mutant cannot change it.
"""

from __future__ import annotations

import gc
import importlib
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

HoldoutFn = Callable[..., Mapping[str, float]]
FIELDS = ("metric", "loss", "chance")


def resolve(spec: str) -> HoldoutFn:
    """``package.module:function`` -> the function (ValueError for a malformed spec)."""
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise ValueError("not of the form module:function")
    return getattr(importlib.import_module(module_name), function_name)


class Capture:
    """Keeps the trained model reachable after the script's own references are gone."""

    def __init__(self) -> None:
        self.optimizer: torch.optim.Optimizer | None = None
        self.modules: list[nn.Module] = []
        self._seen: set[int] = set()
        self._handle: Any = None

    def install(self) -> None:
        self._handle = register_optimizer_step_post_hook(self._after_step)

    def remove(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _after_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self.optimizer = optimizer
        if id(optimizer) in self._seen:
            return
        self._seen.add(id(optimizer))
        held = _parameter_ids(optimizer)
        # Strong references: the script's locals die with its main(), the model must not.
        self.modules += [
            obj
            for obj in gc.get_objects()
            if isinstance(obj, nn.Module) and any(id(p) in held for p in obj.parameters())
        ]

    def model(self) -> nn.Module | None:
        """The module whose parameters the last optimizer held: the most of them covered,
        then the fewest parameters it does not hold, then the outermost."""
        if self.optimizer is None:
            return None
        held = _parameter_ids(self.optimizer)
        best, best_key = None, None
        for module in self.modules:
            ids = {id(p) for p in module.parameters()}
            key = (len(ids & held), -len(ids - held), sum(1 for _ in module.modules()))
            if best_key is None or key > best_key:
                best, best_key = module, key
        return best


def evaluate(capture: Capture, spec: str, seed: int, device: str) -> dict[str, Any]:
    """Run the held-out evaluation; the fields of the ``holdout`` record."""
    capture.remove()
    started = time.perf_counter()
    out: dict[str, Any] = {"spec": spec}
    if capture.optimizer is not None:
        out["optimizer"] = type(capture.optimizer).__name__
    model = capture.model()
    if model is None:
        return {**out, "error": "no optimizer stepped: no trained model to evaluate"}
    try:
        function = resolve(spec)
        with torch.random.fork_rng(devices=[]):  # the evaluation draws from its own seed
            result = function(model, seed=seed, device=device)
        out.update({key: float(result[key]) for key in FIELDS if result.get(key) is not None})
    except Exception as error:  # a mutated model may not fit the loop's data: that is data
        line = traceback.format_exception_only(type(error), error)[-1].strip()
        out["error"] = line[:300]
    out["seconds"] = round(time.perf_counter() - started, 4)
    return out


def _parameter_ids(optimizer: torch.optim.Optimizer) -> set[int]:
    return {id(p) for group in optimizer.param_groups for p in group["params"]}
