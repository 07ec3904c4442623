"""Loss rules: what reaches the loss (probabilities, log-probabilities, argument order)."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.facts import PREDICTION_NAMES, model_call, probability_call, strip_casts
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Script
from mutator.semantics import (
    LOGITS_LOSSES,
    MODULE_PASSTHROUGH,
    callee_name,
    class_named,
    dotted_name,
    forward_returns_log_probs,
    is_label_name,
    unwrap_calls,
)

_SETUP = """
    import torch
    import torch.nn.functional as F
    from torch import nn
    criterion = nn.CrossEntropyLoss()
"""
# The loss on raw model outputs, in the argument order it expects.
_CORRECT_LOSS = in_training_script("loss = criterion(model(x), y)\n", _SETUP)


class ProbabilitiesIntoLogitsLoss(LintRule):
    """softmax/sigmoid applied to what a loss that applies it itself receives
    (CrossEntropyLoss, BCEWithLogitsLoss): a double softmax flattens the gradients."""

    code = "TW301"
    category = "loss"
    summary = "softmax/sigmoid before a logits loss"
    operators = ("softmax_before_cross_entropy", "sigmoid_before_bce_with_logits")
    invalid = (
        in_training_script(
            """
            loss = criterion(model(x).softmax(dim=1), y)  # <-
            """,
            _SETUP,
        ),
        in_training_script(
            """
            probs = torch.sigmoid(model(x))
            loss = F.binary_cross_entropy_with_logits(probs, y)  # <-
            """,
            _SETUP,
        ),
    )
    valid = (_CORRECT_LOSS,)

    def check(self, script: Script) -> Report:
        for call, kind in script.loss_calls():
            if kind not in LOGITS_LOSSES:
                continue
            value = script.value_of(call.args[0].value, call)
            squashed = probability_call(value) or probability_call(call.args[0].value)
            if squashed:
                label = script.loss_label(call)
                yield (
                    call,
                    f"{squashed} before {label}, which expects raw logits (double {squashed})",
                )


class NllWithoutLogSoftmax(LintRule):
    """NLLLoss on values that are not log-probabilities: a softmax/sigmoid output, or the
    output of a model whose ``forward`` (in this file, or in a local module the script
    imports, like ``model.py``) does not end in log_softmax. Silent when the model's class
    cannot be read (built elsewhere, an installed package)."""

    code = "TW302"
    category = "loss"
    summary = "NLL without log_softmax"
    operators = ("nll_without_log_softmax",)
    confidence = "medium"
    invalid = (
        """
        import torch.nn.functional as F
        loss = F.nll_loss(F.softmax(model(x), dim=1), y)  # <-
        """,
        """
        import torch.nn.functional as F
        from torch import nn
        class Net(nn.Module):
            def forward(self, x):
                return self.fc(x)
        model = Net().to(device)
        logits = model(x)
        loss = F.nll_loss(logits, y)  # <-
        """,
    )
    valid = (
        """
        import torch.nn.functional as F
        loss = F.nll_loss(F.log_softmax(model(x), dim=1), y)
        """,
        """
        import torch.nn.functional as F
        from torch import nn
        class Net(nn.Module):
            def forward(self, x):
                x = self.fc(x)
                return F.log_softmax(x, dim=1)
        model = Net()
        output = model(data)
        loss = F.nll_loss(output, target)
        """,
        """
        import torch.nn.functional as F
        from models import Net
        model = Net()
        loss = F.nll_loss(model(x), y)
        """,
    )

    def check(self, script: Script) -> Report:
        for call, kind in script.loss_calls():
            if kind != "NLLLoss":
                continue
            value = call.args[0].value
            for _ in range(_HOPS):  # log_probs = logits; logits = model(x)
                if probability_call(value) or _log_probs(script, value) is not None:
                    break
                value = script.value_of(value, call)
            if probability_call(value) or _log_probs(script, value) is False:
                label = script.loss_label(call)
                yield call, f"{label} on values that are not log-probabilities (no log_softmax)"


_HOPS = 3  # assignments followed back from the loss input


def _log_probs(script: Script, value: cst.BaseExpression) -> bool | None:
    """True for a log-softmax (inline, or the output of a model whose forward ends in one),
    False for the output of a model whose forward does not, None when unknown."""
    if "log_softmax" in script.ctx.code(value) or "LogSoftmax" in script.ctx.code(value):
        return True
    if not isinstance(value, cst.Call):
        return None
    callee = dotted_name(value.func)
    built = {
        callee_name(unwrap_calls(v, MODULE_PASSTHROUGH))
        for _, v in script.assignments.get(callee or "", [])
        if isinstance(v, cst.Call)
    }
    if len(built) != 1 or None in built:
        return None
    name = built.pop() or ""
    cls, ctx = class_named(script.ctx, name), script.ctx
    if cls is None and name in script.project.imported_names:
        ctx = script.project.module(script.project.imported_names[name])
        cls = class_named(ctx, name) if ctx is not None else None
    if cls is None or ctx is None:
        return None
    return forward_returns_log_probs(cls, ctx)


class MseOnClasses(LintRule):
    """MSE between logits and a classification target (one-hot, argmax accuracy, class
    counts in the file)."""

    code = "TW303"
    category = "loss"
    summary = "MSE on a classification target"
    operators = ("mse_for_classification",)
    confidence = "medium"
    invalid = (
        """
        import torch.nn.functional as F
        loss = F.mse_loss(logits, F.one_hot(y, 10).float())  # <-
        """,
    )
    valid = (
        """
        import torch.nn.functional as F
        loss = F.mse_loss(model(x), y)
        """,
    )

    def check(self, script: Script) -> Report:
        classification = script.mentions(
            r"\.argmax\(|torch\.long|\.long\(\)|one_hot|num_classes|NUM_CLASSES"
        )
        for call, kind in script.loss_calls():
            if kind != "MSELoss" or len(call.args) < 2:
                continue
            prediction = script.ctx.code(call.args[0].value)
            target = script.ctx.code(call.args[1].value)
            if "one_hot" in target or "logit" in prediction or classification:
                yield call, "MSE loss on a classification target: use cross-entropy on the logits"


class BceOnLogits(LintRule):
    """BCELoss where nothing in the file applies a sigmoid: it gets raw logits."""

    code = "TW304"
    category = "loss"
    summary = "BCELoss on logits"
    operators = ("bce_on_logits",)
    confidence = "medium"
    invalid = (
        """
        from torch import nn
        criterion = nn.BCELoss()
        loss = criterion(model(x), y)  # <-
        """,
    )
    valid = (
        """
        import torch
        from torch import nn
        criterion = nn.BCELoss()
        loss = criterion(torch.sigmoid(model(x)), y)
        """,
    )

    def check(self, script: Script) -> Report:
        for call, kind in script.loss_calls():
            if kind != "BCELoss":
                continue
            value = script.value_of(call.args[0].value, call)
            if probability_call(value) or script.mentions(
                r"Sigmoid\(|\.sigmoid\(|torch\.sigmoid|F\.sigmoid"
            ):
                continue
            label = script.loss_label(call)
            yield call, f"{label} on raw logits (nothing applies sigmoid): use BCEWithLogitsLoss"


def _made_by_forward(script: Script, expr: cst.BaseExpression, at: cst.Call) -> bool:
    """Is ``expr`` a name last assigned (in this function) a forward or its probabilities,
    directly or through a name or two (``logits = model(x); log_probs = F.log_softmax(logits)``)?"""
    for _ in range(3):
        if isinstance(expr, cst.Name):
            value = script.value_of(expr, at)
            if value is expr:
                return False
            expr = value
        expr = strip_casts(expr)
        if isinstance(expr, cst.Call) and callee_name(expr) in {
            "log_softmax",
            "softmax",
            "sigmoid",
        }:
            expr = strip_casts(expr.args[0].value) if expr.args else expr
        if model_call(expr):
            return True
    return False


class SwappedLossArguments(LintRule):
    """A loss called as (target, prediction): the first argument is named like labels and
    the second like a prediction, a model forward, or a name just assigned from one or from
    its ``log_softmax``/``softmax``/``sigmoid`` (``log_probs = F.log_softmax(logits, 1)``)."""

    code = "TW305"
    category = "loss"
    summary = "loss arguments swapped"
    operators = ("swap_loss_arguments",)
    confidence = "medium"
    invalid = (
        in_training_script(
            """
            loss = criterion(y, model(x))  # <-
            """,
            _SETUP,
        ),
        in_training_script(
            """
            loss = criterion(labels.long(), logits)  # <-
            """,
            _SETUP,
        ),
        in_training_script(
            """
            import torch.nn.functional as F
            logits = model(x)
            log_probs = F.log_softmax(logits, dim=1)
            loss = F.nll_loss(y, log_probs)  # <-
            """,
            _SETUP,
        ),
    )
    valid = (_CORRECT_LOSS,)

    def check(self, script: Script) -> Report:
        for call, _ in script.loss_calls():
            if len(call.args) < 2 or call.args[0].keyword or call.args[1].keyword:
                continue
            first = strip_casts(call.args[0].value)
            second = strip_casts(call.args[1].value)
            first_is_target = (
                isinstance(first, cst.Name)
                and first.value not in PREDICTION_NAMES
                and is_label_name(first.value)
            )
            second_is_prediction = (
                (isinstance(second, cst.Name) and second.value in PREDICTION_NAMES)
                or model_call(second)
                or _made_by_forward(script, second, call)
            )
            if first_is_target and second_is_prediction:
                yield call, "loss called as (target, prediction): the arguments are swapped"
