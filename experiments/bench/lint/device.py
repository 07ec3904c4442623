"""Device rules: the model and its batches on different devices, discarded ``.to()``."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import MODEL_NAMES, assigned_name, target_names
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Node, Script
from mutator.semantics import callee_name, dotted_name

_SETUP = """
    import torch
    from torch import nn
    device = torch.device("cuda")
    criterion = nn.CrossEntropyLoss()
"""


def _model_moved(script: Script) -> bool:
    for call in script.calls_of("to_device"):
        if not isinstance(call.func, cst.Attribute):
            continue
        receiver = call.func.value
        if isinstance(receiver, cst.Call) and (callee_name(receiver) or "")[:1].isupper():
            return True  # Net().to(device)
        if _model_name(assigned_name(script, call) or ""):
            return True  # model = make_model(args).to(device): a factory function
        if _model_name(dotted_name(receiver) or ""):
            return True
    return False


def _model_name(dotted: str) -> bool:
    name = dotted.rsplit(".", 1)[-1]
    return name in MODEL_NAMES or "model" in name


def _forward_arguments(script: Script, root: Node) -> set[str]:
    """Plain names passed straight into a model forward or a loss inside ``root``."""
    names = set()
    for call in script.calls:
        if not script.ctx.within(root, call):
            continue
        callee = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        if callee in MODEL_NAMES or script.loss_kind(call) is not None:
            names |= {arg.value.value for arg in call.args if isinstance(arg.value, cst.Name)}
    return names


class BatchNotMoved(LintRule):
    """The model is moved to a device but a batch tensor of the loop that feeds it (or the
    loss) is never moved. Reported at the loop."""

    code = "TW401"
    category = "device"
    summary = "batch not moved to the device"
    operators = ("drop_input_to_device", "drop_target_to_device")
    invalid = (
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, y in loader:  # <-
                x = x.to(device)
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
        if not _model_moved(script):
            return
        for loop in script.ctx.nodes(cst.For):
            names = set(target_names(loop.target))
            if not names:
                continue
            moved = " ".join(
                script.ctx.code(call.func) for call in script.calls_of("to_device", loop.body)
            )
            for name in sorted(names & _forward_arguments(script, loop.body)):
                if not re.search(rf"\b{re.escape(name)}\.(to|cuda)\b", moved):
                    yield loop, f"batch tensor {name} is never moved to the model's device"


class ModelNotMoved(LintRule):
    """Batches are moved to ``device`` but the model never is (and nothing calls ``.cuda()``)."""

    code = "TW402"
    category = "device"
    summary = "model not moved to the device"
    operators = ("drop_model_to_device",)
    invalid = (
        in_training_script(
            """
            model = nn.Linear(4, 2)
            for x, y in loader:
                x = x.to(device)  # <-
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, y in loader:
                x = x.to(device)
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
        in_training_script(
            """
            model = make_model(args).to(device)
            for x, y in loader:
                x = x.to(device)
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
        moves_batches = any(
            isinstance(call.func, cst.Attribute)
            and isinstance(call.func.value, cst.Name)
            and call.args
            and "device" in script.ctx.code(call.args[0].value)
            for call in script.calls_of("to_device")
        )
        if moves_batches and not _model_moved(script) and not script.mentions(r"\.cuda\(\)"):
            for call in script.calls_of("to_device"):
                yield call, "batches are moved to the device but the model never is"
                return


class DiscardedTo(LintRule):
    """``x.to(device)`` as a statement on a loop variable: tensors are not moved in place."""

    code = "TW403"
    category = "device"
    summary = ".to() result discarded"
    invalid = (
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, y in loader:
                x.to(device)  # <-
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            for x, y in loader:
                x = x.to(device)
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
        loop_names = {
            name for loop in script.ctx.nodes(cst.For) for name in target_names(loop.target)
        }
        for line in script.ctx.nodes(cst.SimpleStatementLine):
            for statement in line.body:
                if not (isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call)):
                    continue
                call = statement.value
                if script.kind(call) == "to_device" and isinstance(call.func, cst.Attribute):
                    receiver = dotted_name(call.func.value)
                    if receiver in loop_names:
                        yield (
                            call,
                            f"{receiver}.to(...) result is discarded (tensors are not moved in place)",
                        )
