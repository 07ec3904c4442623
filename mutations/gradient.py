"""Gradient-flow bugs: gradients that accumulate, vanish, never reach the model or never apply."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Operator, Param, Replacement
from mutator.semantics import (
    callee_name,
    constructor_kind,
    dotted_name,
    dotted_names_in,
    enclosing_function,
    expression_call,
    find_arg,
    identifiers_in,
    in_no_grad,
    is_call_statement,
    is_module_class,
    is_optimizer_step,
    looks_like_loss_call,
    method_call,
    method_name,
    module_alias,
    move_after,
    move_before,
    per_module,
    same_scope,
    single_assignment,
    start_of,
    starts_before,
)

_CLIP_FUNCTIONS = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"})


def _is_backward(statement: cst.CSTNode) -> bool:
    """``loss.backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``."""
    return is_call_statement(statement, "backward")


def _clip_call(statement: cst.CSTNode) -> cst.Call | None:
    """The clipping call of ``clip_grad_norm_(...)`` or ``norm = clip_grad_norm_(...)``."""
    call = expression_call(statement)
    if call is None and isinstance(statement, cst.SimpleStatementLine):
        body = statement.body
        if (
            len(body) == 1
            and isinstance(body[0], cst.Assign)
            and isinstance(body[0].value, cst.Call)
        ):
            call = body[0].value
    if call is not None and callee_name(call) in _CLIP_FUNCTIONS:
        return call
    return None


def _backward_calls(ctx: Context, near: cst.CSTNode) -> list[cst.Call]:
    """The ``.backward(...)`` calls in the same function (or module level) as ``near``."""
    return _backward_calls_by_scope(ctx).get(enclosing_function(near, ctx), [])


@per_module
def _backward_calls_by_scope(ctx: Context) -> dict[cst.FunctionDef | None, list[cst.Call]]:
    found: dict[cst.FunctionDef | None, list[cst.Call]] = {}
    for call in ctx.nodes(cst.Call):
        if method_name(call) == "backward":  # type: ignore[arg-type]
            found.setdefault(enclosing_function(call, ctx), []).append(call)  # type: ignore[arg-type]
    return found


def _nearest_preceding_backward(ctx: Context, statement: cst.CSTNode) -> cst.CSTNode | None:
    for candidate in reversed(list(ctx.preceding_statements(statement))):
        if _is_backward(candidate):
            return candidate
    return None


# -- operators ------------------------------------------------------------------------------


class DropZeroGrad(Operator):
    """Delete the ``zero_grad()`` call of the training step.

    Bug: gradients are never cleared, so every ``backward()`` adds onto the sum of all
    earlier ones. Impact: the update direction is dominated by stale gradients and its
    size grows with the step count, as if the learning rate kept rising; with momentum
    or Adam the loss typically stalls, oscillates or diverges. Fix: call
    ``optimizer.zero_grad()`` (or ``model.zero_grad()``) once per step, before
    ``backward()``. Check: log the global gradient norm per step (it climbs steadily
    instead of settling) or overfit one batch (it fails).
    """

    name = "drop_zero_grad"
    category = "gradient"
    summary = "Remove optimizer.zero_grad(): gradients accumulate across steps."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="opt.zero_grad()\nloss.backward()\nopt.step()\n",
            after="loss.backward()\nopt.step()\n",
        ),
        Example(
            before=(
                "class T:\n    def step(self, loss):\n"
                "        self.optimizer.zero_grad(set_to_none=True)\n"
                "        loss.backward()\n        self.optimizer.step()\n"
            ),
            after=(
                "class T:\n    def step(self, loss):\n"
                "        loss.backward()\n        self.optimizer.step()\n"
            ),
        ),
        Example(
            before="for x in xs:\n    model.zero_grad()\n",
            after="for x in xs:\n    pass\n",
        ),
    )
    non_examples = (
        "loss.backward()\nopt.step()\n",
        "zero_grad = True\n",
        "grads = opt.zero_grad\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return is_call_statement(node, "zero_grad")

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()


class ZeroGradAfterBackward(Operator):
    """Move ``zero_grad()`` from before ``backward()`` to between ``backward()`` and ``step()``.

    Bug: the freshly computed gradients are erased before the optimizer sees them.
    Impact: ``step()`` runs on zero (or ``None``) gradients, so the weights never move
    (Adam/SGD with weight decay still shrink them); the loss stays flat at its initial
    value. Fix: clear gradients before ``backward()``, never between it and ``step()``.
    Check: a params-changed check after one step, or gradient norm logged at ``step()``
    (zero every time).
    """

    name = "zero_grad_after_backward"
    category = "gradient"
    summary = "Move zero_grad() between backward() and step(): every update sees zero gradients."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="opt.zero_grad()\nout = model(x)\nloss.backward()\nopt.step()\n",
            after="out = model(x)\nloss.backward()\nopt.zero_grad()\nopt.step()\n",
        ),
    )
    non_examples = (
        "loss.backward()\nopt.zero_grad()\nopt.step()\n",
        "opt.zero_grad()\nopt.step()\n",
    )

    def _backward_after(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode | None:
        for statement in ctx.following_statements(node):
            if is_call_statement(statement, "backward"):
                return statement
        return None

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return is_call_statement(node, "zero_grad") and self._backward_after(node, ctx) is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        backward = self._backward_after(node, ctx)
        assert backward is not None and expression_call(node) is not None
        return move_after(node, backward)


class DropBackward(Operator):
    """Delete the ``backward()`` call of the training step.

    Bug: the loss is computed and logged but never differentiated. Impact: no parameter
    ever receives a gradient, so ``optimizer.step()`` skips every parameter (``grad`` is
    ``None``); the weights stay at their initialisation and the loss stays flat at its
    initial value while the script runs without an error. Fix: call ``loss.backward()``
    (``scaler.scale(loss).backward()`` under AMP) between the forward pass and ``step()``.
    Check: a params-changed check after one step (nothing changes) or the gradient-norm
    log (no gradients at all); overfit-one-batch fails.
    """

    name = "drop_backward"
    category = "gradient"
    summary = "Remove loss.backward(): no gradients, the weights never change."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="opt.zero_grad()\nloss = criterion(model(x), y)\nloss.backward()\nopt.step()\n",
            after="opt.zero_grad()\nloss = criterion(model(x), y)\nopt.step()\n",
        ),
        Example(
            before="scaler.scale(loss).backward()\nscaler.step(optimizer)\nscaler.update()\n",
            after="scaler.step(optimizer)\nscaler.update()\n",
        ),
    )
    non_examples = (
        "def backward(ctx, grad):\n    return grad\n",
        "loss = criterion(out, y)\nhook = loss.backward\n",
        "grads = torch.autograd.grad(loss, params)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return _is_backward(node)

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()


class DropOptimizerStep(Operator):
    """Delete ``optimizer.step()`` (or ``scaler.step(optimizer)``) from the training step.

    Bug: gradients are computed every step but never applied. Impact: the weights never
    change, the training loss stays at its initial value (only dropout noise moves it)
    and validation metrics stay at chance; nothing crashes. The scheduler still steps,
    which PyTorch warns about ("lr_scheduler.step() before optimizer.step()"). Fix: call
    ``optimizer.step()`` after ``backward()`` in every (accumulation) step. Check: a
    params-changed check after one step, or the update/weight ratio log (exactly zero).
    """

    name = "drop_optimizer_step"
    category = "gradient"
    summary = "Remove optimizer.step(): gradients are computed but never applied."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="loss.backward()\noptimizer.step()\nscheduler.step()\n",
            after="loss.backward()\nscheduler.step()\n",
        ),
        Example(
            before=(
                "class Trainer:\n    def train_step(self, loss):\n        loss.backward()\n"
                "        self.optimizer.step()\n        self.scheduler.step()\n"
            ),
            after=(
                "class Trainer:\n    def train_step(self, loss):\n        loss.backward()\n"
                "        self.scheduler.step()\n"
            ),
        ),
        Example(
            before="scaler.scale(loss).backward()\nscaler.step(opt)\nscaler.update()\n",
            after="scaler.scale(loss).backward()\nscaler.update()\n",
        ),
    )
    non_examples = (
        "scheduler.step()\nlr_sched.step()\n",
        "warmup = torch.optim.lr_scheduler.LambdaLR(opt, f)\nwarmup.step()\n",
        "env.step(action)\ntrainer.step()\n",
        "scaler.step(model)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return is_optimizer_step(node, ctx)

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()


class StepBeforeBackward(Operator):
    """Move ``optimizer.step()`` above ``loss.backward()`` in the same block.

    Bug: the optimizer steps before the gradients of the current batch exist. Impact:
    with ``zero_grad()`` at the top of the step (``set_to_none=True``, the default) every
    ``step()`` sees ``None`` gradients and skips all parameters, so the weights never
    change; with ``set_to_none=False`` it applies zeros (weight decay only); when
    ``zero_grad()`` comes last, each update uses a stale or empty gradient. Fix: the order
    is ``zero_grad()``, forward, ``backward()``, ``step()``. Check: a params-changed check
    after one step, or the gradient norm logged at ``step()`` (zero/absent).
    """

    name = "step_before_backward"
    category = "gradient"
    summary = "Move optimizer.step() before loss.backward(): it never sees this batch's gradients."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "for x, y in loader:\n    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n"
                "    loss.backward()\n    optimizer.step()\n"
            ),
            after=(
                "for x, y in loader:\n    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n"
                "    optimizer.step()\n    loss.backward()\n"
            ),
        ),
        Example(
            before=(
                "loss.backward()\nnn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                "self.optimizer.step()\n"
            ),
            after=(
                "self.optimizer.step()\nloss.backward()\n"
                "nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            ),
        ),
    )
    non_examples = (
        "optimizer.step()\nloss.backward()\n",
        "loss.backward()\nscheduler.step()\n",
        "loss.backward()\nif (i + 1) % accum_steps == 0:\n    optimizer.step()\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return is_optimizer_step(node, ctx) and _nearest_preceding_backward(ctx, node) is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        backward = _nearest_preceding_backward(ctx, node)
        assert backward is not None
        return move_before(node, backward)


class StepOutsideBatchLoop(Operator):
    """Dedent ``optimizer.step()`` out of the batch loop, so it runs once after the loop.

    Bug: an indentation slip puts the step after the ``for batch in loader:`` loop.
    Impact: the model is updated once per epoch instead of once per batch, and only with
    the last batch's gradient when ``zero_grad()`` runs each batch (with it missing, one
    huge step on the summed gradients). Training crawls: the loss falls far slower than
    the reference and validation stays near chance for a short budget; nothing crashes.
    Fix: indent ``optimizer.step()`` into the batch loop, right after ``backward()``.
    Check: count optimizer steps per epoch (one instead of ``len(loader)``), or compare
    train/val curves against a known-good run.
    """

    name = "step_outside_batch_loop"
    category = "gradient"
    summary = "Dedent optimizer.step() out of the batch loop: one update per epoch."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "for x, y in loader:\n    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n"
                "    loss.backward()\n    optimizer.step()\n    total += loss.item()\n"
                "print(total)\n"
            ),
            after=(
                "for x, y in loader:\n    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n"
                "    loss.backward()\n    total += loss.item()\n"
                "optimizer.step()\nprint(total)\n"
            ),
        ),
    )
    non_examples = (
        "for group in opt.param_groups:\n    opt.step()\n",
        "def train_step(loss):\n    loss.backward()\n    optimizer.step()\n",
        "for x in loader:\n    loss.backward()\n    scheduler.step()\n",
    )

    def _loop(self, node: cst.CSTNode, ctx: Context) -> cst.For | None:
        block = ctx.parent(node)
        loop = ctx.parent(block) if isinstance(block, cst.IndentedBlock) else None
        if not isinstance(loop, cst.For) or loop.body is not block:
            return None
        if not isinstance(ctx.parent(loop), (cst.IndentedBlock, cst.Module)):
            return None
        return loop

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if not is_optimizer_step(node, ctx):
            return False
        loop = self._loop(node, ctx)
        # Only the batch loop: one that also runs backward() (not a loop over param groups).
        return loop is not None and any(
            method_name(call) == "backward" for call in ctx.nodes_within(loop, cst.Call)
        )

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        loop = self._loop(node, ctx)
        assert loop is not None and isinstance(loop.body, cst.IndentedBlock)
        remaining = [statement for statement in loop.body.body if statement is not node]
        if not remaining:
            remaining = [cst.SimpleStatementLine([cst.Pass()])]
        shortened = loop.with_changes(body=loop.body.with_changes(body=remaining))
        moved = node.with_changes(leading_lines=())
        return {loop: cst.FlattenSentinel([shortened, moved])}


class DetachHidden(Operator):
    """Add ``.detach()`` to an intermediate activation inside a module's ``forward``.

    Bug: ``x = self.fc1(x)`` becomes ``x = self.fc1(x).detach()`` (a leftover from
    logging, a stop-gradient in the wrong place, a truncated-BPTT idiom misapplied).
    Impact: the gradient stops at the detached tensor, so every layer before it keeps its
    initial weights while the layers after it still train: the loss falls, but only as far
    as a model on frozen random features allows (a worse plateau, lower val accuracy).
    Sites are assignments in ``forward`` that take a layer's output and feed another
    layer, so each cut is distinct and the output keeps requiring grad (no crash). Fix: remove the ``.detach()``.
    Check: a params-changed check per layer after one step (early layers do not move),
    or per-layer gradient norms (exactly zero before the cut).
    """

    name = "detach_hidden"
    category = "gradient"
    summary = "Detach an intermediate activation in forward(): earlier layers stop learning."
    expected = "degrades"
    node_types = (cst.Assign,)
    examples = (
        Example(
            before=(
                "class Net(nn.Module):\n    def forward(self, x):\n        x = self.fc1(x)\n"
                "        return self.fc2(x)\n"
            ),
            after=(
                "class Net(nn.Module):\n    def forward(self, x):\n        x = self.fc1(x).detach()\n"
                "        return self.fc2(x)\n"
            ),
        ),
        Example(
            before=(
                "class Block(torch.nn.Module):\n    def forward(self, x):\n"
                "        h = x + self.attn(x)\n        return self.proj(h)\n"
            ),
            after=(
                "class Block(torch.nn.Module):\n    def forward(self, x):\n"
                "        h = (x + self.attn(x)).detach()\n        return self.proj(h)\n"
            ),
        ),
        Example(
            before=(
                "class RNN(nn.Module):\n    def forward(self, x):\n"
                "        out, _ = self.lstm(self.embed(x))\n        last = out[:, -1]\n"
                "        return self.head(last)\n"
            ),
            after=(
                "class RNN(nn.Module):\n    def forward(self, x):\n"
                "        out, _ = self.lstm(self.embed(x))\n        last = out[:, -1].detach()\n"
                "        return self.head(last)\n"
            ),
        ),
    )
    non_examples = (
        # The last layer's output: detaching it would leave nothing to train (a crash).
        "class Net(nn.Module):\n    def forward(self, x):\n        x = self.fc(x)\n        return x\n",
        # The input: detaching it cuts no layer.
        "class Net(nn.Module):\n    def forward(self, x):\n        x = x.flatten(1)\n"
        "        return self.fc(x)\n",
        # A parameter-free module on the input cuts nothing either.
        "class Net(nn.Module):\n    def __init__(self):\n        self.drop = nn.Dropout(0.1)\n"
        "    def forward(self, x):\n        x = self.drop(x)\n        return self.fc(x)\n",
        # Not an nn.Module.
        "class Helper:\n    def forward(self, x):\n        x = self.fc1(x)\n        return self.fc2(x)\n",
        # Not a tensor: sizes and an LSTM's (output, state) tuple have no .detach().
        "class Net(nn.Module):\n    def __init__(self):\n        self.lstm = nn.LSTM(4, 4)\n"
        "    def forward(self, x):\n        n = x.size(0)\n        out = self.lstm(x)\n"
        "        return self.fc(out[0])[:n]\n",
        # Only a parameter-free module after the cut.
        "class Net(nn.Module):\n    def __init__(self):\n        self.act = nn.ReLU()\n"
        "    def forward(self, x):\n        x = self.fc(x)\n        return self.act(x)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        assert isinstance(node, cst.Assign)
        forward = _forward_of(node, ctx)
        if forward is None or len(node.targets) != 1:
            return False
        target = node.targets[0].target
        if not isinstance(target, cst.Name) or not _tensor_valued(node.value, forward, ctx):
            return False
        flow = _ForwardFlow(forward, ctx)
        return flow.at_layer_output(node) and flow.feeds_a_layer(node, target.value)

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        assert isinstance(node, cst.Assign)
        return node.with_changes(value=method_call(node.value, "detach"))


# Modules without parameters: a detach right before one of them cuts nothing new.
_PARAMETER_FREE = frozenset(
    {
        "ReLU",
        "ReLU6",
        "GELU",
        "SiLU",
        "Mish",
        "Tanh",
        "Sigmoid",
        "LeakyReLU",
        "ELU",
        "SELU",
        "Softplus",
        "Softmax",
        "LogSoftmax",
        "Hardtanh",
        "Hardswish",
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Dropout3d",
        "AlphaDropout",
        "Identity",
        "Flatten",
        "Unflatten",
        "MaxPool1d",
        "MaxPool2d",
        "MaxPool3d",
        "AvgPool1d",
        "AvgPool2d",
        "AvgPool3d",
        "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d",
        "AdaptiveMaxPool1d",
        "AdaptiveMaxPool2d",
        "Upsample",
    }
)
# Modules that return tuples: ``.detach()`` on their result would crash.
_TUPLE_RETURNING = frozenset({"LSTM", "GRU", "RNN", "MultiheadAttention"})
# Calls whose result is not a tensor (or not a single one).
_NON_TENSOR_METHODS = frozenset(
    {"size", "dim", "numel", "item", "tolist", "chunk", "split", "unbind", "topk", "sort"}
)
_NON_TENSOR_FUNCTIONS = frozenset(
    {"len", "int", "float", "bool", "str", "tuple", "list", "dict", "range", "zip", "enumerate"}
)


def _forward_of(node: cst.CSTNode, ctx: Context) -> cst.FunctionDef | None:
    """The ``forward`` method of an nn.Module subclass that directly encloses ``node``."""
    function = ctx.enclosing_function(node)
    if function is None or function.name.value != "forward":
        return None
    cls = ctx.parent(ctx.parent(function))
    if isinstance(cls, cst.ClassDef) and is_module_class(cls, ctx):
        return function
    return None


def _submodule_class(attr: str, forward: cst.FunctionDef, ctx: Context) -> str | None:
    """Class name assigned to ``self.<attr>`` in the module class holding ``forward``."""
    cls = ctx.parent(ctx.parent(forward))
    assert cls is not None
    for assign in ctx.nodes_within(cls, cst.Assign):
        assigns_attr = any(dotted_name(t.target) == f"self.{attr}" for t in assign.targets)
        if assigns_attr and isinstance(assign.value, cst.Call):
            return callee_name(assign.value)
    return None


def _tensor_valued(value: cst.BaseExpression, forward: cst.FunctionDef, ctx: Context) -> bool:
    if isinstance(value, cst.BinaryOperation | cst.Subscript):
        return True
    if not isinstance(value, cst.Call):
        return False
    if method_name(value) in _NON_TENSOR_METHODS:
        return False
    if isinstance(value.func, cst.Name) and value.func.value in _NON_TENSOR_FUNCTIONS:
        return False
    layer = _self_attr(value)
    return layer is None or _submodule_class(layer, forward, ctx) not in _TUPLE_RETURNING


def _self_attr(call: cst.Call) -> str | None:
    """``self.fc1(...)`` / ``self.blocks[i](...)`` -> ``fc1`` / ``blocks``."""
    func = call.func
    while isinstance(func, cst.Subscript):
        func = func.value
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
    ):
        return func.attr.value
    return None


class _ForwardFlow:
    """Which assignments of a ``forward`` sit downstream/upstream of a parametrised layer."""

    def __init__(self, forward: cst.FunctionDef, ctx: Context) -> None:
        self.forward = forward
        self.ctx = ctx
        statements: list[cst.CSTNode] = [
            *ctx.nodes_within(forward, cst.Assign),
            *ctx.nodes_within(forward, cst.AugAssign),
            *ctx.nodes_within(forward, cst.Return),
        ]
        statements = [s for s in statements if ctx.enclosing_function(s) is forward]
        self.statements = sorted(statements, key=lambda s: start_of(s, ctx))
        # Names bound by ``for layer in self.layers:``: calling them applies a layer.
        self.layer_names: set[str] = set()
        for loop in ctx.nodes_within(forward, cst.For):
            if "self" in identifiers_in(loop.iter, ctx):
                self.layer_names |= identifiers_in(loop.target, ctx)

    def _applies_layer(self, expr: cst.CSTNode) -> bool:
        for call in self.ctx.nodes_within(expr, cst.Call):
            attr = _self_attr(call)
            if attr is not None and _submodule_class(attr, self.forward, self.ctx) not in (
                _PARAMETER_FREE
            ):
                return True
            if isinstance(call.func, cst.Name) and call.func.value in self.layer_names:
                return True
        return False

    def _expression(self, statement: cst.CSTNode) -> cst.CSTNode | None:
        return getattr(statement, "value", None)

    def _targets(self, statement: cst.CSTNode) -> set[str]:
        if isinstance(statement, cst.Assign):
            found: set[str] = set()
            for target in statement.targets:
                found |= identifiers_in(target.target, self.ctx)
            return found
        if isinstance(statement, cst.AugAssign):
            return identifiers_in(statement.target, self.ctx)
        return set()

    def at_layer_output(self, site: cst.Assign) -> bool:
        """The value is a layer's output, so a detach here cuts that layer and all before it.

        Either the value applies a layer itself (``x = F.relu(self.fc1(x))``) or it is the
        first use of a layer output that was unpacked from a tuple and so could not be
        detached where it was made (``out, _ = self.lstm(x)`` then ``last = out[:, -1]``).
        Assignments that only continue from a detachable output (``x = self.dropout(x)``
        after ``x = self.fc1(x)``) cut the same layers again and are not sites.
        """
        if self._applies_layer(site.value):
            return True
        unpacked: set[str] = set()
        for statement in self.statements:
            if statement is site:
                return bool(identifiers_in(site.value, self.ctx) & unpacked)
            targets = self._targets(statement)
            expression = self._expression(statement)
            unpacked -= targets  # rebinding a name ends its life as an unpacked output
            if (
                isinstance(statement, cst.Assign)
                and not isinstance(statement.targets[0].target, cst.Name)
                and expression is not None
                and self._applies_layer(expression)
            ):
                unpacked |= targets
        return False

    def feeds_a_layer(self, site: cst.Assign, name: str) -> bool:
        """The detached value still flows into a parametrised layer (so the output needs grad)."""
        in_loop = self.ctx.enclosing(site, (cst.For, cst.While))
        if (
            in_loop is not None
            and self.ctx.within(self.forward, in_loop)
            and name in identifiers_in(site.value, self.ctx)
            and self._applies_layer(site.value)
        ):
            return True  # the next iteration feeds it to the layer again
        flow = {name}
        after = False
        for statement in self.statements:
            if statement is site:
                after = True
                continue
            expression = self._expression(statement)
            if not after or expression is None:
                continue
            if identifiers_in(expression, self.ctx) & flow:
                if self._applies_layer(expression):
                    return True
                flow |= self._targets(statement)
        return False


class LossFromItem(Operator):
    """Rebuild the loss from its Python value: ``torch.tensor(loss.item(), requires_grad=True)``.

    Bug: someone converts the loss to a number (for logging, or to "fix" a dtype/device
    complaint) and wraps it back into a fresh tensor so that ``backward()`` still runs.
    Impact: the new tensor is a leaf with no history, so ``backward()`` succeeds but no
    gradient reaches the model; ``step()`` skips every parameter, the loss curve is flat
    at its initial value and nothing crashes. Fix: call ``backward()`` on the loss tensor
    the criterion returned; take ``.item()`` only for logging. Check: a params-changed
    check after one step, or the gradient-norm log (model gradients are ``None``).
    """

    name = "loss_from_item"
    category = "gradient"
    summary = (
        "Rebuild the loss from loss.item(): backward() runs but no gradient reaches the model."
    )
    expected = "breaks_training"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch\nloss = criterion(logits, y)\nloss.backward()\n",
            after=(
                "import torch\nloss = torch.tensor(criterion(logits, y).item(), requires_grad=True)\n"
                "loss.backward()\n"
            ),
        ),
        Example(
            before=(
                "import torch.nn.functional as F\n"
                "loss = F.cross_entropy(out, y) / accum_steps\nscaler.scale(loss).backward()\n"
            ),
            after=(
                "import torch.nn.functional as F\n"
                "loss = F.cross_entropy(out, y).detach().requires_grad_() / accum_steps\n"
                "scaler.scale(loss).backward()\n"
            ),
        ),
    )
    non_examples = (
        # Validation loss: never back-propagated.
        "val_loss = criterion(model(x), y)\ntotal += val_loss.item()\n",
        "with torch.no_grad():\n    loss = criterion(out, y)\nloss.backward()\n",
        "out = model(x)\nout.backward()\n",
    )

    def _assignment(self, node: cst.Call, ctx: Context) -> cst.Assign | None:
        parent = ctx.parent(node)
        if (
            isinstance(parent, cst.BinaryOperation)
            and parent.left is node
            and isinstance(parent.operator, cst.Divide)
        ):
            parent = ctx.parent(parent)
        if (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            return parent
        return None

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        assert isinstance(node, cst.Call)
        if not looks_like_loss_call(node, ctx) or in_no_grad(node, ctx):
            return False
        assign = self._assignment(node, ctx)
        if assign is None:
            return False
        target = assign.targets[0].target
        assert isinstance(target, cst.Name)
        return _reaches_backward(ctx, assign, target.value)

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        torch_name = module_alias(ctx, "torch", at=node)
        code = ctx.code(node)
        if torch_name is None:
            # Without a torch import in scope, the same bug spelled with tensor methods.
            return cst.parse_expression(f"{code}.detach().requires_grad_()")
        return cst.parse_expression(f"{torch_name}.tensor({code}.item(), requires_grad=True)")


def _reaches_backward(ctx: Context, assign: cst.Assign, name: str) -> bool:
    """Does the value bound to ``name`` flow (through later assignments) into ``backward()``?"""
    flow = {name}
    for later in ctx.nodes(cst.Assign):
        if later is assign or not same_scope(later, assign, ctx):
            continue
        if starts_before(assign, later, ctx) and identifiers_in(later.value, ctx) & flow:
            for target in later.targets:
                if isinstance(target.target, cst.Name):
                    flow.add(target.target.value)
    return any(
        starts_before(assign, call, ctx) and identifiers_in(call, ctx) & flow
        for call in _backward_calls(ctx, assign)
    )


class AccumulateLossGraph(Operator):
    """Accumulate the loss tensor instead of its value: ``total_loss += loss``.

    Bug: ``.item()`` is dropped from the running-loss sum. Impact: ``total_loss`` becomes a
    tensor that references every step's autograd graph, so activations of all steps of
    the epoch stay alive: memory grows linearly with the step count (an OOM on a GPU run
    with a long epoch) and steps slow down; the logged number is now a tensor. Training
    itself is unaffected. Fix: accumulate ``loss.item()`` (or ``loss.detach()``). Check: a
    memory watch over steps (steady growth within an epoch), or
    ``torch.cuda.max_memory_allocated`` in a GPU run.
    """

    name = "accumulate_loss_graph"
    category = "gradient"
    summary = "total_loss += loss (no .item()): every step's graph stays alive, memory grows."
    expected = "cost_only"
    node_types = (cst.AugAssign,)
    examples = (
        Example(
            before="loss.backward()\ntotal_loss += loss.item()\n",
            after="loss.backward()\ntotal_loss += loss\n",
        ),
        Example(
            before=(
                "def train(loader):\n    for x, y in loader:\n        loss = criterion(model(x), y)\n"
                "        loss.backward()\n        total_loss += loss.item() * x.size(0)\n"
            ),
            after=(
                "def train(loader):\n    for x, y in loader:\n        loss = criterion(model(x), y)\n"
                "        loss.backward()\n        total_loss += loss * x.size(0)\n"
            ),
        ),
    )
    non_examples = (
        # Validation: no graph is recorded, so nothing leaks.
        "loss.backward()\nwith torch.no_grad():\n    val_loss += loss.item()\n",
        "correct += (pred == y).sum().item()\n",
        "total_loss += loss.detach().item()\nloss.backward()\n",
        "total_loss -= loss.item()\nloss.backward()\n",
    )

    def _item_call(self, node: cst.AugAssign, ctx: Context) -> cst.Call | None:
        if not isinstance(node.operator, cst.AddAssign) or in_no_grad(node, ctx):
            return None
        candidates: list[cst.BaseExpression] = [node.value]
        while candidates:
            expr = candidates.pop()
            if isinstance(expr, cst.BinaryOperation):
                candidates.extend([expr.left, expr.right])
            elif isinstance(expr, cst.Call) and method_name(expr) == "item" and not expr.args:
                assert isinstance(expr.func, cst.Attribute)
                receiver = dotted_name(expr.func.value)
                if receiver is not None and any(
                    receiver in dotted_names_in(call, ctx) for call in _backward_calls(ctx, node)
                ):
                    return expr
        return None

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        assert isinstance(node, cst.AugAssign)
        return self._item_call(node, ctx) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        assert isinstance(node, cst.AugAssign)
        item = self._item_call(node, ctx)
        assert item is not None and isinstance(item.func, cst.Attribute)
        return node.deep_replace(item, item.func.value)


class OptimizerPartialParams(Operator):
    """Hand the optimizer only the last parameters: ``list(model.parameters())[-2:]``.

    Bug: the optimizer is built over a subset of the model (a fine-tuning recipe copied
    into from-scratch training, a head-only optimizer, a forgotten parameter group).
    Impact: only the last layer's weight and bias are updated; everything before it
    keeps its random initialisation, so the loss falls to the plateau of a linear model
    on random features and validation accuracy stays well below the reference. Fix: pass
    ``model.parameters()`` (or all parameter groups) to the optimizer. Check: a
    params-changed check per layer after one step (earlier layers do not move), or
    compare the number of parameters in ``optimizer.param_groups`` with the model's.
    """

    name = "optimizer_partial_params"
    category = "gradient"
    summary = "Give the optimizer only the last layer's parameters: the rest never trains."
    expected = "degrades"
    node_types = (cst.Call,)
    parameters = {"keep": Param(2, "trailing parameter tensors the optimizer still gets")}
    examples = (
        Example(
            before="optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n",
            after="optimizer = torch.optim.Adam(list(model.parameters())[-2:], lr=1e-3)\n",
        ),
        Example(
            before=(
                "from torch import optim\n"
                "self.opt = optim.SGD(params=self.model.parameters(), lr=0.1, momentum=0.9)\n"
            ),
            after=(
                "from torch import optim\n"
                "self.opt = optim.SGD(params=list(self.model.parameters())[-1:], lr=0.1, momentum=0.9)\n"
            ),
            params={"keep": 1},
        ),
    )
    non_examples = (
        "n = sum(p.numel() for p in model.parameters())\n",
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
        "optimizer = torch.optim.Adam(model.parameters(recurse=False))\n",
        "scheduler = torch.optim.lr_scheduler.StepLR(model.parameters(), 1)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        assert isinstance(node, cst.Call)
        if method_name(node) != "parameters" or node.args:
            return False
        arg = ctx.parent(node)
        constructor = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(constructor, cst.Call) or not isinstance(arg, cst.Arg):
            return False
        if find_arg(constructor, "params", 0) is not arg:
            return False
        return constructor_kind(constructor, ctx) == "optimizer"

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        return cst.parse_expression(f"list({ctx.code(node)})[-{self.params['keep']}:]")


class DropGradClipping(Operator):
    """Delete the gradient-clipping call (``clip_grad_norm_`` / ``clip_grad_value_``).

    Bug: clipping is removed (a refactor, a copied loop without it). Impact: on a small,
    well-conditioned loop at a sane learning rate nothing changes; where clipping was
    holding the run together (RNNs, transformers, high learning rates, the first steps
    with a large loss) a gradient spike produces a huge update: loss spikes, then
    divergence or NaN. Fix: clip after ``backward()`` (after ``scaler.unscale_`` under AMP)
    and before ``step()``. Check: the gradient-norm log (spikes far above the former
    ``max_norm``), loss spikes in the train curve.
    """

    name = "drop_grad_clipping"
    category = "gradient"
    summary = "Remove clip_grad_norm_/clip_grad_value_: gradient spikes pass unclipped."
    expected = "silent"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "loss.backward()\ntorch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
                "optimizer.step()\n"
            ),
            after="loss.backward()\noptimizer.step()\n",
        ),
        Example(
            before=(
                "from torch.nn.utils import clip_grad_value_\nloss.backward()\n"
                "clip_grad_value_(model.parameters(), 0.5)\n"
            ),
            after="from torch.nn.utils import clip_grad_value_\nloss.backward()\n",
        ),
    )
    non_examples = (
        # The norm is used afterwards: removing the line would break the script.
        "grad_norm = clip_grad_norm_(model.parameters(), 1.0)\nprint(grad_norm)\n",
        "x = torch.clamp(x, -1, 1)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return expression_call(node) is not None and _clip_call(node) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()


class ClipBeforeBackward(Operator):
    """Move gradient clipping above ``loss.backward()`` in the same block.

    Bug: the clip runs before this step's gradients exist. Impact: it clips the cleared
    (``None`` or zero) gradients left by ``zero_grad()``, i.e. nothing, and the fresh
    gradients reach ``step()`` unclipped: the same as no clipping at all, which is
    harmless on a tame loop and a loss spike or divergence where clipping mattered (RNNs,
    high learning rates). The returned norm, if logged, reads zero. Fix: clip after
    ``backward()`` (and ``scaler.unscale_``) and before ``step()``. Check: log the norm
    that the clipping call returns (zero every step) next to the gradient norm at
    ``step()`` (above ``max_norm``).
    """

    name = "clip_before_backward"
    category = "gradient"
    summary = "Move gradient clipping before loss.backward(): it clips stale/empty gradients."
    expected = "silent"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "optimizer.zero_grad()\nloss.backward()\n"
                "nn.utils.clip_grad_norm_(model.parameters(), 1.0)\noptimizer.step()\n"
            ),
            after=(
                "optimizer.zero_grad()\nnn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                "loss.backward()\noptimizer.step()\n"
            ),
        ),
        Example(
            before=(
                "scaler.scale(loss).backward()\nscaler.unscale_(opt)\n"
                "norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            ),
            after=(
                "norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                "scaler.scale(loss).backward()\nscaler.unscale_(opt)\n"
            ),
        ),
    )
    non_examples = (
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\nloss.backward()\n",
        "loss.backward()\nif clip:\n    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return _clip_call(node) is not None and _nearest_preceding_backward(ctx, node) is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        backward = _nearest_preceding_backward(ctx, node)
        assert backward is not None
        return move_before(node, backward)


def _accumulation_divisor(expr: cst.BaseExpression) -> bool:
    """``accum_steps``, ``self.grad_accum``, ``args.gradient_accumulation_steps``..."""
    name = dotted_name(expr)
    return name is not None and "accum" in name.rsplit(".", 1)[-1].lower()


class UnscaledGradAccumulation(Operator):
    """Drop the ``/ accum_steps`` that scales the loss under gradient accumulation.

    Bug: gradients of ``accum_steps`` micro-batches are summed, not averaged. Impact: the
    accumulated gradient is ``accum_steps`` times too large: with SGD the effective
    learning rate is multiplied by ``accum_steps`` (oscillation or divergence at a tuned
    rate); Adam is nearly scale invariant, so there the bug is mostly silent (gradient
    clipping and weight decay then behave differently). Fix: divide the loss by the
    number of accumulation steps before ``backward()``. Check: the gradient-norm log
    (``accum_steps`` times the reference), or compare train curves with accumulation 1.
    """

    name = "unscaled_grad_accumulation"
    category = "gradient"
    summary = "Remove loss / accum_steps: accumulated gradients are accum_steps times too large."
    expected = "degrades"
    node_types = (cst.BinaryOperation, cst.AugAssign)
    examples = (
        Example(
            before="loss = criterion(out, y)\nloss = loss / accum_steps\nloss.backward()\n",
            after="loss = criterion(out, y)\nloss.backward()\n",
        ),
        Example(
            before="loss = criterion(out, y) / self.accum_steps\nloss.backward()\n",
            after="loss = criterion(out, y)\nloss.backward()\n",
        ),
        Example(
            before="scaler.scale(loss / iters_to_accumulate).backward()\n",
            after="scaler.scale(loss).backward()\n",
        ),
        Example(
            before="loss /= args.grad_accum\nloss.backward()\n",
            after="loss.backward()\n",
        ),
    )
    non_examples = (
        "lr = base_lr / accum_steps\n",
        "loss = loss / batch_size\n",
        "loss = loss * accum_steps\n",
    )

    def _about_loss(self, expr: cst.CSTNode, ctx: Context) -> bool:
        code = ctx.code(expr).lower()
        return "loss" in code or "criterion" in code

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if isinstance(node, cst.AugAssign):
            return (
                isinstance(node.operator, cst.DivideAssign)
                and _accumulation_divisor(node.value)
                and self._about_loss(node.target, ctx)
            )
        assert isinstance(node, cst.BinaryOperation)
        if not isinstance(node.operator, cst.Divide) or not _accumulation_divisor(node.right):
            return False
        statement = ctx.statement_of(node)
        return self._about_loss(node.left, ctx) or (
            statement is not None and _is_backward(statement)
        )

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        if isinstance(node, cst.AugAssign):
            return {node: cst.RemoveFromParent()}
        assert isinstance(node, cst.BinaryOperation)
        parent = ctx.parent(node)
        if (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(node.left, cst.Name)
            and dotted_name(parent.targets[0].target) == node.left.value
        ):
            return {
                parent: cst.RemoveFromParent()
            }  # ``loss = loss / n`` would become ``loss = loss``
        return {node: node.left}


class DropHiddenDetach(Operator):
    """Remove the detach of a recurrent hidden state carried across batches.

    Bug: truncated back-propagation through time needs ``hidden = hidden.detach()`` (or
    ``repackage_hidden(hidden)``) at each batch; without it the new graph links to the
    previous batch's graph. Impact: the second ``backward()`` reaches into the previous,
    already freed graph and raises "Trying to backward through the graph a second
    time"; the tempting "fix" ``retain_graph=True`` instead makes memory and step time
    grow with every batch. Fix: detach the carried state once per batch. Check: the
    crash itself at step two, or a memory watch / time-per-step log when retained.
    """

    name = "drop_hidden_detach"
    category = "gradient"
    summary = "Remove hidden = hidden.detach() in a TBPTT loop: backward reaches freed graphs."
    expected = "crash"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "for x, y in batches:\n    hidden = repackage_hidden(hidden)\n"
                "    out, hidden = model(x, hidden)\n    loss = criterion(out, y)\n"
                "    loss.backward()\n"
            ),
            after=(
                "for x, y in batches:\n"
                "    out, hidden = model(x, hidden)\n    loss = criterion(out, y)\n"
                "    loss.backward()\n"
            ),
        ),
        Example(
            before=(
                "for x, y in batches:\n    out, (h, c) = self.lstm(x, (h, c))\n"
                "    h, c = h.detach(), c.detach()\n    loss.backward()\n"
            ),
            after="for x, y in batches:\n    out, (h, c) = self.lstm(x, (h, c))\n    loss.backward()\n",
        ),
    )
    non_examples = (
        # Not carried across iterations of a loop.
        "hidden = hidden.detach()\n",
        "for x in batches:\n    target = output.detach()\n",
        "for x in batches:\n    with torch.no_grad():\n        h = h.detach()\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        assign = single_assignment(node)
        if assign is None:
            return False
        if ctx.enclosing(node, (cst.For, cst.While)) is None or in_no_grad(node, ctx):
            return False
        target = assign.targets[0].target
        parts = [e.value for e in target.elements] if isinstance(target, cst.Tuple) else [target]
        state = [dotted_name(part) for part in parts]
        if None in state or not set(state) <= dotted_names_in(assign.value, ctx):
            return False  # only re-binding the same state to its detached self
        return any(
            "detach" in (callee_name(call) or "") or "repackage" in (callee_name(call) or "")
            for call in ctx.nodes_within(assign.value, cst.Call)
        )

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()
