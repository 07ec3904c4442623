"""The ``softmax_wrong_dim`` operator (SoftmaxWrongDim)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    enclosing_function,
    find_arg,
    identifier_words,
    in_no_grad,
    method_name,
    number_literal,
    number_value,
    resolve,
    split_role,
    with_arg_value,
)

SOFTMAX_FUNCTIONS = frozenset(
    {
        "torch.softmax",
        "torch.log_softmax",
        "torch.nn.functional.softmax",
        "torch.nn.functional.log_softmax",
        "torch.special.softmax",
        "torch.special.log_softmax",
    }
)
SOFTMAX_MODULES = frozenset({"torch.nn.Softmax", "torch.nn.LogSoftmax"})
# Function names of prediction/sampling code (evaluation names come from split_role).
_OUTPUT_WORDS = frozenset({"predict", "prediction", "generate", "sample", "infer", "inference"})


def _dim_arg(call: cst.Call, ctx: Context) -> cst.Arg | None:
    """The ``dim`` argument of a softmax/log_softmax call or module, else None."""
    if resolve(call.func, ctx, strict=False).matches(SOFTMAX_FUNCTIONS):
        return find_arg(call, "dim", 1)
    if resolve(call.func, ctx, strict=False).matches(SOFTMAX_MODULES):
        return find_arg(call, "dim", 0)
    if method_name(call) in ("softmax", "log_softmax") and isinstance(call.func, cst.Attribute):
        return find_arg(call, "dim", 0)  # logits.softmax(-1)
    return None


def _in_evaluation_function(node: cst.CSTNode, ctx: Context) -> bool:
    """Inside ``evaluate()``/``test()``/``predict()``/``generate()``: output for a metric or
    a sample, not the training loss (methods such as ``forward`` are not)."""
    function = enclosing_function(node, ctx)
    if function is None:
        return False
    name = function.name.value
    return split_role(name) == "eval" or bool(identifier_words(name) & _OUTPUT_WORDS)


class SoftmaxWrongDim(Swap):
    """Normalise a softmax/log_softmax over the batch dimension (``dim=0``).

    Bug: the softmax runs over the wrong axis (``dim=0`` where the classes or keys were on
    ``dim=1``/``-1``), a slip that no shape check catches because the output has the same
    shape. Impact: each class's scores are normalised across the samples of the batch:
    the "probabilities" of one sample no longer sum to 1 and depend on the other samples.
    An NLL loss on them still rewards the true class against the same class in the other
    samples, so a classifier learns, but slower and miscalibrated (functional_digits, 2
    epochs: train loss 1.82 against 0.30, accuracy 0.908 against 0.917); where the same
    softmax makes the predictions, they depend on the batch. In attention a causal mask
    (the same -inf in every sample) turns into NaN at once (nanogpt_trainer). Fix: softmax over the
    class/key axis (``dim=-1`` or ``dim=1`` for ``(N, C)``). Check: ``probs.sum(dim=-1)``
    is all ones; changing one sample of the batch leaves the others' outputs unchanged.
    """

    name = "softmax_wrong_dim"
    category = "numerics"
    summary = "softmax/log_softmax over dim=0 (the batch) instead of the class axis."
    expected = "degrades"
    witness = "differential", "different numbers: softmax normalises over the batch"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch.nn.functional as F
                output = F.log_softmax(x, dim=1)
            """,
            after="""
                import torch.nn.functional as F
                output = F.log_softmax(x, dim=0)
            """,
        ),
        Example(
            before="""
                import torch
                att = torch.softmax(att, -1)
            """,
            after="""
                import torch
                att = torch.softmax(att, 0)
            """,
        ),
        Example(
            before="""
                from torch import nn
                self.out = nn.Sequential(nn.Linear(64, 10), nn.LogSoftmax(dim=1))
            """,
            after="""
                from torch import nn
                self.out = nn.Sequential(nn.Linear(64, 10), nn.LogSoftmax(dim=0))
            """,
        ),
        Example(
            before="probs = logits.softmax(dim=-1)\n",
            after="probs = logits.softmax(dim=0)\n",
        ),
    )
    non_examples = (
        # Already over dim 0 (a 1-D vector of scores): could be right, leave it.
        """
            import torch.nn.functional as F
            weights = F.softmax(scores, dim=0)
        """,
        # Evaluation only: the probabilities of a prediction under no_grad.
        """
            import torch
            import torch.nn.functional as F
            with torch.no_grad():
                probs = F.softmax(model(x), dim=1)
        """,
        # A prediction helper without no_grad: its probabilities feed no loss.
        """
            import torch.nn.functional as F
            def predict(model, x):
                return F.softmax(model(x), dim=1).argmax(1)
        """,
        # No dim written: nothing to move.
        """
            import torch.nn.functional as F
            p = F.softmax(x)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        assert isinstance(node, cst.Call)
        dim = _dim_arg(node, ctx)
        if dim is None or dim.star:
            return None
        value = number_value(dim.value)
        if value is None or value == 0:
            return None
        if in_no_grad(node, ctx) or _in_evaluation_function(node, ctx):
            return NonSite("evaluation, prediction or sampling code: training never sees it")
        return with_arg_value(node, dim, number_literal(0, integer=True))
