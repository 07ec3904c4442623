"""Gradient rules about what the gradients reach: detached losses, kept graphs, frozen
parameters, clipping that never happens."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import backwarded_names, uses_bare
from experiments.bench.lint.rule import CORRECT_LOOP, LintRule, Report, in_training_script
from experiments.bench.lint.script import Script
from mutator.semantics import callee_name, dotted_name, find_arg, method_name

_CLIP_SETTING = re.compile(r"(clip|max_grad_norm|grad_norm)", re.IGNORECASE)


class UnusedClipSetting(LintRule):
    """A clipping threshold is configured (a module constant or a command-line option) but
    nothing clips: the clip call was lost."""

    code = "TW108"
    category = "gradient"
    summary = "clip threshold set but no clipping"
    operators = ("drop_grad_clipping",)
    confidence = "medium"
    invalid = (
        """
        max_grad_norm = 1.0  # <-
        for x, y in loader:
            step(x, y)
        """,
        """
        parser.add_argument("--clip", type=float, default=1.0)  # <-
        """,
    )
    valid = (
        """
        from torch import nn
        max_grad_norm = 1.0
        for x, y in loader:
            nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        """,
    )

    def check(self, script: Script) -> Report:
        if script.calls_of("clip"):
            return
        for assign in script.ctx.nodes(cst.Assign):
            for target in assign.targets:
                name = dotted_name(target.target)
                if name and _CLIP_SETTING.search(name) and script.unit(assign) is script.ctx.module:
                    yield assign, f"{name} is set but gradients are never clipped"
        for call in script.calls:
            if method_name(call) == "add_argument" and call.args:
                flag = call.args[0].value
                if isinstance(flag, cst.SimpleString) and _CLIP_SETTING.search(
                    flag.evaluated_value or ""
                ):
                    yield (
                        call,
                        f"option {flag.evaluated_value} is parsed but gradients are never clipped",
                    )


class DetachedLoss(LintRule):
    """backward() on a loss rebuilt from ``.item()``, ``.detach()`` or ``.data``: no
    gradient reaches the model.

    Only when no part of the loss carries a graph (followed through the names it is built
    from): ``critic(fake.detach()).mean()`` or ``mse(p, z.detach())`` detach an input of a
    term that still has one."""

    code = "TW109"
    category = "gradient"
    summary = "loss detached from the graph"
    operators = ("loss_from_item",)
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                loss = torch.tensor(criterion(model(x), y).item(), requires_grad=True)
                loss.backward()  # <-
                opt.step()
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                loss = torch.tensor(criterion(model(x), y).item(), requires_grad=True)
                loss = loss / 4
                loss.backward()  # <-
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                loss = criterion(model(x), y).detach().requires_grad_()
                loss = loss / accum_steps
                loss.backward()  # <-
            """
        ),
    )
    valid = (
        CORRECT_LOOP,
        in_training_script(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                running = loss.item()
                loss = loss / 4
                loss.backward()
            """
        ),
        in_training_script(
            """
            for real in loader:
                opt.zero_grad()
                fake = netG(noise)
                loss = critic(fake.detach()).mean() - critic(real).mean() + 10 * penalty
                loss.backward()
                opt.step()
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                p, z = model(x), target_net(x)
                loss = criterion(p, z.detach()) + 0.1 * p.data.norm()
                loss.backward()
                opt.step()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for call in script.calls_of("backward"):
            if not isinstance(call.func, cst.Attribute):
                continue
            receiver = call.func.value
            if (
                isinstance(receiver, cst.Call)
                and method_name(receiver) == "scale"
                and receiver.args
            ):
                receiver = receiver.args[0].value  # scaler.scale(loss).backward()
            if _graph(script, receiver, call) == "free":
                yield (
                    call,
                    "backward() on a loss rebuilt from .item()/.detach(): no gradient reaches the model",
                )


_DETACHING = {"item", "detach", "tolist"}
_NEW_LEAF = {"tensor", "as_tensor", "float", "full_like", "zeros_like", "ones_like"}


def _graph(script: Script, expr: cst.BaseExpression, at: cst.CSTNode, depth: int = 0) -> str:
    """``free`` when ``expr`` carries no autograd graph, ``graph`` when a part of it may,
    ``unknown`` for a name assigned nowhere before (a parameter, an int)."""
    if depth > 5 or isinstance(expr, (cst.Integer, cst.Float)):
        return "unknown"
    if isinstance(expr, cst.Name):
        value = script.value_of(expr, at)
        if value is expr:
            return "unknown"
        return _graph(script, value, _assignment_of(script, value) or at, depth + 1)
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)):
        parts = (
            [expr.left, expr.right] if isinstance(expr, cst.BinaryOperation) else [expr.expression]
        )
        kinds = {_graph(script, part, at, depth + 1) for part in parts}
        return "graph" if "graph" in kinds else "free" if "free" in kinds else "unknown"
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return "free"
    if isinstance(expr, cst.Call):
        name = method_name(expr) or callee_name(expr)
        if name in _DETACHING or name in _NEW_LEAF:
            return "free"  # torch.tensor(loss.item(), requires_grad=True) is a new leaf
        if name == "requires_grad_" and isinstance(expr.func, cst.Attribute):
            return _graph(script, expr.func.value, at, depth + 1)
    return "graph"


