"""What an optimizer's ``params`` argument gathers (issue 29): ``model.parameters()`` itself,
or the ``.parameters()`` calls inside ``list(...)``, sums of lists, ``filter(...)``,
parameter-group dicts (``dict(params=...)``, ``{"params": ...}``) and a name bound to one
of those (``params = list(decoder.parameters()) + list(encoder.linear.parameters())``).
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics.names import resolve
from mutator.semantics.scope import values_of
from mutator.semantics.syntax import dotted_name, find_arg, method_name

# Calls that pass parameters through: the iterable is their last positional argument.
_PASSING = frozenset({"builtins.list", "builtins.tuple", "builtins.filter", "itertools.chain"})


def _parameters_call(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and method_name(expr) == "parameters" and not expr.args


def parameter_calls(
    expr: cst.BaseExpression, ctx: Context, at: cst.CSTNode | None = None, depth: int = 0
) -> list[cst.Call] | None:
    """The ``X.parameters()`` calls ``expr`` gathers, in order; None when some part of it is
    something else (a list the code fills elsewhere, a helper's result)."""
    if depth > 4:
        return None
    if _parameters_call(expr):
        return [expr]  # type: ignore[list-item]
    parts: list[cst.BaseExpression] | None = None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        parts = [expr.left, expr.right]
    elif isinstance(expr, (cst.List, cst.Tuple)):
        parts = [element.value for element in expr.elements]
    elif isinstance(expr, cst.Dict):
        entry = next(
            (
                e.value
                for e in expr.elements
                if isinstance(e, cst.DictElement)
                and isinstance(e.key, cst.SimpleString)
                and e.key.evaluated_value == "params"
            ),
            None,
        )
        parts = [entry] if entry is not None else None
    elif isinstance(expr, cst.Call):
        names = resolve(expr.func, ctx).names
        if names == {"builtins.dict"}:
            entry = find_arg(expr, "params")
            parts = [entry.value] if entry is not None else None
        elif names & _PASSING and expr.args and not any(a.star for a in expr.args):
            parts = [a.value for a in expr.args if a.keyword is None][-1:] or None
            if names == {"itertools.chain"}:
                parts = [a.value for a in expr.args]
    elif isinstance(expr, cst.Name):
        held = values_of(expr, ctx, at if at is not None else expr)
        parts = held or None
    if not parts:
        return None
    found: list[cst.Call] = []
    for part in parts:
        calls = parameter_calls(part, ctx, at, depth + 1)
        if calls is None:
            return None
        found += calls
    return found


def is_group_list(expr: cst.BaseExpression, ctx: Context) -> bool:
    """``[dict(params=...), {...}]``: parameter groups, each with its own settings."""
    if isinstance(expr, cst.Name):
        held = values_of(expr, ctx, expr)
        return len(held) == 1 and is_group_list(held[0], ctx)
    return isinstance(expr, (cst.List, cst.Tuple)) and any(
        isinstance(e.value, cst.Dict)
        or (isinstance(e.value, cst.Call) and resolve(e.value.func, ctx).names == {"builtins.dict"})
        for e in expr.elements
    )


def parameter_owners(call: cst.Call, ctx: Context) -> list[cst.BaseExpression] | None:
    """The modules whose parameters the optimizer ``call`` is built on (``qf1``, ``qf2`` of
    ``Adam(list(qf1.parameters()) + list(qf2.parameters()))``), or None."""
    params = find_arg(call, "params", 0)
    calls = parameter_calls(params.value, ctx, call) if params is not None else None
    if not calls:
        return None
    return [c.func.value for c in calls]  # type: ignore[union-attr]


def root_name(expr: cst.BaseExpression) -> str | None:
    """``model`` of ``model.conv1``."""
    dotted = dotted_name(expr)
    return dotted.split(".")[0] if dotted is not None else None
