"""The ``drop_loss_reduction`` operator (DropLossReduction)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._loss_flow import backward_calls, feeds_loss
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    TRAINING_CONTEXTS,
    assigned_values,
    callee_name,
    method_name,
    receiver,
)

_REDUCTIONS = frozenset({"mean", "sum"})
# Element-wise torch functions: their result has the shape of their inputs.
_ELEMENTWISE = frozenset({"max", "min", "abs", "clamp", "where", "exp", "log", "square", "pow"})
_ELEMENTWISE |= frozenset({"maximum", "minimum", "sigmoid", "relu", "smooth_l1_loss"})


def _elementwise(expr: cst.BaseExpression, ctx: Context, depth: int = 0) -> bool:
    """Is ``expr`` an element-wise combination of tensors (``(v - r) ** 2``, ``torch.max(a,
    b)``), or a name bound to one: a value with one entry per sample?"""
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
        return True
    if isinstance(expr, cst.Call):
        return (callee_name(expr) in _ELEMENTWISE and method_name(expr) is None) or (
            isinstance(expr.func, cst.Attribute)
            and isinstance(expr.func.value, cst.Name)
            and expr.func.value.value == "torch"
            and expr.func.attr.value in _ELEMENTWISE
        )
    if isinstance(expr, cst.Name) and depth < 2:
        values = assigned_values(ctx, expr.value)
        return bool(values) and all(_elementwise(v, ctx, depth + 1) for v in values)
    return False


def _reduced_again(ctx: Context, scope: cst.FunctionDef | None) -> bool:
    """Does a backward in ``scope`` reduce its own receiver (``loss.mean().backward()``)?
    Then a term left unreduced is averaged there anyway: equivalent."""
    for call in backward_calls(scope, ctx):
        owner = receiver(call)
        if any(method_name(c) in _REDUCTIONS for c in ctx.nodes_within(owner, cst.Call)):  # type: ignore[arg-type]
            return True
        if isinstance(owner, cst.Call) and method_name(owner) in _REDUCTIONS:
            return True
    return False


class DropLossReduction(Swap):
    """Remove the ``.mean()`` (or ``.sum()``) that reduces an element-wise loss term.

    Bug: a term of a composite loss (a value loss, a penalty) is left as one value per
    sample instead of being averaged, usually in one branch of an ``if`` the author did
    not run. Real fix: vwxyzjn/cleanrl@bf5f87a (PPO's unclipped value loss ``0.5 * ((v -
    R) ** 2)`` without ``.mean()``). Impact: the sum of the scalar terms and the unreduced
    one is a tensor, and ``loss.backward()`` raises "grad can be implicitly created only for
    scalar outputs" on the first step; where something later sums it instead, the term's
    weight grows with the batch size. Only terms a backward takes unreduced are sites (a
    ``loss.mean().backward()`` would average the term anyway: equivalent). Fix: reduce
    every term before combining them. Check: assert ``loss.dim() == 0`` before backward;
    exercise every branch of the loss in a test.
    """

    name = "drop_loss_reduction"
    category = "loss"
    summary = "The .mean() of an element-wise loss term removed: the loss is a tensor."
    expected = "crash"
    witness = "more nonscalar_backward", "backward() gets the unreduced loss (one per sample)"
    crashes = ("only for scalar outputs",)
    node_types = (cst.Call,)
    contexts = TRAINING_CONTEXTS
    examples = (
        Example(
            before="""
                pg_loss = policy_loss(batch)
                v_loss = 0.5 * ((new_values - returns) ** 2).mean()
                loss = pg_loss + v_loss * vf_coef
                loss.backward()
            """,
            after="""
                pg_loss = policy_loss(batch)
                v_loss = 0.5 * ((new_values - returns) ** 2)
                loss = pg_loss + v_loss * vf_coef
                loss.backward()
            """,
        ),
    )
    non_examples = (
        # The backward averages the total anyway: equivalent.
        """
            loss = ((pred - y) ** 2).mean() + reg
            loss.mean().backward()
        """,
        # A reduction over a dimension keeps a per-sample loss: another bug.
        """
            loss = ((pred - y) ** 2).mean(dim=1)
            loss.backward()
        """,
        # Already a scalar from a module loss: nothing per sample to reduce.
        """
            loss = criterion(out, y).mean()
            loss.backward()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        if method_name(node) not in _REDUCTIONS or node.args:
            return None
        term = receiver(node)
        statement = ctx.statement_of(node)
        if statement is None or not _elementwise(term, ctx) or not feeds_loss(statement, ctx):
            return None
        if _reduced_again(ctx, ctx.enclosing_function(node)):
            return None
        return term.with_changes(lpar=node.lpar or term.lpar, rpar=node.rpar or term.rpar)
