"""The ``softmax_overwrites_logits`` operator (SoftmaxOverwritesLogits)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    bound_names,
    callee_name,
    loss_call_kind,
    loss_input,
    method_name,
    move_before,
    single_assignment,
)


def _softmax_of_itself(statement: cst.CSTNode) -> str | None:
    """``y_hat = torch.softmax(y_hat, dim=1)`` / ``y = F.softmax(y, 1)`` / ``y =
    y.softmax(1)``: the name a statement overwrites with its own softmax, else None."""
    assign = single_assignment(statement)
    if assign is None or len(assign.targets) != 1:
        return None
    target, value = assign.targets[0].target, assign.value
    if not isinstance(target, cst.Name) or not isinstance(value, cst.Call):
        return None
    if method_name(value) == "softmax" and isinstance(value.func, cst.Attribute):
        source = value.func.value
        if isinstance(source, cst.Name) and source.value == target.value:
            return target.value
    if callee_name(value) == "softmax" and value.args:
        first = value.args[0].value
        if value.args[0].keyword is None and isinstance(first, cst.Name):
            return target.value if first.value == target.value else None
    return None


def _cross_entropy_of(statement: cst.CSTNode, name: str, ctx: Context) -> bool:
    """Does ``statement`` compute a cross-entropy whose input is ``name`` itself?"""
    for call in ctx.nodes_within(statement, cst.Call):
        if loss_call_kind(call, ctx) != "CrossEntropyLoss":
            continue
        arg = loss_input(call)  # type: ignore[arg-type]
        if arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == name:
            return True
    return False


class SoftmaxOverwritesLogits(Operator):
    """Move ``y_hat = softmax(y_hat)`` above the cross-entropy that reads ``y_hat``.

    Bug: the step turns its logits into probabilities for the metrics and does it one line
    too early, overwriting the logits the cross-entropy then reads (a double softmax).
    Real fix: ariecattan/SciCo@fcd3cee (four validation and test steps computed
    ``torch.softmax`` before ``self.criterion``); the same ordering slip recurs wherever a
    step reports probabilities next to its loss. Impact: ``CrossEntropyLoss`` applies
    log-softmax again to values in [0, 1]: the loss cannot fall below about
    ln(1 + (C-1)/e) and its gradients shrink as the model grows confident; in a validation
    step every reported validation loss is wrong (checkpoint selection and early stopping
    follow it) while accuracy is unchanged, in a training step learning slows or stalls.
    Only a softmax the step already computes after the loss is moved, so the metrics keep
    their probabilities. Fix: compute the loss on the logits first, then the softmax.
    Check: the reported loss of a confident model stays far above zero; assert the
    criterion's input is not normalised (rows do not sum to 1).
    """

    name = "softmax_overwrites_logits"
    category = "loss"
    summary = "y_hat = softmax(y_hat) moved above the cross-entropy that reads y_hat."
    expected = "degrades"
    witness = "more ce_on_probabilities", "cross-entropy gets probabilities (a softmax before it)"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                import torch
                import torch.nn as nn
                criterion = nn.CrossEntropyLoss()
                def validation_step(batch):
                    x, y = batch
                    y_hat = model(x)
                    loss = criterion(y_hat, y)
                    y_hat = torch.softmax(y_hat, dim=1)
                    metrics(y_hat, y)
                    return loss
            """,
            after="""
                import torch
                import torch.nn as nn
                criterion = nn.CrossEntropyLoss()
                def validation_step(batch):
                    x, y = batch
                    y_hat = model(x)
                    y_hat = torch.softmax(y_hat, dim=1)
                    loss = criterion(y_hat, y)
                    metrics(y_hat, y)
                    return loss
            """,
        ),
    )
    non_examples = (
        # Probabilities under another name: the loss keeps its logits.
        """
            import torch
            import torch.nn.functional as F
            loss = F.cross_entropy(logits, y)
            probs = torch.softmax(logits, dim=1)
        """,
        # Already before the loss (the bug itself).
        """
            import torch
            import torch.nn.functional as F
            logits = torch.softmax(logits, dim=1)
            loss = F.cross_entropy(logits, y)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        name = _softmax_of_itself(node)
        if name is None:
            return None
        for earlier in reversed(ctx.preceding_statements(node)):
            if _cross_entropy_of(earlier, name, ctx):
                return move_before(node, earlier)
            bound = {
                n
                for t in ctx.nodes_within(earlier, cst.AssignTarget)
                for n in bound_names(t.target)
            }  # type: ignore[attr-defined]
            if name in bound:
                return None  # the loss reads an older value of the name
        return None
