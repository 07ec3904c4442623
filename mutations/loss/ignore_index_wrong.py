"""The ``ignore_index_wrong`` operator (IgnoreIndexWrong)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Param, Replacement, Swap
from mutator.semantics import (
    CLASS_INDEX_LOSSES,
    TRAINING_CONTEXTS,
    find_arg,
    loss_site_kind,
    number_literal,
    number_value,
    with_keyword,
)


class IgnoreIndexWrong(Swap):
    """Set ``ignore_index`` of cross-entropy/NLL to a real class (0 by default).

    Bug: ``ignore_index=0`` is copied from NLP code where 0 is the padding token, into a
    task where 0 is a genuine class (or the pad id is wrong). Impact: every example of
    that class is silently dropped from the loss; its logit is only ever pushed down, so
    the model practically never predicts it and accuracy loses about 1/C while the
    training loss looks healthy (even lower). Fix: set ``ignore_index`` to the real
    padding id (default -100) or leave it out. Check: per-class accuracy or a confusion
    matrix on validation (one class is never predicted).
    """

    name = "ignore_index_wrong"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = "ignore_index set to a real class: that class never contributes to the loss."
    expected = "degrades"
    node_types = (cst.Call,)
    parameters = {"index": Param(0, "class index wrongly ignored", valid="[0, inf)")}
    examples = (
        Example(
            before="""
                from torch import nn
                criterion = nn.CrossEntropyLoss()
            """,
            after="""
                from torch import nn
                criterion = nn.CrossEntropyLoss(ignore_index=0)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.cross_entropy(logits, y, ignore_index=-100)
            """,
            after="""
                import torch.nn.functional as F
                loss = F.cross_entropy(logits, y, ignore_index=0)
            """,
        ),
    )
    non_examples = (
        """
            from torch import nn
            criterion = nn.CrossEntropyLoss(ignore_index=0)
        """,
        """
            from torch import nn
            criterion = nn.MSELoss()
        """,
        """
            import torch
            import torch.nn.functional as F


            def evaluate(model, x, y):
                with torch.no_grad():
                    loss = F.cross_entropy(model(x), y, ignore_index=-100)
                return loss.item()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if loss_site_kind(node, ctx, CLASS_INDEX_LOSSES) is None:
            return None
        assert isinstance(node, cst.Call)
        current = find_arg(node, keyword="ignore_index")
        if current is not None and number_value(current.value) == self.params["index"]:
            return None
        assert isinstance(node, cst.Call)
        return with_keyword(node, "ignore_index", number_literal(int(self.params["index"])))
