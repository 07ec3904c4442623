"""The ``sigmoid_before_bce_with_logits`` operator (SigmoidBeforeBceWithLogits)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    TRAINING_CONTEXTS,
    function_call,
    last_name,
    loss_call_kind,
    loss_input,
    method_call,
    module_alias,
    with_arg_value,
)


class SigmoidBeforeBceWithLogits(Swap):
    """Apply ``torch.sigmoid`` to the logits that ``BCEWithLogitsLoss`` receives.

    Bug: ``BCEWithLogitsLoss`` applies the sigmoid itself; a second sigmoid squashes its
    input into (0, 1), which the loss reads as logits near zero. Impact: predicted
    probabilities stay between 0.5 and 0.73, the loss cannot fall below about 0.31 and
    gradients fade, so training slows down and plateaus while accuracy may still look
    reasonable. Fix: pass raw logits to ``BCEWithLogitsLoss`` (or use ``BCELoss`` on the
    probabilities). Check: overfit one batch (the loss floors well above zero) and compare
    the loss curve with the reference.
    """

    name = "sigmoid_before_bce_with_logits"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = "torch.sigmoid applied before BCEWithLogitsLoss (double sigmoid)."
    expected = "degrades"
    witness = "differential", "different numbers: the logits are squashed twice"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch
                from torch import nn
                criterion = nn.BCEWithLogitsLoss()
                loss = criterion(logits, y)
            """,
            after="""
                import torch
                from torch import nn
                criterion = nn.BCEWithLogitsLoss()
                loss = criterion(torch.sigmoid(logits), y)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.binary_cross_entropy_with_logits(out.squeeze(1), y)
            """,
            after="""
                import torch.nn.functional as F
                loss = F.binary_cross_entropy_with_logits(out.squeeze(1).sigmoid(), y)
            """,
        ),
    )
    non_examples = (
        """
            import torch
            from torch import nn
            criterion = nn.BCEWithLogitsLoss()
            loss = criterion(torch.sigmoid(logits), y)
        """,
        """
            import torch
            from torch import nn
            criterion = nn.BCELoss()
            loss = criterion(torch.sigmoid(logits), y)
        """,
        """
            import torch
            import torch.nn as nn

            criterion = nn.BCEWithLogitsLoss()


            def evaluate(model, x, y):
                with torch.no_grad():
                    loss = criterion(model(x).squeeze(1), y)
                return loss.item()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if loss_call_kind(node, ctx) != "BCEWithLogitsLoss":
            return None
        arg = loss_input(node)  # type: ignore[arg-type]
        if arg is None or _is_sigmoid(arg.value):
            return None
        assert isinstance(node, cst.Call)
        torch = module_alias(ctx, "torch")
        if torch is not None:
            squashed = function_call(f"{torch}.sigmoid", cst.Arg(arg.value))
        else:
            squashed = method_call(arg.value, "sigmoid")
        return with_arg_value(node, arg, squashed)


def _is_sigmoid(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and (last_name(expr.func) == "sigmoid")
