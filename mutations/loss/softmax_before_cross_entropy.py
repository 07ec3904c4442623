"""The ``softmax_before_cross_entropy`` operator (SoftmaxBeforeCrossEntropy)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    keyword_arg,
    loss_call_kind,
    loss_input,
    method_call,
    method_name,
    number_literal,
    with_arg_value,
)


class SoftmaxBeforeCrossEntropy(Swap):
    """Apply softmax to the logits before passing them to cross-entropy.

    Bug: ``CrossEntropyLoss`` / ``F.cross_entropy`` already applies log-softmax; feeding it
    probabilities applies softmax twice. Impact: the inputs are squashed into [0, 1], so
    the loss cannot go below about ln(1 + (C-1)/e) (1.46 for 10 classes), gradients shrink
    as the model grows confident and learning slows or stalls; accuracy may still look
    fine while the loss plateaus high. Fix: pass raw logits to cross-entropy. Check: the
    loss floor (overfit one batch: the loss refuses to approach zero) and the init-loss
    check against ln C.
    """

    name = "softmax_before_cross_entropy"
    # Evaluation stays a context of this bug (unlike the other loss operators): a double
    # softmax in evaluate() is the catalog's measured "misleads" case (every reported
    # validation loss lies high while the model is the reference's; tests/test_truth.py).
    category = "loss"
    summary = "Softmax applied to the logits that cross-entropy receives (double softmax)."
    expected = "degrades"
    witness = "differential", "different numbers: softmax applied twice"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                from torch import nn
                criterion = nn.CrossEntropyLoss()
                loss = criterion(logits, y)
            """,
            after="""
                from torch import nn
                criterion = nn.CrossEntropyLoss()
                loss = criterion(logits.softmax(dim=1), y)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.cross_entropy(model(x), y)
            """,
            after="""
                import torch.nn.functional as F
                loss = F.cross_entropy(model(x).softmax(dim=1), y)
            """,
        ),
    )
    non_examples = (
        """
            from torch import nn
            criterion = nn.CrossEntropyLoss()
            loss = criterion(logits.softmax(dim=1), y)
        """,
        """
            from torch import nn
            criterion = nn.NLLLoss()
            loss = criterion(logits, y)
        """,
        "loss = criterion(logits, y)\n",  # nothing says what criterion is
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if loss_call_kind(node, ctx) != "CrossEntropyLoss":
            return None
        arg = loss_input(node)  # type: ignore[arg-type]
        if arg is None or _is_softmax(arg.value):
            return None
        assert isinstance(node, cst.Call)
        probabilities = method_call(arg.value, "softmax", keyword_arg("dim", number_literal(1)))
        return with_arg_value(node, arg, probabilities)


def _is_softmax(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and (
        method_name(expr) in ("softmax", "log_softmax")
        or (isinstance(expr.func, cst.Name) and expr.func.value in ("softmax", "log_softmax"))
    )
