"""The ``dropout_on_logits`` operator (DropoutOnLogits)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    assigned_values,
    dotted_name,
    nn_class,
    number_value,
    resolve,
    single_assignment,
)

_LAYERS = ("Linear", "Conv1d", "Conv2d", "Conv3d", "Bilinear")
_FUNCTIONAL_DROPOUT = ("torch.nn.functional.dropout",)


def _applied(statement: cst.CSTNode) -> tuple[str, cst.Call] | None:
    """``(v, call)`` for ``v = f(v, ...)``, a call applied to the name it rebinds."""
    assign = single_assignment(statement)
    if assign is None or len(assign.targets) != 1 or not isinstance(assign.value, cst.Call):
        return None
    target, call = assign.targets[0].target, assign.value
    if not isinstance(target, cst.Name) or not call.args:
        return None
    first = call.args[0].value
    return (
        (target.value, call)
        if isinstance(first, cst.Name) and first.value == target.value
        else None
    )


def _built_by(func: cst.BaseExpression, ctx: Context, classes: tuple[str, ...]) -> cst.Call | None:
    """The ``nn.<Class>(...)`` among ``classes`` that ``self.<attr>`` was assigned."""
    name = dotted_name(func)
    if name is None or not name.startswith("self."):
        return None
    for value in assigned_values(ctx, name):
        if isinstance(value, cst.Call) and nn_class(value, ctx, classes) is not None:
            return value
    return None


def _dropout(call: cst.Call, ctx: Context) -> cst.Call | None:
    """The constructor (``nn.Dropout(p)``) or the call itself (``F.dropout``) of a dropout."""
    if resolve(call.func, ctx, strict=False).matches(_FUNCTIONAL_DROPOUT):
        return call
    return _built_by(call.func, ctx, ("Dropout",))


def _zero_rate(dropout: cst.Call) -> bool:
    for arg in dropout.args:
        if arg.keyword is None or arg.keyword.value == "p":
            return number_value(arg.value) == 0
    return False


class DropoutOnLogits(Operator):
    """Apply the hidden layers' dropout to the output layer's result (the logits) too.

    Bug: a forward that alternates ``x = layer(x)`` and ``x = self.dropout(x)`` gets one
    dropout too many, after the last layer: the scores themselves are dropped. Real fix:
    bowang-lab/Transformer-GCN-QA@de8382f (``logits = self.dropout(logits)`` after the
    final ``fc_5``). Impact: in training, each logit is zeroed with probability p and the
    rest scaled by 1/(1-p): the loss sees random, inflated scores (a zeroed logit of the
    right class is a large loss), gradients get noisier and the model under-fits; the
    evaluation forward has no dropout, so training and validation losses drift apart in
    the wrong direction (training worse than validation). A dropout with rate 0 is no site
    (equivalent). Fix: no dropout after the output layer. Check: in train mode, two
    forwards of the same batch must give the same logits when only the last layer runs;
    compare the training and evaluation losses on one batch.
    """

    name = "dropout_on_logits"
    category = "numerics"
    summary = "The model's dropout also applied to its output layer's result (the logits)."
    expected = "degrades"
    witness = "more dropout_calls", "one more dropout runs, on the model's output, in training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                import torch.nn as nn

                class Scorer(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc_1 = nn.Linear(256, 128)
                        self.fc_2 = nn.Linear(128, 1)
                        self.dropout = nn.Dropout(0.2)

                    def forward(self, x):
                        logits = self.fc_1(x)
                        logits = self.dropout(logits)
                        logits = self.fc_2(logits)
                        return logits.squeeze(-1)
            """,
            after="""
                import torch.nn as nn

                class Scorer(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc_1 = nn.Linear(256, 128)
                        self.fc_2 = nn.Linear(128, 1)
                        self.dropout = nn.Dropout(0.2)

                    def forward(self, x):
                        logits = self.fc_1(x)
                        logits = self.dropout(logits)
                        logits = self.fc_2(logits)
                        logits = self.dropout(logits)
                        return logits.squeeze(-1)
            """,
        ),
    )
    non_examples = (
        # A later layer still reads the value: not the output layer.
        """
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc_1 = nn.Linear(8, 8)
                    self.fc_2 = nn.Linear(8, 2)
                    self.drop = nn.Dropout(0.5)

                def forward(self, x):
                    x = self.drop(x)
                    x = self.fc_1(x)
                    x = self.drop(x)
                    return self.fc_2(x)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        applied = _applied(node)
        if applied is None or _built_by(applied[1].func, ctx, _LAYERS) is None:
            return None
        name = applied[0]
        function = ctx.enclosing_function(node)
        if function is None or function.name.value != "forward":
            return None
        later = [
            s
            for s in ctx.nodes_within(function, cst.SimpleStatementLine)
            if not ctx.within(node, s)
        ]
        after = [s for s in later if ctx.position(s).start.line > ctx.position(node).start.line]
        if any(_reads_layer(s, ctx) for s in after):
            return None  # another layer follows: this is a hidden layer
        earlier = [s for s in later if ctx.position(s).start.line < ctx.position(node).start.line]
        drops = [s for s in earlier if (a := _applied(s)) and a[0] == name and _dropout(a[1], ctx)]
        if not drops:
            return None
        if _zero_rate(_dropout(_applied(drops[-1])[1], ctx)):  # type: ignore[index, arg-type]
            return NonSite("equivalent: the dropout's rate is 0")
        copy = drops[-1].with_changes(leading_lines=())  # type: ignore[attr-defined]
        return {node: cst.FlattenSentinel([node, copy])}  # type: ignore[list-item]


def _reads_layer(statement: cst.CSTNode, ctx: Context) -> bool:
    """Does ``statement`` call a layer (``self.fc(x)``, an ``nn.Linear`` attribute)?"""
    return any(
        _built_by(call.func, ctx, _LAYERS) is not None  # type: ignore[attr-defined]
        for call in ctx.nodes_within(statement, cst.Call)
    )
