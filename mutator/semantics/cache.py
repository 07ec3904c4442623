"""Per-module and per-node caches for analyses (results live as long as the Context).

The tables hang off the ``Context`` itself (``ctx.memo``): a lookup is two dict reads,
cheaper than a weak-keyed table, and nothing outlives the parse it describes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from mutator.context import Context

_T = TypeVar("_T")
_MISSING = object()


def per_module(analysis: Callable[[Context], _T]) -> Callable[[Context], _T]:
    """Run a module-wide ``analysis(ctx)`` once per parsed module; later calls reuse it."""
    key = object()  # one slot per analysis in ``ctx.memo``

    @functools.wraps(analysis)
    def cached(ctx: Context) -> _T:
        result = ctx.memo.get(key, _MISSING)
        if result is _MISSING:
            result = ctx.memo[key] = analysis(ctx)
        return result

    return cached


def per_node(analysis: Callable[[Any, Context], _T]) -> Callable[[Any, Context], _T]:
    """Memoise ``analysis(node, ctx)``: operators ask the same question of one node often.

    Nodes hash by identity and the table holds them, so an id is never reused while its
    answer is cached; the table goes with the ``Context``.
    """
    key = object()

    @functools.wraps(analysis)
    def cached(node: Any, ctx: Context) -> _T:
        table = ctx.memo.get(key)
        if table is None:
            table = ctx.memo[key] = {}
        result = table.get(node, _MISSING)  # one hash of the node on a hit
        if result is _MISSING:
            result = table[node] = analysis(node, ctx)
        return result

    return cached
