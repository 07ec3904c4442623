"""The ``optimizer_on_stale_model`` operator (OptimizerOnStaleModel)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    bound_names,
    mentions,
    method_name,
    optimizer_class,
    receiver,
    single_assignment,
)


def _optimized_model(value: cst.BaseExpression, ctx: Context) -> str | None:
    """The model name whose parameters an optimizer is built on: ``Adam(model.parameters())``
    or ``model.configure_optimizers(...)``; else None."""
    if not isinstance(value, cst.Call):
        return None
    if method_name(value) == "configure_optimizers":
        owner = receiver(value)
        return owner.value if isinstance(owner, cst.Name) else None
    if optimizer_class(value, ctx) is None or not value.args:
        return None
    params = value.args[0].value
    if isinstance(params, cst.Call) and method_name(params) == "parameters":
        owner = receiver(params)
        return owner.value if isinstance(owner, cst.Name) else None
    return None


class OptimizerOnStaleModel(Operator):
    """Re-create the model right after the optimizer was built on its parameters.

    Bug: the model is (re)built after the optimizer took its parameters: a second
    ``model = Net()`` (a reset for a new fold, a copied setup block, a wrap that builds a
    new module). Impact: the optimizer steps the parameters of the old, unused model;
    the one that is trained and evaluated gets gradients that no optimizer applies: the
    loss stays at its initial level, no error. Fix: build the optimizer after the final
    model exists (and after ``.to(device)``), or rebuild it whenever the model is.
    Check: ``{id(p) for g in opt.param_groups for p in g["params"]}`` equals
    ``{id(p) for p in model.parameters()}``; the weights change after a step.
    """

    name = "optimizer_on_stale_model"
    category = "optim"
    summary = "Re-create the model after its optimizer is built: the trained model never updates."
    expected = "breaks_training"
    witness = "more foreign_grads", "the trained model's parameters are not in the optimizer"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                model = Net().to(device)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                train(model, optimizer)
            """,
            after="""
                model = Net().to(device)
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                model = Net().to(device)
                train(model, optimizer)
            """,
        ),
        Example(
            before="""
                model = GPT(config)
                model.to(device)
                optimizer = model.configure_optimizers(weight_decay, learning_rate)
            """,
            after="""
                model = GPT(config)
                model.to(device)
                optimizer = model.configure_optimizers(weight_decay, learning_rate)
                model = GPT(config)
            """,
        ),
    )
    non_examples = (
        # The model comes from elsewhere (a parameter): no constructor to repeat.
        """
            def fit(model):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        """,
        # Parameter groups: the model's parameters are read elsewhere.
        """
            model = Net()
            optimizer = torch.optim.AdamW(groups, lr=1e-3)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        assign = single_assignment(node)
        model = _optimized_model(assign.value, ctx) if assign is not None else None
        if model is None:
            return None
        for previous in reversed(ctx.preceding_statements(node)):
            built = single_assignment(previous)
            if built is None or model not in set(bound_names(built.targets[0].target)):
                continue
            if not isinstance(built.targets[0].target, cst.Name) or not isinstance(
                built.value, cst.Call
            ):
                return None  # unpacked or not a constructor: cannot rebuild it the same way
            if mentions(built.value, model, ctx):
                return None  # model = model.to(device): the same object, nothing re-created
            again = previous.with_changes(leading_lines=())
            return {node: cst.FlattenSentinel([node, again])}
        return None
