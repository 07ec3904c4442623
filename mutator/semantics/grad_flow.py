"""Whether the values a ``no_grad`` block computes feed training (issue 22).

Evaluation under ``torch.no_grad()`` produces metrics and samples; RL scripts also use it
for rollouts and TD targets whose values reach the loss that is backwarded. Unwrapping the
second kind is another bug than "evaluation builds a graph": gradients flow into the
target or rollout, a second backward meets a freed graph, or ``.numpy()`` meets a tensor
that requires grad. The analysis is by name inside one function (module level counts as
one): what the block binds, what a later ``backward()``'s loss is computed from, and what a
later ``.numpy()`` converts.
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_node
from mutator.semantics.roles import drives_training, function_role
from mutator.semantics.scope import bound_names, loops_around, starts_before
from mutator.semantics.syntax import callee_name, method_name, receiver

_CHAIN = frozenset({"cpu", "cuda", "to", "squeeze", "flatten", "view", "reshape", "float"})


def _base_name(expr: cst.BaseExpression) -> str | None:
    """``values`` of ``values[step]``, ``x`` of ``x.cpu()``, ``self.x`` kept whole."""
    while True:
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and method_name(expr) in _CHAIN:
            expr = receiver(expr)
        else:
            break
    return expr.value if isinstance(expr, cst.Name) else None


def _bound_in(root: cst.CSTNode, ctx: Context) -> set[str]:
    names: set[str] = set()
    for node in [*ctx.nodes_within(root, cst.AssignTarget), *ctx.nodes_within(root, cst.For)]:
        target = node.target  # type: ignore[attr-defined]
        names.update(bound_names(target))
        base = _base_name(target)
        if base is not None:
            names.add(base)  # ``values[step] = v``: the buffer holds v
    for node in ctx.nodes_within(root, cst.AugAssign):
        base = _base_name(node.target)  # type: ignore[attr-defined]
        if base is not None:
            names.add(base)
    return names


def _same_scope(node: cst.CSTNode, root: cst.CSTNode | None, ctx: Context) -> bool:
    return ctx.enclosing_function(node) is root


def _reads(expr: cst.CSTNode, ctx: Context) -> set[str]:
    return {name.value for name in ctx.nodes_within(expr, cst.Name)}  # type: ignore[attr-defined]


@per_node
def _dependencies(scope: cst.CSTNode | None, ctx: Context) -> dict[str, set[str]]:
    """Name -> the names read by every value bound to it in ``scope`` (``x[i] = v`` and
    ``x += v`` count as binding ``x``)."""
    deps: dict[str, set[str]] = {}
    for assign in ctx.nodes(cst.Assign):
        if not _same_scope(assign, scope, ctx):
            continue
        read = _reads(assign.value, ctx)  # type: ignore[attr-defined]
        for target in assign.targets:  # type: ignore[attr-defined]
            for name in [*bound_names(target.target), _base_name(target.target)]:
                if name is not None:
                    deps.setdefault(name, set()).update(read)
    for aug in ctx.nodes(cst.AugAssign):
        name = _base_name(aug.target)  # type: ignore[attr-defined]
        if name is not None and _same_scope(aug, scope, ctx):
            deps.setdefault(name, set()).update(_reads(aug.value, ctx))  # type: ignore[attr-defined]
    return deps


def _closure(names: set[str], deps: dict[str, set[str]]) -> set[str]:
    seen, todo = set(names), list(names)
    while todo:
        for read in deps.get(todo.pop(), ()):
            if read not in seen:
                seen.add(read)
                todo.append(read)
    return seen


def _later_calls(block: cst.CSTNode, method: str, ctx: Context) -> list[cst.Call]:
    scope = ctx.enclosing_function(block)
    return [
        call  # type: ignore[misc]
        for call in ctx.nodes(cst.Call)
        if method_name(call) == method  # type: ignore[arg-type]
        and _same_scope(call, scope, ctx)
        and not ctx.within(block, call)
        and starts_before(block, call, ctx)
    ]


def _returned_to_training(function: cst.FunctionDef | None, bound: set[str], ctx: Context) -> bool:
    """``function`` returns a value the block binds, and a training loop hands the result
    to a training step (``td_target = calc_target(...)``; ``q.train_net(td_target)``)."""
    if function is None or function_role(function, ctx) == "eval":
        return False
    returned = set()
    for ret in ctx.nodes_within(function, cst.Return):
        if ret.value is not None:  # type: ignore[attr-defined]
            returned |= _reads(ret.value, ctx)  # type: ignore[attr-defined]
    if not returned & bound:
        return False
    name = function.name.value
    for call in ctx.nodes(cst.Call):
        if callee_name(call) != name or ctx.within(function, call):  # type: ignore[arg-type]
            continue
        if not any(drives_training(loop, ctx) for loop in loops_around(call, ctx)):
            continue
        assign = ctx.parent(call)
        if isinstance(assign, cst.Assign) and _used_in_training(assign, ctx):
            return True
    return False


def _used_in_training(assign: cst.Assign, ctx: Context) -> bool:
    """Do the names ``assign`` binds reach a later backward, or a training function?"""
    names = {n for t in assign.targets for n in bound_names(t.target)}
    deps = _dependencies(ctx.enclosing_function(assign), ctx)
    for call in _later_calls(assign, "backward", ctx):
        if _closure(_reads(receiver(call), ctx), deps) & names:
            return True
    return any(
        _reads(call, ctx) & names and _trains(call, ctx)
        for call in ctx.nodes(cst.Call)
        if not ctx.within(assign, call) and starts_before(assign, call, ctx)
    )


def _trains(call: cst.Call, ctx: Context) -> bool:
    """Does ``call`` call one of the script's functions that runs a training step?"""
    name = callee_name(call)
    return any(
        function.name.value == name
        and function_role(function, ctx) == "train"  # type: ignore[attr-defined]
        and any(method_name(c) == "backward" for c in ctx.nodes_within(function, cst.Call))  # type: ignore[arg-type]
        for function in ctx.nodes(cst.FunctionDef)
    )