def _assignment_of(script: Script, value: cst.CSTNode) -> cst.CSTNode | None:
    """The statement that assigns ``value``: names in it resolve to values before it."""
    return script.ctx.statement_of(value)


class LossKeptWithGraph(LintRule):
    """A running total or a list keeps the loss tensor itself: every step's graph stays
    alive and memory grows."""

    code = "TW110"
    category = "gradient"
    summary = "loss tensor kept across steps"
    operators = ("accumulate_loss_graph",)
    invalid = (
        in_training_script(
            """
            total = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                total += loss  # <-
            """
        ),
        in_training_script(
            """
            history = []
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                history.append(loss)  # <-
            """
        ),
    )
    valid = (
        in_training_script(
            """
            total = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                total += loss.item()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        backwarded = backwarded_names(script)
        for node in script.ctx.nodes(cst.AugAssign):
            if isinstance(node.operator, cst.AddAssign) and uses_bare(node.value, backwarded):
                yield (
                    node,
                    "running total keeps the loss tensor (use loss.item()): every graph stays alive",
                )
        for call in script.calls:
            if (
                method_name(call) == "append"
                and call.args
                and uses_bare(call.args[0].value, backwarded)
            ):
                yield call, "appending the loss tensor (use loss.item()): every graph stays alive"


class PartialParameters(LintRule):
    """The optimizer is given a slice of ``parameters()``: the rest never trains."""

    code = "TW111"
    category = "gradient"
    summary = "optimizer on a slice of the parameters"
    operators = ("optimizer_partial_params",)
    invalid = (
        """
        import torch
        opt = torch.optim.SGD(list(model.parameters())[:2], lr=0.1)  # <-
        """,
    )
    valid = (
        """
        import torch
        opt = torch.optim.SGD(list(model.parameters()), lr=0.1)
        """,
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            if "optim" not in " ".join(script.qualified(call.func)) or not call.args:
                continue
            params = find_arg(call, keyword="params", position=0)
            sliced = params is not None and isinstance(params.value, cst.Subscript)
            if sliced and "parameters()" in script.ctx.code(params.value):
                yield call, "optimizer gets a slice of the parameters: the rest never trains"


class DetachInForward(LintRule):
    """``detach()`` inside a ``forward`` method: the layers before it stop learning."""

    code = "TW112"
    category = "gradient"
    summary = "detach inside forward"
    operators = ("detach_hidden",)
    confidence = "medium"
    invalid = (
        """
        class Net(nn.Module):
            def forward(self, x):
                h = self.body(x).detach()  # <-
                return self.head(h)
        """,
    )
    valid = (
        """
        class Net(nn.Module):
            def forward(self, x):
                h = self.body(x)
                return self.head(h)
        """,
    )

    def check(self, script: Script) -> Report:
        for function in script.functions.get("forward", []):
            for call in script.calls:
                if method_name(call) == "detach" and script.ctx.within(function, call):
                    yield call, "detach() inside forward(): the layers before it stop learning"


class OptimizerInLoop(LintRule):
    """A ``torch.optim`` optimizer is built inside the loop that calls backward() itself
    (the batch loop): its state (momentum, Adam moments) resets every iteration.

    An optimizer built in an outer loop (per epoch, or per fold with a fresh model) is
    TW504's question."""

    code = "TW113"
    category = "optim"
    summary = "optimizer built inside the loop"
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                opt = torch.optim.Adam(model.parameters())  # <-
                opt.zero_grad()
                criterion(model(x), y).backward()
                opt.step()
            """
        ),
    )
    valid = (
        CORRECT_LOOP,
        in_training_script(
            """
            for fold in range(5):
                model = Net()
                opt = torch.optim.Adam(model.parameters())
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for call in script.calls:
            names = script.qualified(call.func)
            if not any(n.startswith("torch.optim.") and "lr_scheduler" not in n for n in names):
                continue
            scope = script.scope(call)
            backwards = script.calls_of("backward", scope)
            if isinstance(scope, (cst.For, cst.While)) and any(
                script.scope(backward) is scope for backward in backwards
            ):
                yield (
                    call,
                    "optimizer built inside the training loop: its state resets every iteration",
                )
