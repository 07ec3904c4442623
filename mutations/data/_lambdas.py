"""A ``transforms.Lambda`` that rescales its input, as a normalisation step of a
``Compose`` (private to the data operators)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import number_value, resolve

_LAMBDA_TRANSFORM = (
    "torchvision.transforms.Lambda",
    "torchvision.transforms.v2.Lambda",
    "torchvision.transforms.transforms.Lambda",
)
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


def _affine(expr: cst.BaseExpression, param: str) -> bool:
    """Is ``expr`` built from ``param`` and numbers with + - * / alone, using ``param``?"""
    if isinstance(expr, cst.Name):
        return expr.value == param
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _ARITHMETIC):
        sides = (expr.left, expr.right)
        uses = [_affine(side, param) for side in sides]
        numbers = [number_value(side) is not None for side in sides]
        return any(uses) and all(u or n for u, n in zip(uses, numbers))
    return False


def scaling_lambda_list(node: cst.Call, ctx: Context) -> cst.List | None:
    """The ``[...]`` of a ``Compose`` holding ``transforms.Lambda(lambda t: t * 2 - 1)``."""
    element = ctx.parent(node)
    holder = ctx.parent(element) if element is not None else None
    if not isinstance(element, cst.Element) or not isinstance(holder, cst.List):
        return None
    if not resolve(node, ctx, strict=False).matches(_LAMBDA_TRANSFORM) or len(node.args) != 1:
        return None
    function = node.args[0].value
    if not isinstance(function, cst.Lambda) or len(function.params.params) != 1:
        return None
    param = function.params.params[0].name.value
    body = function.body
    return holder if isinstance(body, cst.BinaryOperation) and _affine(body, param) else None
