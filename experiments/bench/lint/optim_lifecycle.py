"""Optimizer lifetimes: built over a model that is then replaced, rebuilt every epoch."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import binds, reaches
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Node, Script
from mutator.semantics import (
    bound_names,
    callee_name,
    dotted_name,
    find_arg,
    method_name,
    number_value,
    optimizer_class,
    receiver,
)

_LOOPS = (cst.For, cst.While)
_MOVES = {"to", "cuda", "cpu", "double", "float", "half", "train"}  # return the same module
_TRAINING = {"backward", "opt_step"}
_FACTORY = re.compile(r"^(make|build|create|get|new|init)_(model|net|network)$")


def optimized_model(call: cst.Call) -> str | None:
    """``model`` of ``SGD(model.parameters(), ...)``."""
    params = call.args[0].value if call.args else None
    if isinstance(params, cst.Call) and method_name(params) == "parameters":
        return dotted_name(receiver(params))
    return None


def trains(script: Script, calls: list[cst.Call]) -> bool:
    """Does one of ``calls`` step or backpropagate, itself or through a local function?"""
    return reaches(script, calls, _TRAINING)


def _statement(script: Script, node: Node) -> Node:
    return script.ctx.statement_of(node) or node


def _fresh_model(value: cst.BaseExpression, old: str) -> bool:
    """``Net()`` / ``Net(...).to(device)`` / ``make_model(cfg)``: a new module object that
    does not wrap ``old`` or a part of it (``DataParallel(model)``, ``torch.compile(model)``,
    ``Finetuner(model.encoder)`` keep its parameters)."""
    while isinstance(value, cst.Call) and method_name(value) in _MOVES:
        value = receiver(value)
    if not isinstance(value, cst.Call):
        return False
    name = callee_name(value) or ""
    # ``Net(...)``, or a factory named for what it returns: ``make_model()``, ``build_net``.
    if not (name[:1].isupper() or _FACTORY.search(name)):
        return False
    passed = {dotted_name(arg.value) for arg in value.args}
    return not any(p == old or (p or "").startswith(old + ".") for p in passed)


class OptimizerOnStaleModel(LintRule):
    """An optimizer is built over ``model.parameters()`` and then ``model`` is bound to a new
    module (``model = Net()``) that the function goes on to train, with no optimizer built
    over the new one: every step updates the old, unused parameters.

    Silent when the new model wraps the old (``DataParallel(model)``, ``torch.compile``),
    when one loop holds both the optimizer and the rebinding (a fresh model per fold, with
    its optimizer built at the top of the next iteration), and when nothing trains after."""

    code = "TW503"
    category = "optim"
    summary = "optimizer over a replaced model"
    operators = ("optimizer_on_stale_model",)
    invalid = (
        in_training_script(
            """
            model = Net().to(device)
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            model = Net().to(device)  # <-
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                opt.step()
            """
        ),
        in_training_script(
            """
            def train(model, opt):
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()

            model = make_model()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            model = make_model()  # <-
            train(model, opt)
            """
        ),
    )
    valid = (
        in_training_script(
            """
            model = Net()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            model = nn.DataParallel(model).to(device)
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                opt.step()
            """
        ),
        in_training_script(
            """
            for fold in range(5):
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
                train(model, opt)
                model = Net()
            """
        ),
        in_training_script(
            """
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            train(model, opt)
            model = Net()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            train(model, opt)
            """
        ),
        in_training_script(
            """
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            train(model, opt)
            model = Finetuner(model.encoder)
            opt, sched = setup_training(model, cfg)
            train(model, opt)
            """
        ),
        in_training_script(
            """
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            model = Classifier(model.encoder)
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                opt.step()
            """
        ),
        in_training_script(
            """
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                opt.step()
            model = Net()
            model.load_state_dict(torch.load("best.pt"))
            print(evaluate(model))
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            model = optimized_model(call) if optimizer_class(call, script.ctx) else None
            if model is None:
                continue
            unit = script.unit(call)
            for where, value in script.assignments_in_unit(model, unit):
                fresh = script.before(call, where) and _fresh_model(value, model)
                if fresh and not self._rebuilt(script, call, where, model):
                    yield where, f"{model} is replaced after its optimizer was built on it"
                    break

    @staticmethod
    def _rebuilt(script: Script, optimizer: cst.Call, where: Node, model: str) -> bool:
        """Is an optimizer over the new ``model`` built (or the optimizer's name rebound)
        before anything trains after the rebinding? Nothing trained: also silent."""
        shared = [loop for loop in script.ctx.ancestors(optimizer) if isinstance(loop, _LOOPS)]
        if any(script.ctx.within(loop, where) for loop in shared):
            return True
        unit = script.unit(where)
        bound = _binding_name(script, optimizer)
        rebinds = [w for w, _ in script.assignments_in_unit(bound, unit)] if bound else []
        for call in script.calls_in_unit(unit):
            if not script.before(where, call):
                continue
            if any(script.before(w, call) and script.before(where, w) for w in rebinds):
                return True  # opt, sched = setup(model)
            builds = optimizer_class(call, script.ctx) or "opt" in (callee_name(call) or "")
            mentioned = script.ctx.nodes_within(call, cst.Name)
            mentioned += script.ctx.nodes_within(call, cst.Attribute)
            if builds and model in {dotted_name(n) for n in mentioned}:
                return True  # torch.optim.X(model.parameters()), build_optimizer(model)
            if trains(script, [call]):
                return False
        return True


