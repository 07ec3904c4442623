"""The ``missing_epsilon`` operator (MissingEpsilon)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    dotted_name,
    last_name,
    method_name,
    number_value,
)

_SPREADS = ("std", "var", "norm", "sqrt")


_GUARDED_FUNCTIONS = ("log", "log2", "log10", "sqrt", "rsqrt")


def _epsilon_split(node: cst.BinaryOperation) -> cst.BaseExpression | None:
    """The guarded term of ``term + eps`` (either order), eps a small literal or ``eps``."""
    if not isinstance(node.operator, cst.Add):
        return None
    for eps, term in ((node.right, node.left), (node.left, node.right)):
        value = number_value(eps)
        spelled = (dotted_name(eps) or "").rsplit(".", 1)[-1].lower()
        if (value is not None and 0 < value <= 1e-3) or spelled in ("eps", "epsilon"):
            return term
    return None


def _callee_tail(expr: cst.BaseExpression) -> str | None:
    if not isinstance(expr, cst.Call):
        return None
    return last_name(expr.func) or method_name(expr)


class MissingEpsilon(Swap):
    """Drop the epsilon that keeps a division, log or sqrt away from zero.

    Bug: ``x / (std + 1e-8)`` becomes ``x / std``, ``torch.log(p + 1e-8)`` becomes
    ``torch.log(p)``, ``std = x.std(0) + 1e-8`` loses its guard. Impact: harmless while
    the guarded value stays away from zero, so on clean data the run matches the
    reference; a constant feature (std 0), an empty class or a probability that
    underflows then yields inf/NaN that spreads through the whole model in one step.
    Fix: keep the epsilon (or clamp: ``p.clamp_min(1e-8)``). Check: a NaN check on
    inputs and loss (the NaN step in the loss log); a unit test with a constant column.
    """

    name = "missing_epsilon"
    category = "numerics"
    summary = "Epsilon removed from a denominator, log or sqrt: inf/NaN once it hits zero."
    expected = "silent"
    witness = "differential", "different numbers: a denominator or log loses its epsilon"
    node_types = (cst.BinaryOperation,)
    examples = (
        Example(
            before="mean, std = X.mean(0), X.std(0) + 1e-8\n",
            after="mean, std = X.mean(0), X.std(0)\n",
        ),
        Example(
            before="x = (x - mu) / (sigma + 1e-6)\n",
            after="x = (x - mu) / sigma\n",
        ),
        Example(
            before="""
                import torch
                loss = -torch.log(p + self.eps).mean()
            """,
            after="""
                import torch
                loss = -torch.log(p).mean()
            """,
        ),
        Example(
            before="norm = (a * a + 1e-12).sqrt()\n",
            after="norm = (a * a).sqrt()\n",
        ),
    )
    non_examples = (
        "x = x + 1e-3 * noise\n",
        "lr = base_lr + 1e-4\n",
        "y = a / (b + 1.0)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if not isinstance(node, cst.BinaryOperation):
            return None
        term = _epsilon_split(node)
        if term is None or not self._guards_something(node, term, ctx):
            return None
        if isinstance(term, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or term.lpar:
            return term
        return term.with_changes(lpar=node.lpar, rpar=node.rpar)

    @staticmethod
    def _guards_something(
        node: cst.BinaryOperation, term: cst.BaseExpression, ctx: Context
    ) -> bool:
        """Is ``term + eps`` a divisor, the argument of a function undefined at zero, or a spread?"""
        parent = ctx.parent(node)
        if isinstance(parent, cst.BinaryOperation):
            return isinstance(parent.operator, cst.Divide) and parent.right is node
        if isinstance(parent, cst.Arg):
            consumer = ctx.parent(parent)
            if _callee_tail(consumer) in _GUARDED_FUNCTIONS:  # type: ignore[arg-type]
                return True
        if isinstance(parent, cst.Attribute) and parent.attr.value in _GUARDED_FUNCTIONS:
            return True
        return _callee_tail(term) in _SPREADS
