"""Analyses the device operators share (private to this package)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import (
    dotted_name,
    method_name,
    positional_args,
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
