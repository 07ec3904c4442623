"""The ``target_shape_broadcast`` operator (TargetShapeBroadcast)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    BINARY_LOSSES,
    REGRESSION_LOSSES,
    TRAINING_CONTEXTS,
    loss_call_kind,
    loss_calls,
    loss_input,
    loss_target,
    number_value,
)


def _shape_fix_receiver(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor under a call that turns (n,) into (n, 1) or back, else None:
    ``y.unsqueeze(1)``, ``y.view(-1, 1)``, ``out.squeeze(1)``, ``out.view(-1)``,
    ``y.view_as(out)``..."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return None
    method = expr.func.attr.value
    values = [number_value(arg.value) for arg in expr.args]
    if method == "unsqueeze":
        shape_fix = values in ([1.0], [-1.0])
    elif method == "squeeze":
        shape_fix = values in ([], [1.0], [-1.0])
    elif method in ("view", "reshape"):
        shape_fix = values in ([-1.0], [-1.0, 1.0])
    elif method in ("flatten", "ravel"):
        shape_fix = not values
    else:
        shape_fix = method in ("view_as", "reshape_as")
    return expr.func.value if shape_fix else None


class TargetShapeBroadcast(Operator):
    """Drop the reshape that matches predictions (n, 1) to targets (n,) in a regression loss.

    Bug: the ``.unsqueeze(1)`` / ``.view(-1, 1)`` on the targets or the ``.squeeze(1)`` on
    the predictions is removed, so the loss sees (n, 1) against (n,). Impact: MSE/L1
    broadcast to an (n, n) matrix and average every prediction against every target;
    PyTorch only warns, the loss still falls, and the model learns to predict the
    target mean (R^2 near 0). BCE losses refuse the mismatch and crash instead. Fix:
    make prediction and target shapes identical before the loss (assert it). Not told
    apart: a reshape of a tensor that is already 1-D (PyG link prediction's ``decode()``
    sums over the last dimension, so the removed ``view(-1)`` changed nothing; 1 of 4
    corpus mutants, issue 22). Check:
    overfit one batch (the loss stalls at the target variance) and turn the broadcast
    UserWarning into an error.
    """

    name = "target_shape_broadcast"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = "Shape fix removed before a regression loss: (n,1) vs (n,) broadcasts to (n,n)."
    expected = "breaks_training"
    witness = "differs loss_call", "the loss gets (n, 1) predictions and (n,) targets"
    crashes = ("size",)
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                from torch import nn
                criterion = nn.MSELoss()
                loss = criterion(model(x), y.unsqueeze(1))
            """,
            after="""
                from torch import nn
                criterion = nn.MSELoss()
                loss = criterion(model(x), y)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                def step(model, x, y):
                    pred = model(x).squeeze(-1)
                    return F.l1_loss(pred, y)
            """,
            after="""
                import torch.nn.functional as F
                def step(model, x, y):
                    pred = model(x)
                    return F.l1_loss(pred, y)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                def step(model, x, y):
                    y = y.view(-1, 1)
                    return F.mse_loss(model(x), y)
            """,
            after="""
                import torch.nn.functional as F
                def step(model, x, y):
                    return F.mse_loss(model(x), y)
            """,
        ),
    )
    non_examples = (
        """
            from torch import nn
            criterion = nn.CrossEntropyLoss()
            loss = criterion(logits.view(-1, logits.size(-1)), y.view(-1))
        """,
        """
            from torch import nn
            criterion = nn.MSELoss()
            loss = criterion(pred, y)
        """,
        """
            import torch.nn.functional as F
            loss = F.mse_loss(seq.view(-1, 8), y.view(-1, 8))
        """,
        """
            import torch
            import torch.nn.functional as F


            def evaluate(model, x, y):
                with torch.no_grad():
                    loss = F.mse_loss(model(x).squeeze(-1), y)
                return loss.item()
        """,
    )

    _kinds = REGRESSION_LOSSES | BINARY_LOSSES

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        receiver = _shape_fix_receiver(node)  # type: ignore[arg-type]
        if receiver is None:
            return None
        parent = ctx.parent(node)
        if isinstance(parent, cst.Arg):
            consumer = ctx.parent(parent)
            if (
                isinstance(consumer, cst.Call)
                and parent in (loss_input(consumer), loss_target(consumer))
                and loss_call_kind(consumer, ctx) in self._kinds
            ):
                return {node: receiver}
            return None
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
            return None
        target = parent.targets[0].target
        if not (isinstance(target, cst.Name) and self._feeds_loss(target.value, parent, ctx)):
            return None
        if isinstance(receiver, cst.Name) and receiver.value == target.value:
            line = ctx.parent(parent)
            if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
                return {line: cst.RemoveFromParent()}
            return None
        return {node: receiver}

    def _feeds_loss(self, name: str, assignment: cst.CSTNode, ctx: Context) -> bool:
        function = ctx.enclosing_function(assignment)
        for call, kind in loss_calls(ctx):
            if kind not in self._kinds or ctx.enclosing_function(call) is not function:
                continue
            for arg in (loss_input(call), loss_target(call)):
                if arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == name:
                    return True
        return False
