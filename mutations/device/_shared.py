"""Analyses the device operators share (private to this package)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import (
    bound_names,
    dotted_name,
    method_name,
    nodes_in_scope_of,
    positional_args,
    starts_before,
)

DTYPES = frozenset(
    {
        "float",
        "float16",
        "float32",
        "float64",
        "half",
        "double",
        "bfloat16",
        "long",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "short",
        "bool",
        "uint8",
        "complex64",
        "cfloat",
    }
)


DEVICE_KEYWORDS = frozenset({"device", "non_blocking", "copy", "memory_format"})


def is_device_move(expr: cst.BaseExpression, ctx: Context) -> bool:
    """``t.to(device)``, ``t.to(device=d, non_blocking=True)``, ``t.cuda()``; not a dtype cast."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return False
    method = method_name(expr)
    if method == "cuda":
        return True
    if method != "to" or not expr.args:
        return False
    positional = positional_args(expr)
    keywords = {arg.keyword.value for arg in expr.args if arg.keyword is not None}
    if any(arg.star for arg in expr.args) or len(positional) > 1 or keywords - DEVICE_KEYWORDS:
        return False
    if positional:
        target = dotted_name(positional[0].value)
        # x.to(torch.float32) is a cast, not a move
        return target is None or target.rsplit(".", 1)[-1] not in DTYPES
    return "device" in keywords


# Logging calls that trace or draw a tensor once: a batch moved only for them never trains.
_LOGGING_METHODS = frozenset(
    {"add_graph", "add_image", "add_images", "add_embedding", "add_figure", "add_video"}
    | {"add_histogram", "save_image", "make_grid"}
)


def only_logged(assign: cst.Assign, ctx: Context) -> str | None:
    """The logging call (``writer.add_graph``) that every later read of the names ``assign``
    binds goes to, when no other code reads them (issue 29: the device move of a sample
    batch traced for TensorBoard is no training batch); else None."""
    bound = {
        name for target in assign.targets for name in bound_names(target.target) if "." not in name
    }
    reads = [
        name
        for name in nodes_in_scope_of(assign, ctx, cst.Name)
        if name.value in bound  # type: ignore[attr-defined]
        and starts_before(assign, name, ctx)
        and not ctx.within(assign, name)
        and not isinstance(ctx.parent(name), (cst.AssignTarget, cst.Attribute))
    ]
    callers = set()
    for read in reads:
        arg = ctx.parent(read)
        call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        method = method_name(call) if isinstance(call, cst.Call) else None
        if method not in _LOGGING_METHODS:
            return None
        callers.add(dotted_name(call.func) or method)  # type: ignore[union-attr]
    return sorted(callers)[0] if callers else None
