"""The ``naive_log_softmax`` operator (NaiveLogSoftmax)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    function_call,
    log_softmax_input,
    method_call,
    module_alias,
    renamed_callee,
)


class NaiveLogSoftmax(Operator):
    """Compute log-softmax as ``log(softmax(x))`` instead of the fused ``log_softmax``.

    Bug: the two-step formula loses the log-sum-exp trick: a probability that underflows
    to 0 in float32 (a logit gap above ~100, or far less in half precision) turns into
    ``log(0) = -inf`` and the loss into inf/NaN. Impact: on well-scaled small models the
    values stay finite and nothing shows; once logits grow (high learning rate, long
    training, confident predictions) the loss jumps to inf/NaN. Fix: use
    ``F.log_softmax`` (or ``CrossEntropyLoss`` on raw logits). Check: the NaN step of the
    loss log; a unit test feeding large logits (e.g. 1000) through the loss.
    """

    name = "naive_log_softmax"
    category = "numerics"
    summary = "F.log_softmax(x) rewritten as torch.log(F.softmax(x)): -inf/NaN when confident."
    expected = "silent"
    witness = "differential", "different numbers: log(softmax(x)) rounds differently"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch
                import torch.nn.functional as F
                log_probs = F.log_softmax(logits, dim=1)
            """,
            after="""
                import torch
                import torch.nn.functional as F
                log_probs = torch.log(F.softmax(logits, dim=1))
            """,
        ),
        Example(
            before="log_probs = logits.log_softmax(dim=-1)\n",
            after="log_probs = logits.softmax(dim=-1).log()\n",
        ),
        Example(
            before="""
                import torch
                from torch.nn.functional import log_softmax
                out = log_softmax(z, 1)
            """,
            after="""
                import torch
                from torch.nn.functional import log_softmax, softmax
                out = torch.log(softmax(z, 1))
            """,
        ),
    )
    non_examples = (
        """
            import torch
            probs = torch.softmax(logits, dim=1)
        """,
        """
            import torch
            from torch import nn
            layer = nn.LogSoftmax(dim=1)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        found = log_softmax_input(node, ctx)
        if found is None or found[0] == "module":
            return None
        form, _ = found
        assert isinstance(node, cst.Call)
        renamed = renamed_callee(node.func, ctx, "softmax")
        if renamed is None:
            return None
        func, edits = renamed
        probabilities = node.with_changes(func=func)
        torch = module_alias(ctx, "torch")
        if form == "method" or torch is None:
            edits[node] = method_call(probabilities, "log")
        else:
            edits[node] = function_call(f"{torch}.log", cst.Arg(probabilities))
        return edits
