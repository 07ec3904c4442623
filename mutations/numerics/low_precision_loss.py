"""The ``low_precision_loss`` operator (LowPrecisionLoss)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Param, Replacement, Swap
from mutator.semantics import (
    CLASS_INDEX_LOSSES,
    TRAINING_CONTEXTS,
    loss_call_kind,
    loss_input,
    loss_target,
    method_call,
    method_name,
    with_arg_value,
)

_CASTS = {"bfloat16": "bfloat16", "float16": "half"}


class LowPrecisionLoss(Swap):
    """Compute the loss in half precision: ``criterion(logits.bfloat16(), y)``.

    Bug: the loss inputs are cast to bfloat16/float16 (left over from a half-precision
    experiment, or ``.half()`` applied too late) instead of computing the loss in float32
    as autocast does. Impact: the loss and its gradient are quantised (bfloat16 keeps 8
    mantissa bits, about 0.4% steps) and float16 overflows beyond 65504 (large logits,
    summed losses). On small well-scaled CPU loops the difference is within seed noise,
    so expect it to be silent there; it bites with large vocabularies, long sequences or
    ``reduction="sum"``. Fix: compute losses in float32 (autocast keeps them there); cast
    logits with ``.float()`` first. Check: log the loss dtype; compare train/val curves
    with the reference; overflow shows as inf in the loss log.
    """

    name = "low_precision_loss"
    contexts = TRAINING_CONTEXTS
    category = "numerics"
    summary = "Loss computed on bfloat16/float16 casts of its inputs."
    expected = "silent"
    witness = "differs loss_call", "the training loss gets half-precision inputs"
    node_types = (cst.Call,)
    parameters = {
        "dtype": Param("bfloat16", "precision of the loss inputs", ("bfloat16", "float16")),
    }
    variants = ({"dtype": "float16"},)
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
                loss = criterion(logits.bfloat16(), y)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.mse_loss(model(x), y)
            """,
            after="""
                import torch.nn.functional as F
                loss = F.mse_loss(model(x).half(), y.half())
            """,
            params={"dtype": "float16"},
        ),
    )
    non_examples = (
        """
            from torch import nn
            criterion = nn.CrossEntropyLoss()
            loss = criterion(logits.half(), y)
        """,
        "loss = criterion(logits, y)\n",
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
        if loss_call_kind(node, ctx) is None:
            return None
        input_arg = loss_input(node)  # type: ignore[arg-type]
        if input_arg is None or _method_name_of(input_arg.value) in ("half", "bfloat16", "to"):
            return None
        assert isinstance(node, cst.Call)
        cast = _CASTS[self.params["dtype"]]
        target_arg = loss_target(node)
        rewritten = with_arg_value(node, input_arg, method_call(input_arg.value, cast))
        # Class indices stay integers; float targets go down to the same precision.
        if target_arg is not None and loss_call_kind(node, ctx) not in CLASS_INDEX_LOSSES:
            target = next(arg for arg in rewritten.args if arg.value is target_arg.value)
            rewritten = with_arg_value(rewritten, target, method_call(target_arg.value, cast))
        return rewritten


def _method_name_of(expr: cst.BaseExpression) -> str | None:
    return method_name(expr) if isinstance(expr, cst.Call) else None