def _binding_name(script: Script, node: Node) -> str | None:
    """``opt`` of ``opt = <node>``."""
    statement = _statement(script, node)
    if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign):
        assign = statement.body[0]
        if assign.value is node and len(assign.targets) == 1:
            return dotted_name(assign.targets[0].target)
    return None


def _stateless(script: Script, call: cst.Call) -> bool:
    """Plain SGD (no momentum) keeps no state: rebuilding it loses nothing."""
    if optimizer_class(call, script.ctx) != "SGD":
        return False
    momentum = find_arg(call, keyword="momentum", position=2)
    return momentum is None or number_value(momentum.value) == 0


class OptimizerInEpochLoop(LintRule):
    """An optimizer over ``model.parameters()`` is built in the body of the loop that trains,
    for a model built outside that loop: momentum and Adam's moments restart every epoch.

    Silent when the loop also builds or reloads the model (a fresh run per fold or seed),
    when the optimizer's arguments read the loop variable (a sweep over learning rates),
    when the loop (un)freezes parameters, when the optimizer is built under an ``if``
    (rebuilt on an event, such as unfreezing at one epoch), and for plain SGD without
    momentum (stateless: rebuilding it per epoch is an old way to set the learning rate)."""

    code = "TW504"
    category = "optim"
    summary = "optimizer rebuilt every epoch"
    operators = ("optimizer_recreated_each_epoch",)
    confidence = "medium"  # a deliberate per-epoch reset reads the same
    invalid = (
        in_training_script(
            """
            for epoch in range(10):
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # <-
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """
        ),
    )
    valid = (
        in_training_script(
            """
            for fold in range(5):
                model = Net()
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
                train(model, opt)
            """
        ),
        in_training_script(
            """
            for lr in (1e-3, 1e-2):
                opt = torch.optim.SGD(model.parameters(), lr=lr)
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """
        ),
        in_training_script(
            """
            for seed in range(3):
                model.load_state_dict(initial_state)
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """
        ),
        in_training_script(
            """
            for epoch in range(10):
                lr = 0.1 * 0.5 ** (epoch // 3)
                opt = torch.optim.SGD(model.parameters(), lr=lr)
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """
        ),
        in_training_script(
            """
            for epoch in range(10):
                if epoch == 5:
                    model.backbone.requires_grad_(True)
                    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            model = optimized_model(call) if optimizer_class(call, script.ctx) else None
            statement = _statement(script, call)
            loop = script.ctx.parent(script.ctx.parent(statement) or statement)
            if model is None or not isinstance(loop, _LOOPS):
                continue  # not directly in a loop body
            inside = script.ctx.nodes_within(loop.body, cst.Call)
            if any(script.kind(c) == "backward" and script.scope(c) is loop for c in inside):
                continue  # the batch loop itself: TW113 reports it
            if _stateless(script, call) or self._fresh_each_time(script, loop, call, model, inside):
                continue
            if trains(script, [c for c in inside if script.before(call, c)]):
                yield call, "optimizer rebuilt in the training loop: its state restarts each time"

    @staticmethod
    def _fresh_each_time(
        script: Script, loop: Node, call: cst.Call, model: str, inside: list[cst.Call]
    ) -> bool:
        targets = set(bound_names(loop.target)) if isinstance(loop, cst.For) else set()
        read = {dotted_name(n) for n in script.ctx.nodes_within(call, cst.Name)}
        rebound = any(
            model in binds(assign) for assign in script.ctx.nodes_within(loop.body, cst.Assign)
        )
        resets = {"load_state_dict", "reset_parameters", "apply", "requires_grad_"}
        touched = any(
            method_name(c) in resets and (dotted_name(receiver(c)) or "").startswith(model)
            for c in inside
        )
        freezes = "requires_grad" in script.ctx.code(loop.body)
        return bool(targets & read) or rebound or touched or freezes