def _rebound_between(block: cst.CSTNode, call: cst.CSTNode, ctx: Context) -> set[str]:
    """Names bound again, outside ``block``, after it and before ``call``: an evaluation
    block that reuses the training step's names (``loss``, ``logits``) hands the backward
    nothing when the step binds them again first (issue 29)."""
    scope = ctx.enclosing_function(block)
    end = ctx.position(block).end
    found: set[str] = set()
    for node in [*ctx.nodes(cst.AssignTarget), *ctx.nodes(cst.For)]:
        where = ctx.position(node).start
        if (
            (where.line, where.column) > (end.line, end.column)
            and starts_before(node, call, ctx)
            and _same_scope(node, scope, ctx)
            and not ctx.within(block, node)
        ):
            found.update(bound_names(node.target))  # type: ignore[attr-defined]
    return found


@per_node
def feeds_training(block: cst.With | cst.FunctionDef, ctx: Context) -> bool:
    """Do values bound in this ``with`` block (or function under a ``no_grad`` decorator)
    reach a later ``backward()`` in the same function, meet a ``.numpy()`` (which raises
    on a tensor that needs grad), or come back from a function a training loop calls?"""
    bound = _bound_in(block.body, ctx)
    if not bound:
        return False
    numpy = [c for c in ctx.nodes_within(block.body, cst.Call) if method_name(c) == "numpy"]  # type: ignore[arg-type]
    if isinstance(block, cst.With):
        deps = _dependencies(ctx.enclosing_function(block), ctx)
        for call in _later_calls(block, "backward", ctx):
            live = bound - _rebound_between(block, call, ctx)
            if _closure(_reads(receiver(call), ctx), deps) & live:
                return True
        numpy += _later_calls(block, "numpy", ctx)
    if any(_base_name(receiver(call)) in bound for call in numpy):  # type: ignore[arg-type]
        return True
    inner = block if isinstance(block, cst.FunctionDef) else ctx.enclosing_function(block)
    return _returned_to_training(inner, bound, ctx)


# The same by-name flow, for operators that ask what the backwarded loss is computed from.
dependencies = _dependencies
closure = _closure
