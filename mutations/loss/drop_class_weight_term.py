"""The ``drop_class_weight_term`` operator (DropClassWeightTerm)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._loss_flow import loss_code
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    TRAINING_CONTEXTS,
    code_of,
    identifier_words,
    is_label_name,
    number_value,
)

_WEIGHT_WORDS = frozenset({"alpha", "weight", "w", "beta", "lambda", "lam", "balance", "ratio"})


def _complement_of(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``w`` of ``(1 - w)`` (parenthesised), else None."""
    if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, cst.Subtract):
        return None
    if not expr.lpar or number_value(expr.left) != 1:
        return None
    return expr.right


def _factors(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return [*_factors(expr.left), *_factors(expr.right)]
    return [expr]


class DropClassWeightTerm(Swap):
    """Drop the ``(1 - alpha)`` weight of the negative class from a class-balanced loss.

    Bug: a loss balances its two classes with ``alpha`` for the positives and
    ``1 - alpha`` for the negatives, and one branch loses its factor. Real fix:
    mathiaszinnen/focal_loss_torch@5a56a05 (the focal loss weighted positives by
    ``alpha`` and left negatives unweighted: ``torch.where(target == 1, fl * alpha, fl)``).
    Impact: the negatives weigh ``1 / (1 - alpha)`` times more than intended relative to
    the positives (x4 for the usual alpha 0.25): the balance the weight was tuned for is
    gone, the model over-predicts the majority (negative) class, and recall of the rare
    class drops while the loss still falls. Only a ``(1 - w)`` factor whose ``w`` (a weight:
    alpha, beta, weight, ...) also multiplies another term of the same statement is a site.
    Fix: weight both branches (``alpha`` and ``1 - alpha``). Check: compute the loss of one
    positive and one negative example by hand; their ratio must be alpha / (1 - alpha).
    """

    name = "drop_class_weight_term"
    category = "loss"
    summary = "The (1 - alpha) weight of the negative class dropped from a balanced loss."
    expected = "degrades"
    witness = "differential", "different numbers: the loss loses a class-weight factor"
    node_types = (cst.BinaryOperation,)
    contexts = TRAINING_CONTEXTS
    examples = (
        Example(
            before="""
                class FocalLoss(nn.Module):
                    def forward(self, x, target):
                        p_t = torch.where(target == 1, x, 1 - x)
                        fl = -((1 - p_t) ** self.gamma) * torch.log(p_t)
                        fl = torch.where(target == 1, fl * self.alpha, fl * (1 - self.alpha))
                        return fl.mean()
            """,
            after="""
                class FocalLoss(nn.Module):
                    def forward(self, x, target):
                        p_t = torch.where(target == 1, x, 1 - x)
                        fl = -((1 - p_t) ** self.gamma) * torch.log(p_t)
                        fl = torch.where(target == 1, fl * self.alpha, fl)
                        return fl.mean()
            """,
        ),
        Example(
            before="""
                def sigmoid_focal_loss(inputs, targets, alpha=0.25):
                    ce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
                    alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
                    return (alpha_t * ce).mean()
            """,
            after="""
                def sigmoid_focal_loss(inputs, targets, alpha=0.25):
                    ce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
                    alpha_t = alpha * targets + (1 - targets)
                    return (alpha_t * ce).mean()
            """,
        ),
    )
    non_examples = (
        # An interpolation between two batches (WGAN-GP), not a weight per class.
        """
            def compute_gradient_penalty(D, real_samples, fake_samples, alpha):
                interpolates = alpha * real_samples + ((1 - alpha) * fake_samples)
                return D(interpolates).mean()
        """,
        # ``1 - p_t`` is no class weight: no weight multiplies another term.
        """
            def focal_loss(p_t, gamma):
                return -((1 - p_t) ** gamma) * torch.log(p_t)
        """,
        # The weight's complement alone, nothing weighted by alpha: no balance to break.
        """
            def mix_loss(a, b, w):
                return a * (1 - w)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.BinaryOperation)
        if not isinstance(node.operator, cst.Multiply):
            return None
        for keep, drop in ((node.left, node.right), (node.right, node.left)):
            weight = _complement_of(drop)
            if weight is None or not identifier_words(code_of(weight)) & _WEIGHT_WORDS:
                continue
            statement = ctx.statement_of(node)
            if statement is None or not loss_code(statement, ctx):
                return None
            if not any(is_label_name(n.value) for n in ctx.nodes_within(statement, cst.Name)):  # type: ignore[attr-defined]
                return None  # no class in the statement: an interpolation, not a balance
            wanted = code_of(weight)
            others = [
                factor
                for product in ctx.nodes_within(statement, cst.BinaryOperation)
                if product is not node and isinstance(product.operator, cst.Multiply)  # type: ignore[attr-defined]
                for factor in _factors(product)  # type: ignore[arg-type]
            ]
            if not any(code_of(factor) == wanted for factor in others):
                return None
            return keep.with_changes(lpar=node.lpar or keep.lpar, rpar=node.rpar or keep.rpar)
        return None
