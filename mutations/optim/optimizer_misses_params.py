"""The ``optimizer_misses_params`` operator (OptimizerMissesParams)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    assigned_values,
    callee_name,
    find_arg,
    method_name,
    optimizer_class,
    receiver,
)

_CLIPS = frozenset({"clip_grad_norm_", "clip_grad_norm", "clip_grad_value_"})


def _sources(expr: cst.BaseExpression) -> list[cst.Call] | None:
    """The ``X.parameters()`` calls a combined parameter list is made of:
    ``list(a.parameters()) + list(b.parameters())``, ``itertools.chain(a.parameters(),
    b.parameters())``, ``[*a.parameters(), *b.parameters()]``; None for anything else."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        left, right = _sources(expr.left), _sources(expr.right)
        return left + right if left is not None and right is not None else None
    if isinstance(expr, cst.Call) and method_name(expr) == "parameters" and not expr.args:
        return [expr]
    if isinstance(expr, cst.Call) and callee_name(expr) in ("list", "chain") and expr.args:
        parts = [_sources(arg.value) for arg in expr.args if not arg.keyword]
        if None in parts or len(parts) != len(expr.args):
            return None
        return [call for part in parts for call in part]  # type: ignore[union-attr]
    if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
        parts = [_sources(element.value) for element in expr.elements]
        if None in parts:
            return None
        return [call for part in parts for call in part]  # type: ignore[union-attr]
    return None


def _combined(expr: cst.BaseExpression, ctx: Context) -> list[cst.Call] | None:
    """The sources of a list of several modules' parameters, written here or bound to
    the name ``expr`` (every binding the same list)."""
    if isinstance(expr, cst.Name):
        found = [_sources(value) for value in assigned_values(ctx, expr.value)]
        if not found or None in found:
            return None
        codes = {tuple(cst.Module([]).code_for_node(c) for c in f) for f in found}  # type: ignore[union-attr]
        sources = found[0] if len(codes) == 1 else None
    else:
        sources = _sources(expr)
    if sources is None or len({cst.Module([]).code_for_node(receiver(c)) for c in sources}) < 2:
        return None
    return sources


class OptimizerMissesParams(Swap):
    """Hand the optimizer (or the gradient clipping) the first module's parameters where a
    list combining several modules' parameters was meant: ``params`` ->
    ``model.parameters()``.

    Bug: the trainable parameters live in more than one module (an adaptive-softmax or
    other learnable criterion, a second generator, a separate head) and the optimizer is
    built on ``model.parameters()`` alone. Real fix: salesforce/awd-lstm-lm@1f0982e (the
    SGD and Adam optimizers and the clipping took ``model.parameters()`` while the
    adaptive-softmax criterion's weights were in ``params``). Impact: the left-out module
    keeps its initial weights: its gradients are computed every step and never applied (a
    random output layer of a split softmax, a CycleGAN direction that never learns), or,
    for clipping, never clipped; the loss plateaus above the reference without any error.
    Fix: build the optimizer on the combined list (``list(a.parameters()) +
    list(b.parameters())``, ``itertools.chain``). Check: compare the optimizer's parameter
    count with the sum over every module with trainable weights; every parameter with a
    gradient should change after a step.
    """

    name = "optimizer_misses_params"
    category = "optim"
    summary = "Optimizer built on model.parameters() where several modules' params were meant."
    expected = "degrades"
    witness = "more foreign_grads", "parameters with gradients are not in the optimizer"
    node_types = (cst.Arg,)
    examples = (
        Example(
            before="""
                params = list(model.parameters()) + list(criterion.parameters())
                optimizer = torch.optim.SGD(params, lr=args.lr)
            """,
            after="""
                params = list(model.parameters()) + list(criterion.parameters())
                optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
            """,
        ),
        Example(
            before="""
                import itertools
                optimizer_G = torch.optim.Adam(itertools.chain(G_AB.parameters(), G_BA.parameters()), lr=2e-4)
            """,
            after="""
                import itertools
                optimizer_G = torch.optim.Adam(G_AB.parameters(), lr=2e-4)
            """,
        ),
    )
    non_examples = (
        # One module: nothing left out.
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        # Parameter groups are optimizer_partial_params' and the groups' business.
        """
            optimizer = torch.optim.SGD(
                [{"params": model.body.parameters()}, {"params": model.head.parameters(), "lr": 1e-3}],
                lr=0.1,
            )
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Arg)
        call = ctx.parent(node)
        if not isinstance(call, cst.Call):
            return None
        if optimizer_class(call, ctx) is not None:
            first = find_arg(call, "params", 0)
        elif callee_name(call) in _CLIPS:
            first = find_arg(call, "parameters", 0)
        else:
            return None
        if first is not node:
            return None
        sources = _combined(node.value, ctx)
        if sources is None:
            return None
        return node.with_changes(value=sources[0].deep_clone())
