"""Analyses the optim operators share (private to this package)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import (
    as_factor,
    has_star_args,
    number_literal,
    number_value,
    optimizer_class,
)

# Learning rates PyTorch uses when ``lr`` is not given.
DEFAULT_LR = {
    "Adam": 1e-3,
    "AdamW": 1e-3,
    "SGD": 1e-3,
    "RMSprop": 1e-2,
    "Adagrad": 1e-2,
    "Adadelta": 1.0,
    "Adamax": 2e-3,
    "NAdam": 2e-3,
    "RAdam": 1e-3,
    "ASGD": 1e-2,
    "Rprop": 1e-2,
    "SparseAdam": 1e-3,
    "LBFGS": 1.0,
}


def optimizer_call(node: cst.CSTNode, ctx: Context) -> tuple[cst.Call, str] | None:
    """(call, class) of an optimizer constructor whose arguments are all visible: with
    ``*args``/``**kwargs`` any argument could hide there, so no rewrite is trustworthy."""
    optimizer = optimizer_class(node, ctx)
    if optimizer is None or not isinstance(node, cst.Call) or has_star_args(node):
        return None
    return node, optimizer


def _times(expr: cst.BaseExpression, factor: float) -> cst.BaseExpression:
    """``expr`` multiplied by ``factor``: a computed literal for a literal, else ``expr * k``."""
    value = number_value(expr)
    if value is not None:
        return number_literal(value * factor, integer=isinstance(expr, cst.Integer))
    return cst.BinaryOperation(as_factor(expr), cst.Multiply(), factor_literal(factor))


def factor_literal(factor: float) -> cst.BaseExpression:
    return number_literal(factor, integer=factor == int(factor))
