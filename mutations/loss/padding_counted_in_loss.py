"""The ``padding_counted_in_loss`` operator (PaddingCountedInLoss)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    CLASS_INDEX_LOSSES,
    code_of,
    find_arg,
    identifier_words,
    loss_site_kind,
    without_arg,
)

# Arguments that name the padding id elsewhere in a script.
_PADDING_ARGS = frozenset({"padding_value", "padding_idx", "pad_token_id", "pad_id"})


def _padding_values(ctx: Context) -> set[str]:
    """The code of every value passed as ``padding_value=``/``padding_idx=`` (...)."""
    return {
        code_of(arg.value)
        for arg in ctx.nodes(cst.Arg)
        if arg.keyword is not None and arg.keyword.value in _PADDING_ARGS  # type: ignore[attr-defined]
    }


def is_padding_id(expr: cst.BaseExpression, ctx: Context) -> bool:
    """``PAD_IDX``, ``tokenizer.pad_token_id``, or the value the script pads sequences with."""
    text = code_of(expr)
    if any(word.startswith("pad") for word in identifier_words(text)):
        return True  # PAD_IDX, pad_id, tokenizer.pad_token_id, padding_index
    return text in _padding_values(ctx)


class PaddingCountedInLoss(Swap):
    """Remove ``ignore_index=<padding id>`` from a sequence loss.

    Bug: batches of variable-length sequences are padded, but the loss does not skip the
    padded targets (``ignore_index`` dropped, or never set when padding was added). Impact:
    every padded position is a target: the model learns to predict the pad token after the
    end of each sequence, the loss is averaged over real and padded tokens alike, so it
    looks lower than it is and its gradient is diluted by easy pad-after-pad predictions;
    perplexity and token accuracy are no longer comparable. Fix: ``ignore_index=pad_id``
    (or mask the per-token loss and divide by the count of real tokens). Check: compare the
    loss with and without the padded positions of one batch; count the pad targets.
    """

    name = "padding_counted_in_loss"
    category = "loss"
    summary = "ignore_index=<pad id> removed: padded positions count in the sequence loss."
    expected = "degrades"
    witness = "differs loss_call", "the sequence loss counts padded positions"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                from torch import nn
                criterion = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
            """,
            after="""
                from torch import nn
                criterion = nn.CrossEntropyLoss()
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=tokenizer.pad_token_id)
            """,
            after="""
                import torch.nn.functional as F
                loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
            """,
        ),
        Example(
            before="""
                from torch import nn
                from torch.nn.utils.rnn import pad_sequence
                batch = pad_sequence(targets, batch_first=True, padding_value=-100)
                criterion = nn.NLLLoss(ignore_index=-100)
            """,
            after="""
                from torch import nn
                from torch.nn.utils.rnn import pad_sequence
                batch = pad_sequence(targets, batch_first=True, padding_value=-100)
                criterion = nn.NLLLoss()
            """,
        ),
    )
    non_examples = (
        # nanoGPT's ignore_index=-1: nothing in the script pads with -1.
        """
            import torch.nn.functional as F
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        """,
        # An ignored class that is no padding (a "void" label in segmentation).
        """
            from torch import nn
            criterion = nn.CrossEntropyLoss(ignore_index=255)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if loss_site_kind(node, ctx, CLASS_INDEX_LOSSES) is None:
            return None
        assert isinstance(node, cst.Call)
        ignored = find_arg(node, keyword="ignore_index")
        if ignored is None or not is_padding_id(ignored.value, ctx):
            return None
        return without_arg(node, ignored)
