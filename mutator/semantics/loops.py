"""What a loop of a training script iterates: batches of data, or the steps of the whole run.

A full-batch regression (``for t in range(200): ...; optimizer.step()``) or a step loop
without epochs (``for i in tqdm(range(num_batches))``, nanoGPT's ``while True``) makes one update per
iteration; so
does a batch loop inside an epoch loop. Moving the step out of the first kind leaves one
update in all, which is another bug than "one update per epoch" (issue 22).
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_node
from mutator.semantics.names import resolve
from mutator.semantics.scope import loops_around, values_of
from mutator.semantics.syntax import callee_name, number_value

_COUNTERS = frozenset({"builtins.range", "tqdm.trange", "tqdm.auto.trange"})
# Calls that wrap an iterable without changing what it yields (or only numbering it).
_WRAPPERS = frozenset(
    {"builtins.enumerate", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm"}
)


def _unwrapped(iterable: cst.BaseExpression, ctx: Context) -> cst.BaseExpression:
    while (
        isinstance(iterable, cst.Call)
        and iterable.args
        and resolve(iterable.func, ctx, strict=False).matches(_WRAPPERS)
    ):
        iterable = iterable.args[0].value
    return iterable


def counts_steps(loop: cst.CSTNode, ctx: Context) -> bool:
    """``for i in range(n)`` (also under ``tqdm``/``enumerate``): a counter, not data."""
    if not isinstance(loop, cst.For):
        return False
    iterable = _unwrapped(loop.iter, ctx)
    return isinstance(iterable, cst.Call) and resolve(iterable.func, ctx, strict=False).matches(
        _COUNTERS
    )


def _called_in_a_loop(function: cst.FunctionDef, ctx: Context) -> bool:
    """Does a loop call ``function`` (by name; not from inside itself, where
    ``self.model.train()`` would pass for a call of ``Trainer.train``)?"""
    name = function.name.value
    return any(
        callee_name(call) == name  # type: ignore[arg-type]
        and not ctx.within(function, call)
        and loops_around(call, ctx)
        for call in ctx.nodes(cst.Call)
    )


@per_node
def whole_run_loop(loop: cst.CSTNode, ctx: Context) -> bool:
    """Is ``loop`` the whole training run: a step counter (or a ``while`` loop) that no
    loop encloses, in code that runs once (module level, or a function no loop calls)?"""
    if isinstance(loop, cst.For) and not counts_steps(loop, ctx):
        return False
    if loops_around(loop, ctx):
        return False
    function = ctx.enclosing_function(loop)
    return function is None or not _called_in_a_loop(function, ctx)


def _constant(expr: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> float | None:
    """A number literal, or a name every assignment binds to the same literal (``EPOCH = 1``)."""
    value = number_value(expr)
    if value is not None or not isinstance(expr, cst.Name):
        return value
    found = {number_value(v) for v in values_of(expr, ctx, at)}
    return found.pop() if len(found) == 1 else None


def iterations(loop: cst.CSTNode, ctx: Context) -> int | None:
    """How many times ``for _ in range(a[, b])`` runs when its bounds are constants."""
    if not counts_steps(loop, ctx):
        return None
    counter = _unwrapped(loop.iter, ctx)  # type: ignore[attr-defined]
    bounds = [_constant(arg.value, ctx, loop) for arg in counter.args]  # type: ignore[attr-defined]
    if not 1 <= len(bounds) <= 2 or None in bounds:
        return None
    start, stop = (0, bounds[0]) if len(bounds) == 1 else bounds
    return max(0, int(stop) - int(start))  # type: ignore[arg-type]


def runs_last(statement: cst.CSTNode, ctx: Context) -> bool:
    """Is ``statement`` the last thing the script runs: at module level (or in a module-level
    ``if``), outside any loop, function, ``with`` or ``try``, with no statement after it in
    any block around it?"""
    current: cst.CSTNode | None = statement
    while current is not None and not isinstance(current, cst.Module):
        if isinstance(
            current, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Try, cst.With)
        ):
            return False
        if isinstance(current, cst.BaseStatement) and ctx.following_statements(current):
            return False
        current = ctx.parent(current)
    return current is not None
