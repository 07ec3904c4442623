"""Rules on regularization and normalized outputs: weight decay, functional dropout in a
module, softmax over the batch."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import resolve_number
from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import callee_name, find_arg, number_value, optimizer_class

_ARITHMETIC = {
    cst.Multiply: lambda a, b: a * b,
    cst.Divide: lambda a, b: a / b if b else None,
    cst.Add: lambda a, b: a + b,
    cst.Subtract: lambda a, b: a - b,
}


def _number(script: Script, expr: cst.BaseExpression) -> float | None:
    """``resolve_number`` plus arithmetic on resolved numbers (``WEIGHT_DECAY * 100``)."""
    if isinstance(expr, cst.BinaryOperation) and type(expr.operator) in _ARITHMETIC:
        left, right = _number(script, expr.left), _number(script, expr.right)
        if left is None or right is None:
            return None
        return _ARITHMETIC[type(expr.operator)](left, right)
    return resolve_number(script, expr)


class WeightDecayTooHigh(LintRule):
    """A ``weight_decay`` no working setup uses: 0.1 or more for an optimizer that adds it to
    the gradient (SGD, Adam, RMSprop: typical 1e-5..5e-3), above 1 for decoupled decay
    (AdamW: typical 0.01..0.1; grokking runs use 1). The weights shrink faster than the
    loss can grow them and the model underfits. Reads literals, module constants, argparse
    defaults and arithmetic on them; silent on a value it cannot resolve. Plain ``Adam`` is
    TW508's."""

    code = "TW609"
    category = "optim"
    summary = "weight decay too high"
    operators = ("weight_decay_too_high",)
    coupled_max = 0.1  # reported at or above
    decoupled_max = 1.0  # reported above
    invalid = (
        """
        import torch
        WEIGHT_DECAY = 0.1
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=WEIGHT_DECAY * 100)  # <-
        """,
        """
        import torch
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)  # <-
        """,
    )
    valid = (
        """
        import torch
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        """,
        """
        import torch
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1.0)
        """,
        """
        import torch
        parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
        args = parser.parse_args()
        opt = torch.optim.SGD(model.parameters(), args.lr, weight_decay=args.weight_decay)
        """,
        """
        import torch
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=cfg.wd * 10)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            name = optimizer_class(call, script.ctx)
            arg = find_arg(call, keyword="weight_decay") if name else None
            value = _number(script, arg.value) if arg is not None else None
            if value is None:
                continue
            decoupled = name == "AdamW" or _true(find_arg(call, keyword="decoupled_weight_decay"))
            if name == "Adam" and not decoupled:
                continue  # TW508's (AdamW-sized decay on Adam), from a lower threshold
            if decoupled and value > self.decoupled_max:
                yield call, f"weight_decay={value:g} for {name}: decoupled decay is 0.01..0.1"
            elif not decoupled and value >= self.coupled_max:
                yield call, f"weight_decay={value:g} for {name}: L2 decay is 1e-5..5e-3"


def _true(arg: cst.Arg | None) -> bool:
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "True"


class FunctionalDropoutAlwaysOn(LintRule):
    """``F.dropout(x, p)`` inside a module's method without ``training=self.training``:
    the functional form defaults to ``training=True``, so ``model.eval()`` leaves dropout
    on and evaluation is noisy and pessimistic. Silent outside classes (a functional model
    passes its own flag) and when ``training`` is given in any form (MC dropout passes
    ``training=True`` on purpose)."""

    code = "TW206"
    category = "mode"
    summary = "F.dropout ignores eval()"
    operators = ("dropout_ignores_training",)
    invalid = (
        """
        import torch.nn.functional as F
        from torch import nn
        class Net(nn.Module):
            def forward(self, x):
                x = F.relu(self.fc1(x))
                x = F.dropout(x, p=0.1)  # <-
                return self.fc2(x)
        """,
    )
    valid = (
        """
        import torch.nn.functional as F
        from torch import nn
        class Net(nn.Module):
            def forward(self, x):
                x = F.dropout(x, p=0.1, training=self.training)
                return self.fc2(F.dropout2d(x, 0.1, self.training))
        """,
        """
        import torch.nn.functional as F
        def mlp(params, x, train):
            return F.dropout(x @ params["w"], 0.5, train)
        """,
        """
        import torch.nn.functional as F
        from torch import nn
        class MCDropoutNet(nn.Module):
            def forward(self, x):
                return self.fc(F.dropout(x, p=0.2, training=True))
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            names = script.qualified(call.func)
            if not any(re.fullmatch(r"torch\.nn\.functional\.\w*dropout\w*", n) for n in names):
                continue
            if find_arg(call, keyword="training", position=2) is not None:
                continue
            function = script.ctx.enclosing_function(call)
            if function is None or not _is_method(script, function):
                continue
            yield call, f"{callee_name(call)} without training=self.training stays on in eval()"


def _is_method(script: Script, function: cst.FunctionDef) -> bool:
    block = script.ctx.parent(function)
    return block is not None and isinstance(script.ctx.parent(block), cst.ClassDef)


_ATTENTION = re.compile(r"(@|matmul\().*(transpose\(\s*-[12]\s*,\s*-[12]\s*\)|\.mT\b)", re.DOTALL)
_PROBABILITIES = {"softmax", "log_softmax"}


class SoftmaxOverBatch(LintRule):
    """``softmax``/``log_softmax`` over ``dim=0`` where the classes are not on dim 0: the
    output feeds a class-index loss (``nll_loss``/``NLLLoss``/``cross_entropy``, classes on
    dim 1), or the input is attention scores ``q @ k.transpose(-2, -1)`` (keys on the last
    dim). Each sample's outputs then depend on the rest of the batch. Silent for any other
    ``dim=0``: a 1-D vector or a sequence-first tensor may mean it."""

    code = "TW610"
    category = "numerics"
    summary = "softmax over the batch"
    operators = ("softmax_wrong_dim",)
    invalid = (
        """
        import torch.nn.functional as F
        log_probs = F.log_softmax(logits, dim=0)  # <-
        loss = F.nll_loss(log_probs, y)
        """,
        """
        import torch.nn.functional as F
        att = (q @ k.transpose(-2, -1)) / 8.0
        att = att.masked_fill(mask, float("-inf"))
        att = F.softmax(att, dim=0)  # <-
        """,
    )
    valid = (
        """
        import torch.nn.functional as F
        log_probs = F.log_softmax(logits, dim=1)
        loss = F.nll_loss(log_probs, y)
        """,
        """
        import torch.nn.functional as F
        scores = self.attn(encoder_outputs).squeeze(2)  # (seq_len, batch)
        weights = F.softmax(scores, dim=0)
        """,
        """
        import torch
        import torch.nn.functional as F
        att = (q @ k.transpose(-2, -1)) / 8.0
        att = F.softmax(att, dim=-1)
        probs = torch.softmax(policy_logits, dim=0)
        """,
    )

    def check(self, script: Script) -> Report:
        losses = {
            id(arg.value): call
            for call, kind in script.loss_calls()
            if kind in {"NLLLoss", "CrossEntropyLoss"}
            for arg in call.args[:1]
        }
        class_inputs = {
            (id(script.unit(call)), script.ctx.code(call.args[0].value)) for call in losses.values()
        }
        for call in script.calls:
            source = self._over_batch(script, call)
            if source is None:
                continue
            unit = id(script.unit(call))
            if id(call) in losses or {(unit, name) for name in _assigned_to(script, call)} & (
                class_inputs
            ):
                yield call, f"{callee_name(call)} over dim 0 feeds a loss with classes on dim 1"
            elif self._attention_scores(script, source, call):
                yield call, f"{callee_name(call)} over dim 0 of attention scores: keys are dim -1"

    @staticmethod
    def _over_batch(script: Script, call: cst.Call) -> cst.BaseExpression | None:
        """The input of a softmax/log_softmax taken over dim 0."""
        if callee_name(call) not in _PROBABILITIES:
            return None
        functional = any(name.startswith("torch") for name in script.qualified(call.func))
        if not functional and isinstance(call.func, cst.Attribute):  # x.softmax(dim=0)
            source, dim = call.func.value, find_arg(call, keyword="dim", position=0)
        else:
            source = call.args[0].value if call.args else None
            dim = find_arg(call, keyword="dim", position=1)
        if source is None or dim is None or number_value(dim.value) != 0:
            return None
        return source

    @staticmethod
    def _attention_scores(script: Script, source: cst.BaseExpression, at: cst.Call) -> bool:
        if _ATTENTION.search(script.ctx.code(source)):
            return True
        if not isinstance(source, cst.Name):
            return False
        unit = script.unit(at)
        return any(
            _ATTENTION.search(script.ctx.code(value))
            for where, value in script.assignments_in_unit(source.value, unit)
            if script.before(where, at)
        )


def _assigned_to(script: Script, call: cst.Call) -> set[str]:
    """``{"log_probs"}`` when ``call`` is the whole value of ``log_probs = ...``."""
    statement = script.ctx.statement_of(call)
    if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign):
        assign = statement.body[0]
        if assign.value is call:
            return {script.ctx.code(target.target) for target in assign.targets}
    return set()
