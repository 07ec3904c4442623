"""Gate checks of what an operator claims: ``slice_direction`` and ``training_loader``.

``shrinks_slice``: each edited slice must keep fewer rows than before. The bounds are
evaluated with every size in them (``n_test``, ``len(X)``) standing for a positive number
(``len`` of the sliced sequence for its own length) and a negative bound counting from the
end, as Python does: ``idx[:-n_test]`` becoming
``idx[:int(-n_test * 0.1)]`` keeps *more* rows, the opposite of the claim. Bounds it cannot
evaluate pass.

``training_loader``: the DataLoader an edit configures must feed the loss that is
backwarded (``mutator.semantics.flow``); only a loader known not to (its batches go to
evaluation loops alone, or it is built for an evaluation function) is rejected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import libcst as cst

from mutator.context import Context
from mutator.operator import Replacement
from mutator.semantics.edits import code_of, compact_code
from mutator.semantics.flow import loader_feeds_training, loaders_of

Edit = tuple[cst.CSTNode, Replacement]
_LENGTH = 1e6  # the sliced sequence's length: longer than any size standing in a bound
_ROUND = {"int": math.trunc, "round": round, "abs": abs, "float": float}
_OPS = {
    cst.Add: lambda a, b: a + b,
    cst.Subtract: lambda a, b: a - b,
    cst.Multiply: lambda a, b: a * b,
    cst.Divide: lambda a, b: a / b,
    cst.FloorDivide: lambda a, b: a // b,
}


def _value(expr: cst.BaseExpression, sizes: dict[str, float]) -> float | None:
    """``expr`` with each size (a name, attribute, ``len(...)``, any other call) standing
    for a distinct positive number; the same code always for the same number."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        inner = _value(expr.expression, sizes)
        sign = -1 if isinstance(expr.operator, cst.Minus) else 1
        return None if inner is None else sign * inner
    if isinstance(expr, cst.BinaryOperation) and type(expr.operator) in _OPS:
        left, right = _value(expr.left, sizes), _value(expr.right, sizes)
        if (
            left is None
            or right is None
            or (right == 0 and isinstance(expr.operator, (cst.Divide, cst.FloorDivide)))
        ):
            return None
        return _OPS[type(expr.operator)](left, right)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
        function = expr.func.value
        args = [_value(arg.value, sizes) for arg in expr.args]
        if function in _ROUND and len(args) == 1 and args[0] is not None:
            return float(_ROUND[function](args[0]))
        if function in ("max", "min") and args and None not in args:
            return float(max(args) if function == "max" else min(args))  # type: ignore[type-var]
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        key = compact_code(expr)
        if key not in sizes:
            sizes[key] = 1000.0 * 0.7 ** len(sizes)  # distinct, so ``n - n_val`` is not 0
        return sizes[key]
    return None


def _kept(part: cst.Slice, sizes: dict[str, float]) -> float | None:
    """How many rows ``[lower:upper]`` keeps of a sequence of ``_LENGTH`` rows."""
    ends = []
    for bound, default in ((part.lower, 0.0), (part.upper, _LENGTH)):
        value = default if bound is None else _value(bound, sizes)
        if value is None:
            return None
        ends.append(min(max(value + _LENGTH if value < 0 else value, 0.0), _LENGTH))
    return max(ends[1] - ends[0], 0.0)


def slice_moves_wrong_way(edits: Sequence[Edit], ctx: Context) -> str | None:
    """Why an edited slice keeps at least as many rows as before, or None."""
    for original, replacement in edits:
        if not isinstance(original, cst.Slice) or not isinstance(replacement, cst.Slice):
            continue
        # ``len(data)`` in a bound of ``data[...]`` is the length of the sequence itself.
        element = ctx.parent(original)
        subscript = ctx.parent(element) if element is not None else None
        sizes: dict[str, float] = {}
        if isinstance(subscript, cst.Subscript):
            sizes[f"len({compact_code(subscript.value)})"] = _LENGTH
        before, after = _kept(original, sizes), _kept(replacement, sizes)
        if before is not None and after is not None and after >= before:
            return (
                f"the slice [{code_of(original)}] keeps as many rows or more after the edit "
                f"([{code_of(replacement)}]): a negative bound counts from the end"
            )
    return None


def loader_off_path(edits: Sequence[Edit], ctx: Context) -> str | None:
    """Why an edited DataLoader is not the training loader, or None."""
    for original, _ in edits:
        for loader in loaders_of(original, ctx):
            if loader_feeds_training(loader, ctx) is False:
                function = ctx.enclosing_function(loader)
                where = f" built in {function.name.value}()" if function is not None else ""
                return (
                    f"the DataLoader{where} never feeds the loss that is backwarded "
                    "(its batches go to evaluation only): not the training loader"
                )
    return None
