"""The ``swap_loss_arguments`` operator (SwapLossArguments)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    REGRESSION_LOSSES,
    TRAINING_CONTEXTS,
    loss_call_kind,
)


class SwapLossArguments(Swap):
    """Pass the target first and the prediction second: ``criterion(y, logits)``.

    Bug: loss functions are ``loss(input, target)``; swapping them is an easy slip.
    Impact: for cross-entropy/NLL the integer targets become the "logits", which crashes
    (dtype or shape error); for BCE the gradient now flows through the target slot and
    training optimises nonsense; symmetric losses (MSE, L1, Huber) are left alone because
    there the swap changes nothing. Fix: ``criterion(prediction, target)``. Check: a crash
    at the first step, or the init-loss check and overfit-one-batch for BCE.
    """

    name = "swap_loss_arguments"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = "Loss called as loss(target, prediction)."
    expected = "crash"
    witness = "differs loss_call", "the training loss gets targets and predictions swapped"
    crashes = ("not implemented for", "dtype", "scalar type", "size", "shape", "target")
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
                loss = criterion(y, logits)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.binary_cross_entropy_with_logits(logits, y.float(), reduction='sum')
            """,
            after="""
                import torch.nn.functional as F
                loss = F.binary_cross_entropy_with_logits(y.float(), logits, reduction='sum')
            """,
        ),
        # A criterion moved to the device is still the loss it builds (issue 29).
        Example(
            before="""
                from torch import nn
                criterion = nn.CrossEntropyLoss().to(device)
                loss = criterion(logits, y)
            """,
            after="""
                from torch import nn
                criterion = nn.CrossEntropyLoss().to(device)
                loss = criterion(y, logits)
            """,
        ),
    )
    non_examples = (
        """
            from torch import nn
            criterion = nn.MSELoss()
            loss = criterion(pred, y)
        """,
        """
            import torch.nn.functional as F
            loss = F.cross_entropy(logits, target=y)
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
        kind = loss_call_kind(node, ctx)
        if kind is None or kind in REGRESSION_LOSSES:
            return None
        assert isinstance(node, cst.Call)
        positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
        if len(positional) < 2 or ctx.code(positional[0].value) == ctx.code(positional[1].value):
            return None
        first, second = positional[:2]
        swapped = {id(first): second.value, id(second): first.value}
        return node.with_changes(
            args=[
                arg.with_changes(value=swapped[id(arg)]) if id(arg) in swapped else arg
                for arg in node.args
            ]
        )
