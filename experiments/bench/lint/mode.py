"""Mode rules: train()/eval() switches and gradient mode during evaluation."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import training_units
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Node, Script
from mutator.semantics import callee_name, dotted_name, in_no_grad, split_role

_SETUP = """
    import torch
    from torch import nn
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.2), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
"""


def _first_call_with(script: Script, root: Node, kind: str) -> cst.Call | None:
    """The first call in ``root`` that is, or runs (through local functions), ``kind``."""
    for call in script.calls:
        if script.ctx.within(root, call) and (
            script.kind(call) == kind or kind in script.effects(call)
        ):
            return call
    return None


def _feeds_backward(script: Script, call: cst.Call) -> bool:
    unit = script.unit(call)
    return any(
        script.before(call, b) and script.unit(b) is unit and script.scope(b) is script.scope(call)
        for b in script.calls_of("backward")
    )


class EvalWithoutTrainInLoop(LintRule):
    """A loop that trains and calls eval() (directly or through a local function) but never
    train(): from the second epoch on, training runs in eval mode."""

    code = "TW201"
    category = "mode"
    summary = "eval() in the training loop without train()"
    operators = ("drop_train_mode",)
    invalid = (
        in_training_script(
            """
            for epoch in range(10):
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
                model.eval()  # <-
                with torch.no_grad():
                    print(model(x_val))
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            for epoch in range(10):
                model.train()
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
                model.eval()
                with torch.no_grad():
                    print(model(x_val))
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
        reported: set[int] = set()
        for loop in [*script.ctx.nodes(cst.For), *script.ctx.nodes(cst.While)]:
            effects = script.effects(loop.body)
            trains = bool({"backward", "opt_step"} & effects)
            if not trains or "eval" not in effects or "train" in effects:
                continue
            culprit = _first_call_with(script, loop.body, "eval")
            if culprit is not None and id(culprit) not in reported:
                reported.add(id(culprit))
                yield (
                    culprit,
                    "eval() inside the training loop with no later train(): training continues in eval mode",
                )


