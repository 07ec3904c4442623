"""Gradient rules about the autograd graph itself: kept alive for nothing, or never built."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import binds
from experiments.bench.lint.rule import CORRECT_LOOP, LintRule, Report, in_training_script
from experiments.bench.lint.script import Node, Script
from mutator.semantics import (
    callee_name,
    find_arg,
    in_no_grad,
    is_model,
    is_true,
    method_name,
    receiver,
)

_LOOPS = (cst.For, cst.While)


def backward_tensor(call: cst.Call) -> str | None:
    """``loss`` of ``loss.backward()`` and of ``scaler.scale(loss).backward()``."""
    if not isinstance(call.func, cst.Attribute):
        return None
    tensor = receiver(call)
    if isinstance(tensor, cst.Call) and method_name(tensor) == "scale" and len(tensor.args) == 1:
        tensor = tensor.args[0].value
    return tensor.value if isinstance(tensor, cst.Name) else None


def _assigns_in(script: Script, root: Node) -> list[cst.Assign]:
    """The assignments of ``root``'s own function (not of functions nested in it)."""
    unit = root if isinstance(root, (cst.FunctionDef, cst.Module)) else script.unit(root)
    return [a for a in script.ctx.nodes_within(root, cst.Assign) if script.unit(a) is unit]


