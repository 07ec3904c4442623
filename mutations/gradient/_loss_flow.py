"""Which names the backwarded loss is computed from, by name inside one function (private
to the gradient package; module level counts as one scope).

``loss_names(scope, ctx)`` is the set of names a ``backward()`` in ``scope`` depends on:
its receiver's names and, transitively, the names read by every value bound to them
(``x[i] = v`` and ``x += v`` bind ``x``). A function that runs no backward but returns a
value its caller backwards (``loss = compute_loss(batch)``) counts its returned names.
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import (
    bound_names,
    callee_name,
    identifier_words,
    method_name,
    per_node,
    receiver,
)
from mutator.semantics.grad_flow import closure, dependencies

Scope = cst.FunctionDef | None


def _base(expr: cst.BaseExpression) -> str | None:
    while isinstance(expr, (cst.Subscript, cst.Attribute)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _reads(expr: cst.CSTNode, ctx: Context) -> set[str]:
    return {name.value for name in ctx.nodes_within(expr, cst.Name)}  # type: ignore[attr-defined]


def _in_scope(node: cst.CSTNode, scope: Scope, ctx: Context) -> bool:
    return ctx.enclosing_function(node) is scope


__all__ = ["backward_calls", "closure", "dependencies", "feeds_loss", "loss_code", "loss_names"]


def backward_calls(scope: Scope, ctx: Context) -> list[cst.Call]:
    return [
        call  # type: ignore[misc]
        for call in ctx.nodes(cst.Call)
        if method_name(call) == "backward" and _in_scope(call, scope, ctx)  # type: ignore[arg-type]
    ]


# Values that leave autograd: nothing computed before them carries a gradient through.
_LEAVES_GRAPH = frozenset({"numpy", "item", "tolist", "argmax", "argmin"})


def _graph_free(scope: Scope, ctx: Context) -> set[str]:
    """Names bound in ``scope`` to a value that left autograd (``actions = q.argmax(1)
    .cpu().numpy()``): an RL script's acting step does not feed its loss's gradient."""
    found: set[str] = set()
    for assign in ctx.nodes(cst.Assign):
        value = assign.value  # type: ignore[attr-defined]
        if not _in_scope(assign, scope, ctx) or not isinstance(value, cst.Call):
            continue
        if method_name(value) in _LEAVES_GRAPH or callee_name(value) in _LEAVES_GRAPH:
            for target in assign.targets:  # type: ignore[attr-defined]
                found.update(bound_names(target.target))
    return found


@per_node
def loss_names(scope: Scope, ctx: Context) -> frozenset[str]:
    """The names the loss backwarded in ``scope`` (or returned to a caller that backwards
    it) is computed from, through values that carry a gradient."""
    free = _graph_free(scope, ctx)
    deps = {name: reads for name, reads in dependencies(scope, ctx).items() if name not in free}
    seeds: set[str] = set()
    for call in backward_calls(scope, ctx):
        seeds |= _reads(receiver(call), ctx)
    if not seeds and scope is not None and _returned_to_backward(scope, ctx):
        for ret in ctx.nodes_within(scope, cst.Return):
            if ret.value is not None and _in_scope(ret, scope, ctx):  # type: ignore[attr-defined]
                seeds |= _reads(ret.value, ctx)  # type: ignore[attr-defined]
    return frozenset(closure(seeds, deps)) if seeds else frozenset()


def _returned_to_backward(function: cst.FunctionDef, ctx: Context) -> bool:
    """Is a call of ``function`` bound to a name the caller's backward depends on?"""
    name = function.name.value
    for call in ctx.nodes(cst.Call):
        if callee_name(call) != name or ctx.within(function, call):  # type: ignore[arg-type]
            continue
        caller = ctx.enclosing_function(call)
        if not backward_calls(caller, ctx):
            continue
        statement = ctx.statement_of(call)
        deps = dependencies(caller, ctx)
        seeds = set().union(*(_reads(receiver(b), ctx) for b in backward_calls(caller, ctx)))
        bound = {
            n for t in ctx.nodes_within(statement, cst.AssignTarget) for n in bound_names(t.target)
        }  # type: ignore[attr-defined]
        if bound & closure(seeds, deps):
            return True
    return False


def feeds_loss(statement: cst.CSTNode, ctx: Context) -> bool:
    """Does ``statement`` bind a name the backwarded loss is computed from, or compute the
    backwarded value itself?"""
    scope = ctx.enclosing_function(statement)
    if any(ctx.within(statement, call) for call in backward_calls(scope, ctx)):
        return True
    names = loss_names(scope, ctx)
    bound: set[str] = set()
    for target in ctx.nodes_within(statement, cst.AssignTarget):
        bound.update(bound_names(target.target))  # type: ignore[attr-defined]
        base = _base(target.target)  # type: ignore[attr-defined]
        if base is not None:
            bound.add(base)
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.AugAssign) and _base(small.target) is not None:
                bound.add(_base(small.target))  # type: ignore[arg-type]
    return bool(bound & names)


_LOSS_WORDS = frozenset({"loss", "losses", "criterion", "objective"})


def loss_code(statement: cst.CSTNode, ctx: Context) -> bool:
    """Is ``statement`` part of computing a loss: it feeds the backwarded loss, or it sits
    in a function or class named for a loss (``p_losses``, ``class FocalLoss``: the
    backward may live in another file)?"""
    if feeds_loss(statement, ctx):
        return True
    function = ctx.enclosing_function(statement)
    if function is not None and identifier_words(function.name.value) & _LOSS_WORDS:
        return True
    owner = ctx.enclosing(statement, cst.ClassDef)  # ``class FocalLoss(nn.Module)``
    return owner is not None and bool(identifier_words(owner.name.value) & _LOSS_WORDS)  # type: ignore[attr-defined]