class EvalBeforeTraining(LintRule):
    """eval() and then a training step in the same function with no train() between."""

    code = "TW202"
    category = "mode"
    summary = "eval() before training"
    operators = ("eval_mode_before_training",)
    invalid = (
        in_training_script(
            """
            def train_epoch():
                model.eval()  # <-
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            def train_epoch():
                model.train()
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
        for unit, calls in training_units(script):
            evals = script.direct_calls("eval", unit)
            trains = script.direct_calls("train", unit)
            steps = calls["backward"] or calls["opt_step"]
            for switch in evals:
                later = [s for s in steps if script.before(switch, s)]
                if not later or any(
                    script.before(switch, t) and script.before(t, later[0]) for t in trains
                ):
                    continue
                scope = script.scope(switch)
                if isinstance(scope, (cst.For, cst.While)) and scope is not script.scope(later[0]):
                    continue
                yield switch, "the model is put in eval() mode before it trains"


class EvalWithoutNoGrad(LintRule):
    """After ``model.eval()``, a forward of that model outside any no-grad region (and not
    feeding a backward()): it builds an autograd graph for nothing."""

    code = "TW203"
    category = "mode"
    summary = "eval forward without no_grad"
    operators = ("drop_no_grad",)
    invalid = (
        in_training_script(
            """
            def evaluate():
                model.eval()
                return model(x_val)  # <-
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            def evaluate():
                model.eval()
                with torch.no_grad():
                    return model(x_val)
            """,
            _SETUP,
        ),
        in_training_script(
            """
            @torch.inference_mode()
            def evaluate():
                model.eval()
                return model(x_val)
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
        for switch in script.calls_of("eval"):
            model = (
                dotted_name(switch.func.value) if isinstance(switch.func, cst.Attribute) else None
            )
            if model is None:
                continue
            unit = script.unit(switch)
            statement = script.ctx.statement_of(switch)
            block = list(script.ctx.following_statements(statement)) if statement else []
            for call in script.calls_in_unit(unit):
                if dotted_name(call.func) != model:
                    continue
                if not any(script.ctx.within(s, call) for s in block):
                    continue
                if in_no_grad(call, script.ctx) or _feeds_backward(script, call):
                    continue
                trains = [t for t in script.direct_calls("train", unit) if script.before(switch, t)]
                if trains and script.before(trains[0], call):
                    continue
                yield (
                    call,
                    f"{model}(...) after eval() runs without torch.no_grad(): it builds a graph for nothing",
                )
                break


class NoGradWithoutEval(LintRule):
    """The file switches to train() but never to eval(), has dropout or batch norm, and runs
    a model forward under no_grad: evaluation runs with dropout on."""

    code = "TW204"
    category = "mode"
    summary = "no_grad evaluation without eval()"
    operators = ("drop_eval_mode",)
    confidence = "medium"
    invalid = (
        in_training_script(
            """
            model.train()
            with torch.no_grad():
                val_logits = model(x_val)  # <-
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            model.train()
            model.eval()
            with torch.no_grad():
                val_logits = model(x_val)
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
        if script.calls_of("eval") or not script.calls_of("train"):
            return
        if not script.mentions(r"Dropout|BatchNorm|dropout|batch_norm"):
            return
        for call in script.calls:
            if (
                script.kind(call) is None
                and in_no_grad(call, script.ctx)
                and script.local_callees(call) == []
                and (dotted_name(call.func) or "").rsplit(".", 1)[-1] in {"model", "net"}
            ):
                yield (
                    call,
                    "evaluation forward without model.eval(): dropout/batch norm stay in training mode",
                )
                return


class EvaluateOnTrainingData(LintRule):
    """An evaluation function (``evaluate``, ``validate``, ``test``...) is handed a name
    that says training data, unless its result goes to training names (``loss_train,
    acc_train = test(model, mask_train)`` measures training accuracy); or an inline evaluation loop (under ``no_grad``, no backward)
    iterates a training loader while summing into validation names (``val_total +=``).
    A no_grad pass over the training loader that sums into ``train_*`` names (training
    accuracy) is fine."""

    code = "TW205"
    category = "data"
    summary = "validation on training data"
    operators = ("validate_on_training_data",)
    confidence = "medium"
    invalid = (
        """
        val_acc = evaluate(model, train_loader)  # <-
        """,
        """
        import torch
        model.eval()
        with torch.no_grad():
            for x, y in train_loader:  # <-
                val_total += criterion(model(x), y).item() * x.size(0)
        """,
    )
    valid = (
        """
        val_acc = evaluate(model, val_loader)
        """,
        """
        loss_train, acc_train = test(model, criterion, inputs, target, mask_train)
        loss_val, acc_val = test(model, criterion, inputs, target, mask_val)
        """,
        """
        import torch
        with torch.no_grad():
            for x, y in train_loader:
                train_correct += (model(x).argmax(1) == y).sum().item()
            for x, y in val_loader:
                val_correct += (model(x).argmax(1) == y).sum().item()
        """,
    )

    def check(self, script: Script) -> Report:
        yield from _inline_validation_over_training(script)
        for call in script.calls:
            tail = (callee_name(call) or "").lower()
            if not re.match(r"(evaluate|validate|valid|val|test)\b|evaluate_|validate_", tail):
                continue
            if _training_metrics(script, call):
                continue
            for arg in call.args:
                if isinstance(arg.value, cst.Name) and "train" in arg.value.value.lower():
                    yield (
                        call,
                        f"{tail}() is given {arg.value.value}: validation runs on training data",
                    )
                    break


def _inline_validation_over_training(script: Script) -> Report:
    for loop in script.ctx.nodes(cst.For):
        iterated = script.ctx.code(loop.iter)
        if split_role(iterated) != "train" or not in_no_grad(loop, script.ctx):
            continue
        if script.calls_of("backward", loop.body):
            continue
        for update in script.ctx.nodes_within(loop.body, cst.AugAssign):
            name = dotted_name(update.target)
            if name is not None and split_role(name) == "eval":
                yield loop, f"validation loop sums {name} over {iterated}: training data"
                break


def _training_metrics(script: Script, call: cst.Call) -> bool:
    """Is ``call`` assigned to names that all say training (``train_acc = evaluate(...)``)?"""
    statement = script.ctx.statement_of(call)
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or assign.value is not call:
        return False
    names = [
        name
        for target in assign.targets
        for name in (
            [dotted_name(e.value) for e in target.target.elements]
            if isinstance(target.target, cst.Tuple)
            else [dotted_name(target.target)]
        )
    ]
    return bool(names) and all(name and split_role(name) == "train" for name in names)
