"""The ``sgd_instead_of_adam`` operator (SgdInsteadOfAdam)."""

from __future__ import annotations

import libcst as cst

from mutations.optim._shared import DEFAULT_LR, optimizer_call
from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    closed_args,
    find_arg,
    number_literal,
    positional_args,
    renamed_callee,
    with_keyword,
)

_ADAM_ONLY_KEYWORDS = frozenset({"betas", "eps", "amsgrad", "capturable", "decoupled_weight_decay"})


class SgdInsteadOfAdam(Operator):
    """Replace ``Adam``/``AdamW`` by plain ``SGD`` with the same learning rate.

    Bug: the optimizer is swapped (a copy-paste from another script, a config default)
    while the learning rate stays tuned for Adam. Impact: plain SGD at an Adam-sized LR
    (~1e-3) takes tiny steps without per-parameter scaling or momentum: the loss falls
    far more slowly and the run ends badly underfit. Adam-only arguments (``betas``,
    ``eps``, ``amsgrad``) are dropped so the mutant runs; Adam's default LR is written
    out. Fix: keep the optimizer the LR was tuned for, or retune (SGD typically needs
    ~0.1 with momentum 0.9). Check: overfit one batch (slow), log the update/weight ratio
    (orders of magnitude below 1e-3).
    """

    name = "sgd_instead_of_adam"
    category = "optim"
    summary = "Use plain SGD with Adam's learning rate: updates become far too small."
    expected = "degrades"
    witness = "differs optimizer.class", "the optimizer is SGD, not Adam"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch.optim as optim
                opt = optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
            """,
            after="""
                import torch.optim as optim
                opt = optim.SGD(model.parameters(), lr=1e-3)
            """,
        ),
        Example(
            before="""
                from torch.optim import AdamW
                opt = AdamW(params, weight_decay=0.1)
            """,
            after="""
                from torch.optim import SGD, AdamW
                opt = SGD(params, weight_decay=0.1, lr=0.001)
            """,
        ),
    )
    non_examples = (
        """
            import torch
            opt = torch.optim.SGD(params, lr=0.1)
        """,
        """
            import torch
            opt = torch.optim.Adam(params, **kw)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        found = optimizer_call(node, ctx)
        if found is None or found[1] not in ("Adam", "AdamW"):
            return None
        node, optimizer = found
        swapped = renamed_callee(node.func, ctx, "SGD", new_first=True)
        if swapped is None:
            return None
        callee, extra = swapped
        positional = positional_args(node)[:2]  # params, lr
        keywords = [
            arg
            for arg in node.args
            if arg.keyword is not None and arg.keyword.value not in _ADAM_ONLY_KEYWORDS
        ]
        args = closed_args([*positional, *keywords])
        call = node.with_changes(func=callee, args=args)
        if find_arg(call, "lr", 1) is None:
            call = with_keyword(call, "lr", number_literal(DEFAULT_LR[optimizer]))
        return {node: call, **extra}