class RetainGraphLeftIn(LintRule):
    """``backward(retain_graph=True)`` in a training loop whose graph nothing backpropagates
    again: every step keeps its whole graph (activations included) alive until the next one.

    Silent when the loop calls backward() more than once, its function calls ``autograd.grad``
    (two losses sharing a graph: GANs, auxiliary losses), when a state is carried from one
    iteration into the next (``out, hidden = model(x, hidden)``: truncated BPTT without
    detach needs the graph), and when the loop reads a forward computed before it (a graph
    shared by every iteration)."""

    code = "TW114"
    category = "gradient"
    summary = "retain_graph=True left in"
    operators = ("retain_graph_left_in",)
    confidence = "medium"
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward(retain_graph=True)  # <-
                opt.step()
            """
        ),
        in_training_script(
            """
            hidden = model.init_hidden()
            for x, y in loader:
                hidden = hidden.detach()
                opt.zero_grad()
                out, hidden = model(x, hidden)
                criterion(out, y).backward(retain_graph=True)  # <-
                opt.step()
            """
        ),
    )
    valid = (
        CORRECT_LOOP,
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                features = model(x)
                criterion(features, y).backward(retain_graph=True)
                features.pow(2).mean().backward()
                opt.step()
            """
        ),
        in_training_script(
            """
            hidden = None
            for x, y in loader:
                opt.zero_grad()
                out, hidden = model(x, hidden)
                criterion(out, y).backward(retain_graph=True)
                opt.step()
            """
        ),
        in_training_script(
            """
            old_logprobs = policy.evaluate(states)
            for _ in range(4):
                opt.zero_grad()
                loss = -(policy.evaluate(states) - old_logprobs).exp().mean()
                loss.backward(retain_graph=True)
                opt.step()
            """
        ),
        in_training_script(
            """
            memory = model(prompt)
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(memory + model(x), y)
                loss.backward(retain_graph=True)
                opt.step()
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                grads = torch.autograd.grad(loss, model.parameters(), retain_graph=True)
                loss.backward()
                opt.step()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for call in script.calls_of("backward"):
            retain = find_arg(call, keyword="retain_graph")
            loop = script.scope(call)
            if retain is None or not is_true(retain.value) or not isinstance(loop, _LOOPS):
                continue
            if _another_backward(script, loop, call) or _calls_autograd_grad(script, loop):
                continue
            if _carries_state(script, loop) or _reads_forward_from_before(script, loop):
                continue
            yield call, "retain_graph=True but nothing backpropagates this graph again: it leaks"


def _another_backward(script: Script, loop: Node, call: cst.Call) -> bool:
    """Does the loop run a second backward(), itself or through a local function?"""
    inside = script.ctx.nodes_within(loop, cst.Call)
    if any(c is not call and script.kind(c) == "backward" for c in inside):
        return True
    return any("backward" in script.effects(f) for c in inside for f in script.local_callees(c))


def _calls_autograd_grad(script: Script, loop: Node) -> bool:
    """``torch.autograd.grad`` in the loop's function (a gradient penalty, meta-learning)."""
    return any(
        script.qualified(call.func) & {"torch.autograd.grad"}
        for call in script.calls_in_unit(script.unit(loop))
    )


def _carries_state(script: Script, loop: Node) -> bool:
    """An assignment in the loop feeds a name it binds back into its own call, and the loop
    never cuts that name's graph (``hidden = repackage_hidden(hidden)`` / ``.detach()``)."""
    carried, detached = set(), set()
    for assign in _assigns_in(script, loop):
        bound = binds(assign)
        if re.search(r"detach|repackage", script.ctx.code(assign.value)):
            detached |= bound
            continue
        for call in script.ctx.nodes_within(assign.value, cst.Call):
            carried |= {
                arg.value.value
                for arg in call.args
                if isinstance(arg.value, cst.Name) and arg.value.value in bound
            }
    return bool(carried - detached)


def _reads_forward_from_before(script: Script, loop: Node) -> bool:
    """The loop reads a name assigned (before it, in its function) from a model forward and
    never rebinds it (``hidden = model.init_hidden()`` is replaced each iteration)."""
    rebound = {name for assign in _assigns_in(script, loop) for name in binds(assign)}
    read = {name.value for name in script.ctx.nodes_within(loop, cst.Name)} - rebound
    for assign in _assigns_in(script, script.unit(loop)):
        if not script.before(assign, loop) or not (binds(assign) & read):
            continue
        for call in script.ctx.nodes_within(assign.value, cst.Call):
            if forward_call(script, call) and not in_no_grad(assign, script.ctx):
                return True
    return False


_NOT_FORWARD = {"to", "cuda", "cpu", "float", "double", "half", "train", "eval", "apply"}
_NOT_FORWARD |= {"parameters", "named_parameters", "state_dict", "requires_grad_", "modules"}


def forward_call(script: Script, call: cst.Call) -> bool:
    """A model instance run on inputs (``model(x)``, ``netG(z)``, ``policy.evaluate(s)``),
    not ``Net()`` building one or ``model.to(device)`` moving it."""
    name = callee_name(call) or ""
    if len(name) > 1 and name[:1].isupper():
        return False
    if is_model(call.func, script.ctx):
        return True
    method = isinstance(call.func, cst.Attribute) and name not in _NOT_FORWARD
    return method and is_model(call.func.value, script.ctx)  # type: ignore[union-attr]


class NoGradTrainingLoss(LintRule):
    """The tensor backward() is called on was last assigned under ``torch.no_grad()`` /
    ``inference_mode()``: it has no graph and backward() raises on the first batch.

    The assignment must sit in the same block as the backward() (or in a block around it):
    an evaluation branch that computes the loss under no_grad beside a training branch is
    not this bug. Reported at the assignment."""

    code = "TW115"
    category = "mode"
    summary = "training loss computed under no_grad"
    operators = ("no_grad_training_step",)
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                with torch.no_grad():
                    loss = criterion(model(x), y)  # <-
                loss.backward()
                opt.step()
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                with torch.inference_mode():
                    loss = loss / 4  # <-
                if train:
                    scaler.scale(loss).backward()
            """
        ),
    )
    valid = (
        CORRECT_LOOP,
        in_training_script(
            """
            for x, y in loader:
                if not train:
                    with torch.no_grad():
                        loss = criterion(model(x), y)
                else:
                    loss = criterion(model(x), y)
                    loss.backward()
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                with torch.no_grad():
                    target = teacher(x)
                    loss = criterion(model(x), target)
                with torch.enable_grad():
                    loss = criterion(model(x), target)
                loss.backward()
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                with torch.set_grad_enabled(train):
                    loss = criterion(model(x), y)
                if train:
                    loss.backward()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for call in script.calls_of("backward"):
            name = backward_tensor(call)
            if name is None or in_no_grad(call, script.ctx):
                continue
            unit = script.unit(call)
            earlier = [
                a for a in _assigns_in(script, unit) if name in binds(a) and script.before(a, call)
            ]
            if not earlier or not in_no_grad(earlier[-1], script.ctx):
                continue
            block = _grad_off_block(script, earlier[-1])
            if block is not None and script.ctx.within(block, call):
                yield earlier[-1], f"{name} is computed with gradients off: backward() has no graph"


def _grad_off_block(script: Script, node: Node) -> Node | None:
    """The block holding the innermost ``with`` that turned gradients off around ``node``."""
    for ancestor in script.ctx.ancestors(node):
        if isinstance(ancestor, cst.With) and not in_no_grad(ancestor, script.ctx):
            return script.ctx.parent(ancestor)
        if isinstance(ancestor, cst.FunctionDef):
            return None  # a decorated function: the whole function is gradient-free
    return None
