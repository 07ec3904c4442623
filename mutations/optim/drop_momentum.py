"""The ``drop_momentum`` operator (DropMomentum)."""

from __future__ import annotations

import libcst as cst

from mutations.optim._shared import optimizer_call
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    find_arg,
    number_value,
    positional_args,
    with_arg_value,
    without_arg,
)


class DropMomentum(Swap):
    """Remove ``momentum=`` (and ``nesterov=``, which needs it) from ``SGD``.

    Bug: SGD runs without momentum at a learning rate tuned with it. Impact: the effective
    step is ~1/(1 - momentum) = 10x smaller for momentum 0.9 and noise is no longer
    averaged out: the loss falls markedly more slowly and zig-zags in ill-conditioned
    directions, ending underfit for the same budget. Fix: ``SGD(params, lr,
    momentum=0.9)`` (optionally ``nesterov=True``), or scale the LR up when dropping
    momentum on purpose. Check: compare the loss curve with the tuned run; print
    ``optimizer.defaults`` / ``param_groups`` when debugging an optimizer config.
    """

    name = "drop_momentum"
    category = "optim"
    summary = "Remove momentum from SGD: much slower, noisier convergence."
    expected = "degrades"
    witness = "differs optimizer.momentum", "the optimizer's momentum at its first step differs"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch
                opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
            """,
            after="""
                import torch
                opt = torch.optim.SGD(model.parameters(), lr=0.05)
            """,
        ),
        Example(
            before="""
                from torch import optim
                opt = optim.SGD(ps, lr=0.1, momentum=MOMENTUM, nesterov=True, weight_decay=5e-4)
            """,
            after="""
                from torch import optim
                opt = optim.SGD(ps, lr=0.1, weight_decay=5e-4)
            """,
        ),
        Example(
            before="""
                from torch.optim import SGD
                opt = SGD(ps, 0.1, 0.9)
            """,
            after="""
                from torch.optim import SGD
                opt = SGD(ps, 0.1)
            """,
        ),
    )
    non_examples = (
        """
            import torch
            opt = torch.optim.SGD(ps, lr=0.1)
        """,
        """
            import torch
            opt = torch.optim.SGD(ps, lr=0.1, momentum=0)
        """,
        """
            import torch
            opt = torch.optim.RMSprop(ps, lr=0.01, momentum=0.9)
        """,
    )

    def _momentum(self, node: cst.CSTNode, ctx: Context) -> cst.Arg | None:
        found = optimizer_call(node, ctx)
        if found is None or found[1] != "SGD":
            return None
        node = found[0]
        momentum = find_arg(node, "momentum", 2)
        if momentum is None or number_value(momentum.value) == 0:
            return None
        return momentum

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        momentum = self._momentum(node, ctx)
        if momentum is None:
            return None
        assert isinstance(node, cst.Call)
        positional = positional_args(node)
        if momentum.keyword is None and momentum is not positional[-1]:
            call = with_arg_value(node, momentum, cst.Integer("0"))  # later positionals follow
        else:
            call = without_arg(node, momentum)
        nesterov = find_arg(call, "nesterov", 5)
        return call if nesterov is None else without_arg(call, nesterov)
