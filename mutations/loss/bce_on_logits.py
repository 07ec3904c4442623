"""The ``bce_on_logits`` operator (BceOnLogits)."""

from __future__ import annotations

import libcst as cst

from mutations.loss._shared import keep_keywords
from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    TRAINING_CONTEXTS,
    closed_args,
    functional_loss_kind,
    loss_constructor_kind,
    renamed_callee,
)


class BceOnLogits(Operator):
    """Swap ``BCEWithLogitsLoss`` for ``BCELoss`` while still passing raw logits.

    Bug: ``BCELoss`` expects probabilities in [0, 1]; the model outputs unbounded logits.
    Impact: on CPU PyTorch raises as soon as a logit leaves [0, 1] (``all elements of
    input should be between 0 and 1``), on CUDA a device-side assert kills the run; if
    the outputs happen to stay in range the loss is simply wrong. Fix: keep
    ``BCEWithLogitsLoss`` on logits (numerically stable), or apply ``torch.sigmoid``
    before ``BCELoss``. Check: a crash in the first steps; range-check the loss inputs.
    """

    name = "bce_on_logits"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = "BCEWithLogitsLoss replaced by BCELoss while logits are still passed."
    expected = "crash"
    witness = "differs loss_call", "the training loss is binary_cross_entropy on logits"
    crashes = ("between 0 and 1",)
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                from torch import nn
                trainer = Trainer(model, nn.BCEWithLogitsLoss())
            """,
            after="""
                from torch import nn
                trainer = Trainer(model, nn.BCELoss())
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.binary_cross_entropy_with_logits(logits, y, pos_weight=w)
            """,
            after="""
                import torch.nn.functional as F
                loss = F.binary_cross_entropy(logits, y)
            """,
        ),
        Example(
            before="""
                from torch.nn import BCEWithLogitsLoss
                criterion = BCEWithLogitsLoss()
            """,
            after="""
                from torch.nn import BCEWithLogitsLoss, BCELoss
                criterion = BCELoss()
            """,
        ),
    )
    non_examples = (
        """
            from torch import nn
            criterion = nn.BCELoss()
        """,
        """
            import torch.nn.functional as F
            loss = F.binary_cross_entropy(p, y)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if not isinstance(node, cst.Call):
            return None
        if loss_constructor_kind(node, ctx) == "BCEWithLogitsLoss":
            new_name, keep = "BCELoss", ("weight", "reduction")
            args = keep_keywords(node, keep)
        elif functional_loss_kind(node, ctx) == "BCEWithLogitsLoss":
            new_name = "binary_cross_entropy"
            # pos_weight exists only for the logits version: a person switching drops it.
            args = closed_args(
                [
                    arg
                    for arg in node.args
                    if arg.keyword is None or arg.keyword.value != "pos_weight"
                ]
            )
        else:
            return None
        renamed = renamed_callee(node.func, ctx, new_name)
        if renamed is None:
            return None
        func, edits = renamed
        edits[node] = node.with_changes(func=func, args=args)
        return edits
