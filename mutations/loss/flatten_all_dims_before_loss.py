"""The ``flatten_all_dims_before_loss`` operator (FlattenAllDimsBeforeLoss)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    TRAINING_CONTEXTS,
    loss_call_kind,
    loss_input,
    method_name,
    number_literal,
    number_value,
)


class FlattenAllDimsBeforeLoss(Swap):
    """Flatten the logits into one dimension before cross-entropy: ``logits.flatten(0, 1)``
    -> ``logits.flatten(0, -1)``.

    Bug: a sequence model's logits ``(batch, tokens, vocab)`` must become ``(batch *
    tokens, vocab)`` for ``cross_entropy``; flattening every dimension instead leaves one
    long vector. Real fix: rasbt/LLMs-from-scratch@adc2964 (``logits.flatten(0, -1)`` in a
    chapter's copy of ``calc_loss_batch``). Impact: cross-entropy reads the vector as one
    unbatched sample over ``batch * tokens * vocab`` classes and the target's shape no
    longer matches: the first loss raises (a shape error), so nothing trains. Fix: flatten
    the batch and token dimensions only (``flatten(0, 1)`` or ``view(-1, vocab)``). Check:
    assert ``logits.dim() == 2`` and ``logits.size(0) == targets.numel()`` at the loss.
    """

    name = "flatten_all_dims_before_loss"
    category = "loss"
    summary = "Logits flattened to 1-D (flatten(0, -1)) before cross-entropy."
    expected = "crash"
    witness = "differs loss_call", "the loss gets flattened predictions"
    crashes = ("shape", "size", "dimension", "Expected")
    node_types = (cst.Call,)
    contexts = TRAINING_CONTEXTS
    examples = (
        Example(
            before="""
                import torch
                def calc_loss_batch(input_batch, target_batch, model):
                    logits = model(input_batch)
                    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())
            """,
            after="""
                import torch
                def calc_loss_batch(input_batch, target_batch, model):
                    logits = model(input_batch)
                    return torch.nn.functional.cross_entropy(logits.flatten(0, -1), target_batch.flatten())
            """,
        ),
    )
    non_examples = (
        # The target's flatten: the target is meant to be 1-D.
        """
            import torch.nn.functional as F
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.flatten(0, 1))
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        if method_name(node) != "flatten" or len(node.args) != 2:
            return None
        start, end = (number_value(arg.value) for arg in node.args)
        if start != 0 or end != 1:
            return None
        argument = ctx.parent(node)
        loss = ctx.parent(argument) if isinstance(argument, cst.Arg) else None
        if not isinstance(loss, cst.Call) or loss_call_kind(loss, ctx) != "CrossEntropyLoss":
            return None
        if loss_input(loss) is not argument:
            return None
        last = node.args[1]
        return node.with_changes(args=[node.args[0], last.with_changes(value=number_literal(-1))])
