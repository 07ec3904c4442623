"""Numerics rules: dropout, log of softmax, half-precision losses, init, epsilons.

Linear after Linear (TW607) lives in ``activation.py``."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import probability_call
from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import callee_name, find_arg, method_name, number_value


class HighDropout(LintRule):
    """Dropout with ``p`` of 0.8 or more drops almost every activation."""

    code = "TW602"
    category = "numerics"
    summary = "dropout too high"
    operators = ("dropout_too_high",)
    dropout_max = 0.8
    invalid = (
        """
        from torch import nn
        d = nn.Dropout(0.9)  # <-
        """,
    )
    valid = (
        """
        from torch import nn
        d = nn.Dropout(0.3)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            if callee_name(call) not in {"Dropout", "dropout", "Dropout2d", "Dropout1d"}:
                continue
            arg = find_arg(call, keyword="p", position=0)
            value = number_value(arg.value) if arg is not None else None
            if value is not None and value >= self.dropout_max:
                yield call, f"dropout p={value:g} drops almost every activation"


class NaiveLogSoftmax(LintRule):
    """``log(softmax(x))`` underflows to -inf where ``log_softmax`` stays finite."""

    code = "TW603"
    category = "numerics"
    summary = "log of softmax"
    operators = ("naive_log_softmax",)
    invalid = (
        """
        import torch
        import torch.nn.functional as F
        logp = torch.log(F.softmax(z, dim=1))  # <-
        """,
        """
        logp = z.softmax(dim=1).log()  # <-
        """,
    )
    valid = (
        """
        import torch.nn.functional as F
        logp = F.log_softmax(z, dim=1)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            if (
                callee_name(call) == "log"
                and call.args
                and probability_call(call.args[0].value) == "softmax"
            ):
                yield call, "log(softmax(x)) underflows: use log_softmax"
            elif (
                method_name(call) == "log"
                and isinstance(call.func, cst.Attribute)
                and probability_call(call.func.value) == "softmax"
            ):
                yield call, "softmax(x).log() underflows: use log_softmax"


class LowPrecisionLoss(LintRule):
    """A loss whose inputs are cast to float16/bfloat16: the reduction loses precision."""

    code = "TW604"
    category = "numerics"
    summary = "loss in half precision"
    operators = ("low_precision_loss",)
    invalid = (
        """
        import torch.nn.functional as F
        loss = F.cross_entropy(model(x).half(), y)  # <-
        """,
    )
    valid = (
        """
        import torch.nn.functional as F
        loss = F.cross_entropy(model(x).float(), y)
        """,
    )

    def check(self, script: Script) -> Report:
        for call, _ in script.loss_calls():
            for arg in call.args[:2]:
                if re.search(r"\.(half|bfloat16)\(\)|float16", script.ctx.code(arg.value)):
                    yield call, f"{script.loss_label(call)} computed in half precision"
                    break


class ZeroWeightInit(LintRule):
    """Weights initialised to a constant (``zeros_``/``constant_`` on a weight or on every
    parameter): all units of a layer stay identical. Silent for the weight of one named
    layer (``self.lora_b.weight``): zeroing one layer on purpose is standard."""

    code = "TW605"
    category = "numerics"
    summary = "constant weight init"
    operators = ("zero_init",)
    invalid = (
        """
        from torch import nn
        nn.init.zeros_(layer.weight)  # <-
        """,
    )
    valid = (
        """
        from torch import nn
        nn.init.zeros_(layer.bias)
        """,
        """
        from torch import nn
        class LoRA(nn.Module):
            def __init__(self, d, r):
                super().__init__()
                self.lora_a = nn.Linear(d, r, bias=False)
                self.lora_b = nn.Linear(r, d, bias=False)
                nn.init.zeros_(self.lora_b.weight)
        """,
        """
        from torch import nn
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            if callee_name(call) not in {"zeros_", "constant_"} or not call.args:
                continue
            target = script.ctx.code(call.args[0].value)
            loop = script.ctx.enclosing(call, cst.For)
            over_parameters = loop is not None and "parameters()" in script.ctx.code(loop.iter)
            if _normalization_branch(call, script):
                continue  # a norm layer's per-channel scale: nothing to keep symmetric
            if _one_named_layer(call.args[0].value) and not over_parameters:
                continue  # self.lora_b.weight, self.head.weight: zeroed by design
            if target.endswith("weight") or over_parameters:
                yield call, "weights initialised to a constant: units stay symmetric"


def _one_named_layer(weight: cst.BaseExpression) -> bool:
    """``self.lora_b.weight``: the weight of one layer the model names. Zeroing one such
    layer is a design (LoRA's B, a zero-init head or residual branch: the layers around
    it break the symmetry); the bug is zeroing every module's weight (``m.weight`` in a
    loop over ``modules()``, ``module.weight`` in an ``apply`` hook)."""
    return (
        isinstance(weight, cst.Attribute)
        and weight.attr.value == "weight"
        and isinstance(weight.value, cst.Attribute)
    )


# Layers whose weight is a per-channel scale (BatchNorm2d, LayerNorm, GroupNorm, ...): a
# constant init (1 by default) is standard and leaves no units to tell apart.
_NORM_LAYER = re.compile(r"\b\w*Norm\w*\b")


def _normalization_branch(call: cst.Call, script: Script) -> bool:
    """Is ``call`` in the body of an ``if``/``elif`` that tests for a normalization layer
    (``elif isinstance(m, nn.BatchNorm2d):``)?"""
    child: cst.CSTNode = call
    for ancestor in script.ctx.ancestors(call):
        if isinstance(ancestor, cst.If) and child is ancestor.body:
            return bool(_NORM_LAYER.search(script.ctx.code(ancestor.test)))
        child = ancestor
    return False


class StdWithoutEpsilon(LintRule):
    """Division by a per-feature ``std()`` with no epsilon: constant features give inf.

    Low confidence: whether a feature is ever constant depends on the data, which the linter
    cannot see (tabular data such as sklearn's diabetes has none; image pixels often do)."""

    code = "TW606"
    category = "numerics"
    summary = "std without epsilon"
    operators = ("missing_epsilon",)
    confidence = "low"
    invalid = (
        """
        x = (x - x.mean(0)) / x.std(0)  # <-
        """,
    )
    valid = (
        """
        x = (x - x.mean(0)) / (x.std(0) + 1e-8)
        """,
    )

    def check(self, script: Script) -> Report:
        for node in script.ctx.nodes(cst.BinaryOperation):
            if not isinstance(node.operator, cst.Divide):
                continue
            divisor = script.value_of(node.right, node)
            if isinstance(divisor, cst.Call) and callee_name(divisor) == "std" and divisor.args:
                yield (
                    node,
                    "division by a per-feature std with no epsilon: constant features give inf",
                )
