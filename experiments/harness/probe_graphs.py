"""Graph lifetimes for the witness probes (probes.py): whether a backwarded graph is still
alive later (``graph_kept``, ``retained_graph``).

A sentinel hook put on a graph's root node lives exactly as long as the node, so a weak
reference to it tells whether the graph is alive (~4 us a graph, on sampled backwards).
``Death`` tells a graph backwarded with ``retain_graph=True`` as alive at the next forward
once (its own docstring).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

_sequence_nr = torch._C._autograd._get_sequence_nr  # autograd nodes recorded so far


class _Sentinel:
    """Put on a graph's root node: it lives exactly as long as the node (weakref test)."""

    __slots__ = ("__weakref__",)

    def __call__(self, grad_outputs: Any) -> None:
        return None


def sentinels(tensor: Any) -> tuple[Any, ...]:
    """Weak references that die with the graph of ``tensor``: on its root node and on the
    root's first input (``(loss / k).backward()`` backwards a temporary whose root dies at
    once, while the loss's own node is what a running total keeps)."""
    root = getattr(tensor, "grad_fn", None)
    if root is None:
        return ()
    nodes = [root]
    for child, _ in root.next_functions[:1]:
        if child is not None and type(child).__name__ != "AccumulateGrad":
            nodes.append(child)
    refs = []
    for node in nodes:
        sentinel = _Sentinel()
        try:
            node.register_prehook(sentinel)
        except RuntimeError:
            continue
        refs.append(weakref.ref(sentinel))
    return tuple(refs)


def any_alive(refs: tuple[Any, ...]) -> bool:
    return any(ref() is not None for ref in refs)


class Death:
    """A retained graph (its sentinels), told as alive at the next forward once: by the next
    top-level module forward (``enter_forward``), or, where none runs (tensors no module
    holds), when it dies after autograd recorded another node since its backward: a new
    graph was built while it held its saved tensors (the flat loop's ``loss = ...``). A
    graph that dies with its step function, before any new node, is no such event."""

    __slots__ = ("event", "fired", "mark", "watch")

    def __init__(self, event: Callable[[], None], refs: tuple[Any, ...]) -> None:
        self.event, self.fired, self.mark = event, False, _sequence_nr()
        self.watch = [weakref.ref(alive, self._died) for alive in map(_call, refs) if alive]

    def seen(self) -> None:
        if not self.fired:
            self.fired = True
            self.event()

    def _died(self, _ref: Any) -> None:
        if not self.fired and _sequence_nr() > self.mark:
            self.seen()


def _call(ref: Any) -> Any:
    return ref()
