"""The ``reduction_sum`` operator (ReductionSum)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    LOSS_CLASSES,
    TRAINING_CONTEXTS,
    find_arg,
    keyword_string,
    loss_site_kind,
    with_keyword,
)


class ReductionSum(Swap):
    """Sum the loss over the batch instead of averaging it (``reduction="sum"``).

    Bug: the loss (and so the gradient) scales with the batch size. Impact: with SGD the
    effective learning rate is multiplied by the batch size, which usually diverges or
    oscillates; Adam normalises the gradient scale away, so there the bug is nearly
    silent apart from a logged loss that is batch-size times larger (and a last, smaller
    batch that weighs less). Fix: keep the default ``reduction="mean"`` or divide by the
    batch size. Check: the init-loss check (the first loss is batch x ln C, not ln C) and
    the grad-norm log.
    """

    name = "reduction_sum"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = 'reduction="sum" on a loss: gradients scale with the batch size.'
    expected = "degrades"
    witness = "differs loss_call", "the training loss sums where the reference averages"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch.nn as nn
                criterion = nn.CrossEntropyLoss()
            """,
            after="""
                import torch.nn as nn
                criterion = nn.CrossEntropyLoss(reduction="sum")
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.mse_loss(pred, y, reduction='mean')
            """,
            after="""
                import torch.nn.functional as F
                loss = F.mse_loss(pred, y, reduction="sum")
            """,
        ),
    )
    non_examples = (
        """
            import torch.nn as nn
            criterion = nn.CrossEntropyLoss(reduction='none')
        """,
        """
            import torch.nn as nn
            criterion = nn.L1Loss(reduction='sum')
        """,
        """
            import torch.nn as nn
            layer = nn.Linear(3, 4)
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
        if loss_site_kind(node, ctx, LOSS_CLASSES) is None:
            return None
        assert isinstance(node, cst.Call)
        if find_arg(node, keyword="reduction") is None:
            applies = find_arg(node, keyword="size_average") is None
        else:
            applies = keyword_string(node, "reduction") in ("mean", "batchmean")
        return with_keyword(node, "reduction", cst.SimpleString('"sum"')) if applies else None
