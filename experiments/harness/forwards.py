"""Which top-level forwards were training forwards: part of the run's telemetry (hooks.py).

A top-level forward (a module call not nested in another module's forward) whose output
receives a gradient is a training forward, counted "in eval mode" when its module was in
``eval()``; one whose output gets no gradient before the next optimizer step (or the end)
is an eval forward, "with grad" when it built a graph for nothing.

Finding out cheaply. Registering a Python prehook on each output's autograd node and
letting the engine call it costs ~20 us a forward here (half the telemetry of a 0.4 ms
step). Instead each such forward waits in a list with its output node's sequence number
(not the node: holding it would keep an eval forward's graph alive), and ``claim`` runs
just before a ``backward()``: a walk of the graph from the loss finds the waiting nodes
it reaches (usually one to three nodes from the loss) and stops when all are found.
Without ``inputs=``, the engine runs every node it reaches, so a node found there is
exactly one that will receive a gradient. Where reaching is not receiving, the walk puts
the old prehook on the nodes it finds: gradients asked for particular inputs
(``torch.autograd.grad``, ``backward(inputs=...)``); a forward run inside a backward
(activation checkpointing) gets it at once.

A forward no walk reaches (an eval forward with grad) is looked for by at most
``MAX_WALKS`` backwards before it is left to be settled as an eval forward: a walk that
misses it visits the whole graph, and a script without optimizer steps never settles.
The old prehook would still count a gradient reaching it later than that; no loop does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

import torch
from torch.nn.modules import loss as loss_modules

_Tensor = torch.Tensor
_Loss = loss_modules._Loss
_tracing = torch._C._is_tracing
# Backwards that look for a waiting forward before it is left to the settling step.
MAX_WALKS = 4


class _Forward:
    """A top-level forward waiting to learn whether its output receives a gradient; it is
    its own autograd prehook when it needs one (no closure to build)."""

    __slots__ = ("forwards", "got_grad", "hooked", "info", "key", "training", "walks")

    def __init__(self, forwards: Forwards, key: int, training: bool, info: Any = None) -> None:
        self.forwards = forwards
        self.key = key  # the output node's sequence number
        self.training = training
        self.info = info  # what the witness probes saw of it (probes.py), or None
        self.got_grad = False
        self.hooked = False
        self.walks = 0

    def __call__(self, grad_outputs: Any) -> None:
        if not self.got_grad:
            self.got_grad = True
            self.forwards.count_train(self)

    def hook(self, node: Any) -> None:
        if not self.hooked:
            self.hooked = True
            node.register_prehook(self)


def _first_tensor(output: Any) -> torch.Tensor | None:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)):
        for item in output:
            if isinstance(item, torch.Tensor):
                return item
    elif isinstance(output, dict):
        for item in output.values():
            if isinstance(item, torch.Tensor):
                return item
    return None


def _roots(tensors: Any) -> list[Any]:
    """The autograd nodes a backward starts from."""
    if isinstance(tensors, _Tensor):
        tensors = (tensors,)
    elif not isinstance(tensors, (tuple, list)):
        return []
    return [t.grad_fn for t in tensors if isinstance(t, _Tensor) and t.grad_fn is not None]


class Forwards:
    def __init__(self) -> None:
        self.train_forwards = 0
        self.train_forwards_eval_mode = 0
        self.eval_forwards = 0
        self.eval_forwards_grad = 0
        self.in_backward = 0  # set by the backward wrapper (hooks.py)
        self.probes: Any = None  # the witness probes (probes.py), set by the telemetry
        self._depth = 0
        self._pending: list[_Forward] = []
        # Settled as evals with no gradient yet; the next backward may still reach them
        # (``step()`` before ``backward()``): then they count as training forwards too,
        # as a prehook left on their node would have counted them.
        self._late: list[_Forward] = []

    def count_train(self, forward: _Forward) -> None:
        self.train_forwards += 1
        if not forward.training:
            self.train_forwards_eval_mode += 1
        if forward.info is not None:
            self.probes.train_forward(forward.info)

    def wrap_call(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """A replacement for ``nn.Module.__call__`` that sees top-level forwards."""
        forwards = self

        @wraps(original)
        def call(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            # Nested in a forward, or recorded by ``torch.jit.trace`` (the probes' reads
            # would go into the traced graph): pass straight through.
            if forwards._depth or _tracing():
                return original(module, *args, **kwargs)
            probes = forwards.probes
            mark = probes.enter_forward() if probes is not None else 0
            forwards._depth = 1
            try:
                output = original(module, *args, **kwargs)
            finally:
                forwards._depth = 0
            if not isinstance(module, _Loss):
                forwards._top_level(module, output, args, mark)
            return output

        return call

    def _top_level(
        self, module: torch.nn.Module, output: Any, args: tuple = (), mark: int = 0
    ) -> None:
        tensor = output if output.__class__ is _Tensor else _first_tensor(output)
        if tensor is None:
            return
        probes = self.probes
        info = None if probes is None else probes.forward_info(module, args, tensor, mark)
        node = tensor.grad_fn
        if node is None:
            self.eval_forwards += 1
            if info is not None:
                probes.eval_forward(info, graph=False)
            return
        pending = _Forward(self, node._sequence_nr(), module.training, info)
        self._pending.append(pending)
        if self.in_backward:  # recomputed inside a backward: no claim will see it
            pending.hook(node)

    def claim(self, tensors: Any, exact_walk: bool = True) -> None:
        """Before a backward from ``tensors``: waiting forwards whose node it will reach
        are training forwards. ``exact_walk=False`` (gradients for chosen inputs only,
        where a reached node may not run): their nodes get the prehook instead."""
        if exact_walk and len(self._pending) == 1 and not self._late and self._near(tensors):
            return
        targets: dict[int, list[_Forward]] = {}
        for pending in (*self._pending, *self._late) if self._late else self._pending:
            if not pending.got_grad and not pending.hooked and pending.walks < MAX_WALKS:
                pending.walks += 1
                targets.setdefault(pending.key, []).append(pending)
        self._late = []
        if targets:
            self._walk(_roots(tensors), targets, exact_walk)
        if exact_walk:  # the claimed ones are settled: keep the list short
            self._pending = [pending for pending in self._pending if not pending.got_grad]

    def _near(self, tensors: Any) -> bool:
        """The common case, one forward waiting and its output the loss or one node from
        it (``mse_loss(model(x), y)``), without building a walk; False: walk."""
        only = self._pending[0]
        node = tensors.grad_fn if tensors.__class__ is _Tensor else None
        if node is None or only.got_grad or only.hooked:
            return False
        key = only.key
        if node._sequence_nr() != key:
            for child, _ in node.next_functions:
                if child is not None and child._sequence_nr() == key:
                    break
            else:
                return False
        only.got_grad = True
        self.count_train(only)
        self._pending = []
        return True

    def _walk(self, stack: list[Any], targets: dict[int, list[_Forward]], exact: bool) -> None:
        seen: set[int] = set()
        visited: list[Any] = []  # keeps node wrappers alive so their ids stay unique
        while stack and targets:
            node = stack.pop()
            key = id(node)
            if key in seen:
                continue
            seen.add(key)
            visited.append(node)
            # Two forwards may share an output node (a module that returns its input).
            for found in targets.pop(node._sequence_nr(), ()):
                if exact:
                    found.got_grad = True
                    self.count_train(found)
                else:
                    found.hook(node)
            for child, _ in node.next_functions:
                if child is not None:
                    stack.append(child)

    def settle(self) -> None:
        """Forwards that built a graph but got no gradient before this point were evals."""
        if not self._pending:
            return
        late = [pending for pending in self._pending if not pending.got_grad]
        self.eval_forwards += len(late)
        self.eval_forwards_grad += len(late)
        if self.probes is not None:
            for pending in late:
                if pending.info is not None:
                    self.probes.eval_forward(pending.info, graph=True)
        self._late = late
        self._pending = []

    def counters(self) -> tuple[int, int, int, int]:
        return (
            self.train_forwards,
            self.train_forwards_eval_mode,
            self.eval_forwards,
            self.eval_forwards_grad,
        )
