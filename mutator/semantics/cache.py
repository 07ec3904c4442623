"""Per-module and per-node caches for analyses (results live as long as the Context)."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from mutator.context import Context

_T = TypeVar("_T")

# -- per-module caches ------------------------------------------------------------------------


def per_module(analysis: Callable[[Context], _T]) -> Callable[[Context], _T]:
    """Run a module-wide ``analysis(ctx)`` once per parsed module; later calls reuse it.

    Results live as long as the ``Context`` (a weak reference), so nothing leaks across
    the many scripts a sweep parses.
    """
    results: weakref.WeakKeyDictionary[Context, Any] = weakref.WeakKeyDictionary()

    @functools.wraps(analysis)
    def cached(ctx: Context) -> _T:
        if ctx not in results:
            results[ctx] = analysis(ctx)
        return results[ctx]

    return cached


def per_node(analysis: Callable[[Any, Context], _T]) -> Callable[[Any, Context], _T]:
    """Memoise ``analysis(node, ctx)``: operators ask the same question of one node often.

    Nodes hash by identity and the table holds them, so an id is never reused while its
    answer is cached; the table goes with the ``Context``.
    """
    tables: weakref.WeakKeyDictionary[Context, dict[Any, Any]] = weakref.WeakKeyDictionary()

    @functools.wraps(analysis)
    def cached(node: Any, ctx: Context) -> _T:
        table = tables.get(ctx)
        if table is None:
            table = tables[ctx] = {}
        if node not in table:
            table[node] = analysis(node, ctx)
        return table[node]

    return cached
