"""The ``adam_l2_instead_of_adamw`` operator (AdamL2InsteadOfAdamW)."""

from __future__ import annotations

import libcst as cst

from mutations.optim._shared import optimizer_call
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    find_arg,
    number_value,
    renamed_callee,
    with_keyword,
)


class AdamL2InsteadOfAdamW(Operator):
    """Replace ``AdamW`` by ``Adam`` with the same ``weight_decay``.

    Bug: Adam's ``weight_decay`` is an L2 term added to the gradient, which Adam then
    divides by its per-parameter second-moment estimate, so weights with large gradients
    are barely decayed; AdamW decays every weight by ``lr * wd`` directly (decoupled).
    Impact: weaker, uneven regularisation: usually a somewhat worse generalisation gap,
    rarely visible in a short small run. AdamW's implicit default (0.01) is written out so
    the mutant changes only the coupling. Fix: use ``AdamW`` for decoupled decay (and
    exclude biases/norm weights from it). Check: compare the weight-norm trajectory and the
    train/val gap against the AdamW run.
    """

    name = "adam_l2_instead_of_adamw"
    category = "optim"
    summary = (
        "Use Adam(weight_decay=wd) where AdamW was meant: coupled L2 instead of decoupled decay."
    )
    expected = "silent"
    witness = "differs optimizer.class", "the optimizer is Adam, not AdamW"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch
                opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
            """,
            after="""
                import torch
                opt = torch.optim.Adam(model.parameters(), lr=3e-4, weight_decay=0.05)
            """,
        ),
        Example(
            before="""
                from torch.optim import AdamW
                opt = AdamW(params, lr=1e-3)
            """,
            after="""
                from torch.optim import Adam, AdamW
                opt = Adam(params, lr=1e-3, weight_decay=0.01)
            """,
        ),
        Example(
            before="""
                from torch.optim import Adam, AdamW
                opt = AdamW(params, weight_decay=wd)
            """,
            after="""
                from torch.optim import Adam, AdamW
                opt = Adam(params, weight_decay=wd)
            """,
        ),
    )
    non_examples = (
        """
            import torch
            opt = torch.optim.AdamW(params, weight_decay=0.0)
        """,
        """
            import torch
            opt = torch.optim.Adam(params, weight_decay=0.01)
        """,
        "opt = MyAdamW(params)\n",
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        found = optimizer_call(node, ctx)
        if found is None or found[1] != "AdamW":
            return None
        node = found[0]
        decay = find_arg(node, "weight_decay", 4)
        if decay is not None and number_value(decay.value) == 0:
            return NonSite("equivalent: weight_decay is 0, where Adam and AdamW agree")
        swapped = renamed_callee(node.func, ctx, "Adam", new_first=True)
        if swapped is None:
            return None
        callee, extra = swapped
        call = node.with_changes(func=callee)
        if decay is None:
            call = with_keyword(call, "weight_decay", cst.Float("0.01"))
        return {node: call, **extra}
