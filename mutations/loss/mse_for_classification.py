"""The ``mse_for_classification`` operator (MseForClassification)."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from mutations.loss._shared import keep_keywords
from mutator.context import Context
from mutator.operator import Edits, Example, Operator, Param
from mutator.semantics import (
    TRAINING_CONTEXTS,
    closed_args,
    criterion_calls,
    fresh_name,
    function_call,
    functional_loss_kind,
    insert_before,
    inside_nested_scope,
    is_pure,
    loss_constructor_kind,
    loss_input,
    loss_target,
    method_call,
    method_name,
    module_alias,
    number_literal,
    positional_args,
    renamed_callee,
    with_arg_value,
)


def _overlap(first: Iterable[cst.CSTNode], second: Iterable[cst.CSTNode], ctx: Context) -> bool:
    """Would two sets of edits touch the same code (one node inside another)?"""
    return any(ctx.within(a, b) or ctx.within(b, a) for a in first for b in list(second))


class MseForClassification(Operator):
    """Train a classifier with mean squared error instead of cross-entropy.

    Bug: ``nn.CrossEntropyLoss`` (or ``F.cross_entropy``) is swapped for ``nn.MSELoss``.
    With ``variant=onehot`` the targets are turned into one-hot floats so the script runs:
    MSE then regresses raw logits onto 0/1, with no softmax coupling the classes. Impact:
    the loss starts near 1/C instead of ln C and gradients stay small for confidently
    wrong outputs; with ten classes accuracy can still match the reference, with many
    classes (a character LM) training falls far behind. With ``variant=plain`` only the
    loss is swapped, so
    (N, C) logits meet (N,) class indices: a shape error, or a silent broadcast when C
    happens to match. Fix: use cross-entropy on raw logits and integer class targets.
    Check: the init-loss check (initial loss is not ln C) and comparing train/val curves
    with the reference.
    """

    name = "mse_for_classification"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = "CrossEntropy swapped for MSE (one-hot targets so it runs, or plain)."
    expected = "degrades"
    witness = "differs loss_call", "the training loss is MSE, not cross-entropy"
    crashes = ("size of tensor", "must match", "shape")
    node_types = (cst.Call,)
    parameters = {
        "variant": Param(
            "onehot", "onehot: targets made one-hot floats; plain: swap only", ("onehot", "plain")
        ),
    }
    variants = ({"variant": "plain"},)
    examples = (
        Example(
            before="""
                import torch.nn as nn
                import torch.nn.functional as F
                criterion = nn.CrossEntropyLoss()
                loss = criterion(logits, y)
            """,
            after="""
                import torch.nn as nn
                import torch.nn.functional as F
                criterion = nn.MSELoss()
                loss = criterion(logits, F.one_hot(y, logits.size(-1)).float())
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            """,
            after="""
                import torch.nn.functional as F
                loss = F.mse_loss(logits.view(-1, logits.size(-1)), F.one_hot(targets.view(-1), logits.size(-1)).float())
            """,
        ),
        Example(
            before="""
                import torch
                from torch.nn import CrossEntropyLoss
                class T:
                    def __init__(self, model):
                        self.model = model
                        self.criterion = CrossEntropyLoss()
                    def step(self, x, y):
                        loss = self.criterion(self.model(x), y)
            """,
            after="""
                import torch
                from torch.nn import CrossEntropyLoss, MSELoss
                class T:
                    def __init__(self, model):
                        self.model = model
                        self.criterion = MSELoss()
                    def step(self, x, y):
                        logits = self.model(x)
                        loss = self.criterion(logits, torch.nn.functional.one_hot(y, logits.size(-1)).float())
            """,
        ),
        Example(
            before="""
                from torch import nn
                criterion = nn.CrossEntropyLoss(label_smoothing=0.1, reduction='sum')
                loss = criterion(model(x), y)
            """,
            after="""
                from torch import nn
                criterion = nn.MSELoss(reduction='sum')
                loss = criterion(model(x), y)
            """,
            params={"variant": "plain"},
        ),
    )
    non_examples = (
        """
            import torch.nn as nn
            criterion = nn.MSELoss()
            loss = criterion(pred, y)
        """,
        # onehot needs the call site, and it is nowhere to be found
        """
            import torch.nn as nn
            import torch.nn.functional as F
            criterion = nn.CrossEntropyLoss()
        """,
        # a one-hot target inside a comprehension cannot be hoisted
        """
            import torch.nn.functional as F
            losses = [F.cross_entropy(model(x), y) for x, y in batches]
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if not isinstance(node, cst.Call):
            return None
        if loss_constructor_kind(node, ctx) == "CrossEntropyLoss":
            return self._constructor_edits(node, ctx)
        if functional_loss_kind(node, ctx) == "CrossEntropyLoss":
            return self._functional_edits(node, ctx)
        return None

    def _constructor_edits(self, node: cst.Call, ctx: Context) -> Edits | None:
        renamed = renamed_callee(node.func, ctx, "MSELoss")
        if renamed is None:
            return None
        func, edits = renamed
        edits[node] = node.with_changes(func=func, args=keep_keywords(node, ("reduction",)))
        if self.params["variant"] == "plain":
            return edits
        uses = criterion_calls(node, ctx)
        if not uses or isinstance(ctx.parent(node), cst.Call):
            return None
        for use in uses:
            converted = _one_hot_target(use, ctx)
            if converted is None or _overlap(converted, edits, ctx):
                return None
            edits.update(converted)
        return edits

    def _functional_edits(self, node: cst.Call, ctx: Context) -> Edits | None:
        renamed = renamed_callee(node.func, ctx, "mse_loss")
        if renamed is None:
            return None
        func, edits = renamed
        positional = positional_args(node)[:2]
        args = closed_args([*positional, *keep_keywords(node, ("input", "target", "reduction"))])
        swapped = node.with_changes(func=func, args=args)
        if self.params["variant"] == "plain":
            edits[node] = swapped
            return edits
        converted = _one_hot_target(swapped, ctx, original=node)
        if converted is None:
            return None
        edits.update(converted)
        return edits


