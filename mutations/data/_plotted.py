"""Values the script only draws (private to the data package): a scaled copy of a few
images shown before and during training (issue 29: MorvanZhou's autoencoder divides its
``view_data`` by 255 for the plots alone; the training batches keep ``ToTensor``'s scaling).
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import callee_name, is_model, starts_before

# Calls that draw or print what they are given.
_SINKS = frozenset(
    {"imshow", "matshow", "plot", "scatter", "hist", "bar", "text", "show", "savefig"}
    | {"set_data", "add_image", "add_images", "add_figure", "save_image", "make_grid", "print"}
    | {"set_xlim", "set_ylim", "set_zlim", "set_title", "legend", "annotate"}
)
# Reads followed at most (a tuple unpacked into names read again multiplies them).
_MAX_STEPS = 400


def _reads_after(assign: cst.CSTNode, name: str, ctx: Context) -> list[cst.Name]:
    """Reads of ``name`` after ``assign`` (or a ``for``) in its scope, up to the next
    assignment of it."""
    scope = ctx.enclosing_function(assign)
    # A ``for`` binds its target for the body: only the target and the iterable are its own.
    own = (assign.target, assign.iter) if isinstance(assign, cst.For) else (assign,)
    later = [
        n
        for n in (ctx.nodes_within(scope, cst.Name) if scope is not None else ctx.nodes(cst.Name))
        if n.value == name  # type: ignore[attr-defined]
        and starts_before(assign, n, ctx)
        and not any(ctx.within(part, n) for part in own)
        and ctx.enclosing_function(n) is scope
    ]
    reads = []
    for node in later:
        if isinstance(ctx.parent(node), cst.AssignTarget):
            break  # rebound: later reads see the new value
        reads.append(node)
    return reads


def _only_drawn(read: cst.CSTNode, ctx: Context, budget: list[int]) -> bool:
    budget[0] -= 1
    if budget[0] < 0:
        return False
    node = read
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, (cst.Attribute, cst.Subscript, cst.SubscriptElement, cst.Index)):
            node = parent
            continue
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)):
            node = parent  # arithmetic on the value: follow the result
            continue
        if isinstance(parent, (cst.Element, cst.Tuple, cst.List)):
            node = parent  # ``X, Y = a.numpy(), b.numpy()``: the targets decide
            continue
        if isinstance(parent, cst.For) and parent.iter is node:
            return _names_only_drawn(parent.target, parent, ctx, budget)
        if isinstance(parent, cst.Call) and parent.func is node:
            node = parent  # ``x.numpy()``: the result
            continue
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            if not isinstance(call, cst.Call):
                return False
            if callee_name(call) in _SINKS:
                return True
            if is_model(call.func, ctx) or not _own_function(call, ctx):
                node = call  # a forward or a library function: follow its result
                continue
            return False
        if isinstance(parent, cst.Assign) and parent.value is node:
            return _targets_only_drawn(parent, ctx, budget)
        return False


def _own_function(call: cst.Call, ctx: Context) -> bool:
    name = callee_name(call)
    return any(f.name.value == name for f in ctx.nodes(cst.FunctionDef))  # type: ignore[attr-defined]


def _targets_only_drawn(assign: cst.Assign, ctx: Context, budget: list[int]) -> bool:
    return all(_names_only_drawn(t.target, assign, ctx, budget) for t in assign.targets)


def _names_only_drawn(
    bound: cst.BaseExpression, binder: cst.CSTNode, ctx: Context, budget: list[int]
) -> bool:
    """Are the names ``bound`` (an assignment's or a ``for``'s target) only drawn?"""
    names: list[str] = []
    elements = bound.elements if isinstance(bound, (cst.Tuple, cst.List)) else [bound]
    for element in elements:
        value = element.value if isinstance(element, (cst.Element, cst.StarredElement)) else element
        if not isinstance(value, cst.Name):
            return False
        names.append(value.value)
    reads = [r for name in names if name != "_" for r in _reads_after(binder, name, ctx)]
    return all(_only_drawn(r, ctx, budget) for r in reads)


def only_drawn(statement: cst.CSTNode, ctx: Context) -> bool:
    """Does everything computed from the value ``statement`` assigns (``view_data = ... /
    255.``) end in a plot or a print: images shown, a model's output on them shown? False
    when some read reaches anything else (a loss, a return, a stored attribute), or when
    nothing reads it."""
    if not isinstance(statement, cst.Assign):
        return False
    reads = [
        r
        for t in statement.targets
        if isinstance(t.target, cst.Name)
        for r in _reads_after(statement, t.target.value, ctx)
    ]
    return bool(reads) and _targets_only_drawn(statement, ctx, [_MAX_STEPS])
