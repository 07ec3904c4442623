"""The ``adam_eps_too_small`` operator (AdamEpsTooSmall)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Param, Replacement, Swap
from mutator.semantics import (
    find_arg,
    number_literal,
    number_value,
    optimizer_class,
    with_keyword,
)

_ADAM_FAMILY = ("Adam", "AdamW", "Adamax", "NAdam", "RAdam")


class AdamEpsTooSmall(Swap):
    """Set Adam's ``eps`` to 1e-16, far below the 1e-8 default.

    Bug: ``eps`` guards the division by the root of the second-moment estimate; a tiny
    value removes that guard (often "tuned" to squeeze out accuracy, or a misread
    ``1e-6`` vs ``1e-16``). Impact: for parameters whose gradients are tiny or rare the
    update becomes ``m / sqrt(v)``, a full-size step in the sign of noise, which can blow
    up rarely-updated weights; on small dense models with healthy gradients
    ``sqrt(v)`` dwarfs both values and training is indistinguishable from the reference,
    so expect it to be silent here. Fix: keep ``eps`` at 1e-8 (or larger, 1e-6 for
    mixed precision). Check: update/weight ratio per parameter in the grad-norm log
    (spikes for rarely-updated weights).
    """

    name = "adam_eps_too_small"
    category = "numerics"
    summary = "Adam/AdamW eps set to 1e-16: no guard against tiny second moments."
    expected = "silent"
    witness = "factor optimizer.eps", "the optimizer's eps at its first step differs"
    node_types = (cst.Call,)
    parameters = {"eps": Param(1e-16, "epsilon of the Adam denominator", valid="[0, 1)")}
    examples = (
        Example(
            before="""
                import torch
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            """,
            after="""
                import torch
                opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-16)
            """,
        ),
        Example(
            before="""
                from torch import optim
                self.optimizer = optim.AdamW(self.model.parameters(), eps=1e-8)
            """,
            after="""
                from torch import optim
                self.optimizer = optim.AdamW(self.model.parameters(), eps=1e-16)
            """,
        ),
    )
    non_examples = (
        """
            import torch
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        """,
        """
            import torch
            opt = torch.optim.Adam(model.parameters(), eps=1e-20)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if optimizer_class(node, ctx) not in _ADAM_FAMILY:
            return None
        assert isinstance(node, cst.Call)
        current = find_arg(node, keyword="eps")
        value = None if current is None else number_value(current.value)
        if current is not None and value is not None and value <= self.params["eps"]:
            return None
        return with_keyword(node, "eps", number_literal(float(self.params["eps"])))