def _one_hot_target(call: cst.Call, ctx: Context, original: cst.Call | None = None) -> Edits | None:
    """Edits that make ``call`` pass one-hot float targets sized by its input's last dim.

    ``original`` is the node in the tree when ``call`` is an already-rewritten copy. An
    input that is not cheap to repeat (``model(x)``) is first bound to a new name on the
    line before, as a person would write it.
    """
    original = original or call
    functional = module_alias(ctx, "torch.nn.functional")
    input_arg, target_arg = loss_input(call), loss_target(call)
    if functional is None or input_arg is None or target_arg is None:
        return None

    def one_hot(classes: cst.BaseExpression) -> cst.Call:
        encoded = function_call(
            f"{functional}.one_hot", cst.Arg(target_arg.value), cst.Arg(classes)
        )
        return method_call(encoded, "float")

    if is_pure(input_arg.value):
        rewritten = with_arg_value(call, target_arg, one_hot(_class_count(input_arg.value)))
        return {original: rewritten}
    statement = ctx.statement_of(original)
    if not isinstance(statement, cst.SimpleStatementLine) or inside_nested_scope(
        original, statement, ctx
    ):
        return None
    name = fresh_name(ctx, original, ("logits", "outputs", "output", "scores"))
    if name is None:
        return None
    held = cst.Name(name)
    rewritten = with_arg_value(call, input_arg, held)
    rewritten = with_arg_value(
        rewritten,
        next(a for a in rewritten.args if a.value is target_arg.value),
        one_hot(method_call(held, "size", cst.Arg(number_literal(-1)))),
    )
    hoisted = cst.SimpleStatementLine(
        body=[cst.Assign(targets=[cst.AssignTarget(held)], value=input_arg.value)]
    )
    updated = statement.deep_replace(original, rewritten)
    assert isinstance(updated, cst.SimpleStatementLine)
    return insert_before(statement, hoisted, anchor_becomes=updated)


def _class_count(logits: cst.BaseExpression) -> cst.BaseExpression:
    """The class count of a logits expression: the ``V`` of ``x.view(-1, V)``, else
    ``logits.size(-1)``."""
    if (
        isinstance(logits, cst.Call)
        and method_name(logits) in ("view", "reshape")
        and len(logits.args) >= 2
        and logits.args[-1].keyword is None
    ):
        return logits.args[-1].value
    return method_call(logits, "size", cst.Arg(number_literal(-1)))
