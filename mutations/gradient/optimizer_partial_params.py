"""The ``optimizer_partial_params`` operator (OptimizerPartialParams)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Param, Replacement, Swap
from mutator.semantics import (
    code_of,
    constructor_kind,
    find_arg,
    method_name,
    parameter_tensors,
    receiver,
    resolve,
    values_of,
    with_arg_value,
)
from mutator.semantics.params import is_group_list, parameter_calls


class OptimizerPartialParams(Swap):
    """Hand the optimizer only the last parameters: ``list(model.parameters())[-2:]``.

    Bug: the optimizer is built over a subset of the model (a fine-tuning recipe copied
    into from-scratch training, a head-only optimizer, a forgotten parameter group).
    Impact: only the last layer's weight and bias are updated; everything before it
    keeps its random initialisation, so the loss falls to the plateau of a linear model
    on random features and validation accuracy stays well below the reference. Fix: pass
    ``model.parameters()`` (or all parameter groups) to the optimizer. Check: a
    params-changed check per layer after one step (earlier layers do not move), or
    compare the number of parameters in ``optimizer.param_groups`` with the model's. A
    model whose tensors the slice keeps all (a lone ``nn.Linear``) is no site: equivalent.
    """

    name = "optimizer_partial_params"
    category = "gradient"
    summary = "Give the optimizer only the last layer's parameters: the rest never trains."
    expected = "degrades"
    witness = "more foreign_grads", "parameters with gradients are not in the optimizer"
    node_types = (cst.Call,)
    parameters = {
        "keep": Param(2, "trailing parameter tensors the optimizer still gets", valid="[1, inf)")
    }
    examples = (
        Example(
            before="optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n",
            after="optimizer = torch.optim.Adam(list(model.parameters())[-2:], lr=1e-3)\n",
        ),
        Example(
            before="""
                from torch import optim
                self.opt = optim.SGD(params=self.model.parameters(), lr=0.1, momentum=0.9)
            """,
            after="""
                from torch import optim
                self.opt = optim.SGD(params=list(self.model.parameters())[-1:], lr=0.1, momentum=0.9)
            """,
            params={"keep": 1},
        ),
        # Parameters gathered in a list or a sum of lists (issue 29: cleanrl's TD3).
        Example(
            before="""
                from torch import optim
                q_optimizer = optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=3e-4)
            """,
            after="""
                from torch import optim
                q_optimizer = optim.Adam((list(qf1.parameters()) + list(qf2.parameters()))[-2:], lr=3e-4)
            """,
        ),
    )
    non_examples = (
        "n = sum(p.numel() for p in model.parameters())\n",
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
        "optimizer = torch.optim.Adam(model.parameters(recurse=False))\n",
        "scheduler = torch.optim.lr_scheduler.StepLR(model.parameters(), 1)\n",
        # Equivalent: a weight and a bias are every tensor this model has; [-2:] keeps both.
        """
            import torch
            from torch import nn
            model = nn.Linear(20, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        """,
        # ... also after ``model = model.cuda()`` (issue 29: the value it rebinds is no
        # other model).
        """
            import torch
            from torch import nn
            model = nn.Linear(20, 1)
            if torch.cuda.is_available():
                model = model.cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        assert isinstance(node, cst.Call)
        if constructor_kind(node, ctx) == "optimizer":
            return self._gathered(node, ctx)
        if method_name(node) != "parameters" or node.args:
            return None
        arg = ctx.parent(node)
        constructor = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(constructor, cst.Call) or not isinstance(arg, cst.Arg):
            return None
        if find_arg(constructor, "params", 0) is not arg:
            return None
        if constructor_kind(constructor, ctx) != "optimizer":
            return None
        model = receiver(node)
        count = parameter_tensors(model, ctx, node) if model is not None else None
        if count is not None and count <= self.params["keep"]:
            return NonSite(
                f"equivalent: `{code_of(model)}` has {count} parameter tensors, all of which "
                f"[-{self.params['keep']}:] keeps"
            )
        return cst.parse_expression(f"list({ctx.code(node)})[-{self.params['keep']}:]")

    def _gathered(self, node: cst.Call, ctx: Context) -> Replacement | NonSite | None:
        """``Adam(list(actor.parameters()))``, ``Adam(list(q1.parameters()) +
        list(q2.parameters()))``, ``Adam(params)`` with ``params`` such a list (issue 29):
        the gathered list keeps its last tensors. A bare ``.parameters()`` is the other
        branch's site; parameter groups have no one list to cut."""
        params = find_arg(node, "params", 0)
        if params is None or _bare_parameters(params.value) or is_group_list(params.value, ctx):
            return None
        calls = parameter_calls(params.value, ctx, node)
        if not calls:
            return None
        keep = self.params["keep"]
        counts = [parameter_tensors(c.func.value, ctx, c) for c in calls]  # type: ignore[union-attr]
        if None not in counts and sum(counts) <= keep:  # type: ignore[arg-type]
            return NonSite(f"equivalent: [-{keep}:] keeps every one of the {sum(counts)} tensors")  # type: ignore[arg-type]
        code = ctx.code(params.value)
        if _is_list(params.value, ctx):
            cut = (
                f"({code})[-{keep}:]"
                if isinstance(params.value, cst.BinaryOperation)
                else f"{code}[-{keep}:]"
            )
        else:
            cut = f"list({code})[-{keep}:]"
        return with_arg_value(node, params, cst.parse_expression(cut))


def _bare_parameters(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and method_name(expr) == "parameters"


def _is_list(expr: cst.BaseExpression, ctx: Context) -> bool:
    """A list value: ``list(...)``, a sum of lists, a display, or a name bound to those."""
    if isinstance(expr, cst.Name):
        held = values_of(expr, ctx, expr)
        return bool(held) and all(_is_list(value, ctx) for value in held)
    if isinstance(expr, cst.BinaryOperation):
        return _is_list(expr.left, ctx) and _is_list(expr.right, ctx)
    if isinstance(expr, cst.List):
        return True
    return isinstance(expr, cst.Call) and resolve(expr.func, ctx).names == {"builtins.list"}
