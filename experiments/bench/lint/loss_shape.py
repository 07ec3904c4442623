"""Shape rule: a (n, 1) prediction against a (n,) target in an elementwise loss."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.facts import model_call
from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import dotted_name, method_name, number_value
from mutator.semantics.losses import BINARY_LOSSES, REGRESSION_LOSSES

ELEMENTWISE = REGRESSION_LOSSES | BINARY_LOSSES


def _reshape(expr: cst.BaseExpression) -> tuple[str, cst.BaseExpression] | None:
    """``("flat", x)`` for ``x.squeeze(1)``/``x.view(-1)``/``x.flatten()``, ``("column", x)``
    for ``x.unsqueeze(1)``/``x.view(-1, 1)``/``x.reshape(-1, 1)``; else None."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return None
    method, inner = method_name(expr), expr.func.value
    args = [number_value(arg.value) for arg in expr.args]
    if method in {"squeeze", "flatten"} or (method in {"view", "reshape"} and args == [-1]):
        return "flat", inner
    if (method == "unsqueeze" and args in ([1], [-1])) or (
        method in {"view", "reshape"} and args == [-1, 1]
    ):
        return "column", inner
    return None


class PredictionTargetShapes(LintRule):
    """An elementwise loss (MSE, L1, Huber, BCE) on a model's raw output and a bare target
    where the same script shows the output is ``(n, 1)`` and the target ``(n,)``: elsewhere
    it squeezes that model's output or unsqueezes that target for a loss. Here ``(n, 1)``
    against ``(n,)`` broadcasts to ``(n, n)`` (MSE: a silent, wrong loss) or raises (BCE).

    Silent without such evidence (a model whose ``forward`` returns ``(n,)``, targets built
    as ``(n, 1)``), and when the target itself is flattened anywhere (``y.view(-1)``): then
    the targets may be ``(n, 1)`` and the bare call is right."""

    code = "TW309"
    category = "loss"
    summary = "(n, 1) prediction against (n,) target"
    operators = ("target_shape_broadcast",)
    confidence = "medium"
    invalid = (
        """
        from torch import nn
        criterion = nn.MSELoss()
        for x, y in train_loader:
            pred = model(x)
            loss = criterion(pred, y)  # <-
        for x, y in val_loader:
            val_loss = criterion(model(x), y.unsqueeze(1))
        """,
        """
        from torch import nn
        class Trainer:
            def __init__(self, model):
                self.model = model
                self.criterion = nn.BCEWithLogitsLoss()
            def train_step(self, x, y):
                logits = self.model(x)
                return self.criterion(logits, y)  # <-
            def evaluate(self, x, y):
                return self.criterion(self.model(x).squeeze(1), y)
        """,
    )
    valid = (
        """
        from torch import nn
        criterion = nn.MSELoss()
        for x, y in train_loader:
            loss = criterion(model(x), y.unsqueeze(1))
        for x, y in val_loader:
            val_loss = criterion(model(x).squeeze(1), y)
        """,
        """
        from torch import nn
        criterion = nn.BCEWithLogitsLoss()
        for x, y in train_loader:
            loss = criterion(model(x), y)
        acc = ((model(x_val).squeeze(1) > 0).float() == y.view(-1)).float().mean()
        """,
        """
        from torch import nn
        criterion = nn.MSELoss()
        for x, y in train_loader:
            loss = criterion(model(x), y)
        """,
    )

    def check(self, script: Script) -> Report:
        squeezed_models: set[str] = set()  # callee of model(x).squeeze(1) anywhere
        column_targets: set[str] = set()  # y of loss(..., y.unsqueeze(1)) anywhere
        flat_targets: set[str] = set()  # y of y.view(-1) / y.squeeze() anywhere
        for call in script.calls:
            shape = _reshape(call)
            if shape is None:
                continue
            kind, inner = shape
            if kind == "flat" and model_call(inner):
                squeezed_models.add(dotted_name(inner.func) or "")  # type: ignore[union-attr]
            elif kind == "flat" and (name := dotted_name(inner)) is not None:
                flat_targets.add(name)
        losses = [(call, kind) for call, kind in script.loss_calls() if kind in ELEMENTWISE]
        for call, _ in losses:
            positional = [arg.value for arg in call.args if arg.keyword is None]
            shape = _reshape(positional[1]) if len(positional) >= 2 else None
            if shape is not None and shape[0] == "column" and dotted_name(shape[1]) is not None:
                column_targets.add(dotted_name(shape[1]) or "")
        for call, kind in losses:
            positional = [arg.value for arg in call.args if arg.keyword is None]
            if len(positional) < 2 or not isinstance(positional[1], cst.Name):
                continue
            target = positional[1].value
            output = script.value_of(positional[0], call)
            if not model_call(output) or target in flat_targets:
                continue
            model = dotted_name(output.func) or ""  # type: ignore[union-attr]
            if model in squeezed_models or target in column_targets:
                yield (
                    call,
                    f"{kind} on {model}(...) as (n, 1) against {target} as (n,): broadcasts",
                )
