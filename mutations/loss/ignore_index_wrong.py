"""The ``ignore_index_wrong`` operator (IgnoreIndexWrong)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Param, Replacement, Swap
from mutator.semantics import (
    CLASS_INDEX_LOSSES,
    TRAINING_CONTEXTS,
    bound_names,
    callee_name,
    criterion_calls,
    find_arg,
    functional_loss_kind,
    loss_site_kind,
    loss_target,
    number_literal,
    number_value,
    with_keyword,
)

_PACKERS = frozenset({"pack_padded_sequence", "pack_sequence"})


def _packed(target: cst.BaseExpression, ctx: Context) -> bool:
    """Is a loss target the data of a packed sequence (``pack_padded_sequence(...)[0]``,
    ``.data``, or a name bound to one, also by ``targets, _ = ...``)? Packing drops the
    padding, so the padding id never occurs in it."""
    values = [target]
    if isinstance(target, cst.Name):
        values += [
            assign.value  # type: ignore[attr-defined]
            for assign in ctx.nodes(cst.Assign)
            if any(target.value in bound_names(t.target) for t in assign.targets)  # type: ignore[attr-defined]
        ]
    for value in values:
        while isinstance(value, (cst.Subscript, cst.Attribute)):
            value = value.value
        if isinstance(value, cst.Call) and callee_name(value) in _PACKERS:
            return True
    return False


def _targets_packed(node: cst.Call, ctx: Context) -> bool:
    """Does every loss this call computes (the call itself, or the criterion it builds)
    take packed targets?"""
    calls = [node] if functional_loss_kind(node, ctx) else criterion_calls(node, ctx)
    assign = ctx.enclosing(node, cst.Assign)
    if not calls and assign is not None:  # handed to ``train(..., criterion, ...)`` by name
        names = {n for t in assign.targets for n in bound_names(t.target)}  # type: ignore[attr-defined]
        calls = [
            c
            for c in ctx.nodes(cst.Call)
            if isinstance(c.func, cst.Name) and c.func.value in names  # type: ignore[attr-defined]
        ]
    targets = [loss_target(call) for call in calls]
    return bool(targets) and all(t is not None and _packed(t.value, ctx) for t in targets)


class IgnoreIndexWrong(Swap):
    """Set ``ignore_index`` of cross-entropy/NLL to a real class (0 by default).

    Bug: ``ignore_index=0`` is copied from NLP code where 0 is the padding token, into a
    task where 0 is a genuine class (or the pad id is wrong). Impact: every example of
    that class is silently dropped from the loss; its logit is only ever pushed down, so
    the model practically never predicts it and accuracy loses about 1/C while the
    training loss looks healthy (even lower). Fix: set ``ignore_index`` to the real
    padding id (default -100) or leave it out. Targets packed with ``pack_padded_sequence``
    are no site for index 0: 0 is the padding id of sequence vocabularies, and packing
    removes the padding (issue 22: two image-captioning scripts). Check: per-class accuracy or a confusion
    matrix on validation (one class is never predicted).
    """

    name = "ignore_index_wrong"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = "ignore_index set to a real class: that class never contributes to the loss."
    expected = "degrades"
    witness = "differs loss_call", "the training loss ignores a real class"
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
        # Packed caption targets: the padding id 0 is gone (issue 22).
        """
            from torch import nn
            from torch.nn.utils.rnn import pack_padded_sequence
            criterion = nn.CrossEntropyLoss()
            for images, captions, lengths in loader:
                targets = pack_padded_sequence(captions, lengths, batch_first=True)[0]
                loss = criterion(decoder(encoder(images), captions, lengths), targets)
                loss.backward()
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

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        if loss_site_kind(node, ctx, CLASS_INDEX_LOSSES) is None:
            return None
        assert isinstance(node, cst.Call)
        current = find_arg(node, keyword="ignore_index")
        if current is not None and number_value(current.value) == self.params["index"]:
            return None
        if self.params["index"] == 0 and _targets_packed(node, ctx):
            return NonSite("equivalent: the targets are packed, so padding id 0 never occurs")
        return with_keyword(node, "ignore_index", number_literal(int(self.params["index"])))
