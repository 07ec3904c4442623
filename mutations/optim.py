"""Optimization bugs: learning rate, schedule, optimizer choice and state, batch size."""

from __future__ import annotations

import re

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Operator, Param, Replacement
from mutator.semantics import (
    SCHEDULER_MODULE,
    as_factor,
    callee_name,
    closed_args,
    dotted_name,
    expression_call,
    find_arg,
    has_star_args,
    is_data_loader,
    is_scheduler_step,
    is_training_loader,
    mentions,
    method_name,
    method_statement_receiver,
    number_literal,
    number_value,
    optimizer_class,
    per_module,
    positional_args,
    receiver_kind,
    renamed_callee,
    resolve,
    single_assignment,
    with_arg_value,
    with_keyword,
    without_arg,
)

# Learning rates PyTorch uses when ``lr`` is not given.
_DEFAULT_LR = {
    "Adam": 1e-3,
    "AdamW": 1e-3,
    "SGD": 1e-3,
    "RMSprop": 1e-2,
    "Adagrad": 1e-2,
    "Adadelta": 1.0,
    "Adamax": 2e-3,
    "NAdam": 2e-3,
    "RAdam": 1e-3,
    "ASGD": 1e-2,
    "Rprop": 1e-2,
    "SparseAdam": 1e-3,
    "LBFGS": 1.0,
}


def _optimizer_step(statement: cst.CSTNode, ctx: Context) -> bool:
    """``optimizer.step()``, ``self.opt.step()``, ``scaler.step(optimizer)``: not a scheduler."""
    stepped = method_statement_receiver(statement, "step")
    return stepped is not None and receiver_kind(stepped, ctx) != "scheduler"


def _optimizer_call(node: cst.CSTNode, ctx: Context) -> tuple[cst.Call, str] | None:
    """(call, class) of an optimizer constructor whose arguments are all visible: with
    ``*args``/``**kwargs`` any argument could hide there, so no rewrite is trustworthy."""
    optimizer = optimizer_class(node, ctx)
    if optimizer is None or not isinstance(node, cst.Call) or has_star_args(node):
        return None
    return node, optimizer


def _times(expr: cst.BaseExpression, factor: float) -> cst.BaseExpression:
    """``expr`` multiplied by ``factor``: a computed literal for a literal, else ``expr * k``."""
    value = number_value(expr)
    if value is not None:
        return number_literal(value * factor, integer=isinstance(expr, cst.Integer))
    return cst.BinaryOperation(as_factor(expr), cst.Multiply(), _factor_literal(factor))


def _factor_literal(factor: float) -> cst.BaseExpression:
    return number_literal(factor, integer=factor == int(factor))


# -- learning rate ------------------------------------------------------------------------------


class ScaleLr(Operator):
    """Multiply the learning rate given to the optimizer by ``factor``.

    Bug: a learning rate off by orders of magnitude (a wrong unit, ``1e-1`` typed for
    ``1e-3``, a value tuned for another optimizer or batch size). Impact: too high (x100)
    and the loss oscillates, spikes or turns NaN within a few steps; too low (x0.01) and
    the loss barely moves for the whole budget, which looks like a model that cannot
    learn. An optimizer without ``lr=`` gets its PyTorch default scaled. Fix: sweep the
    learning rate on a log scale and pick from the early-loss curve; rescale when the
    batch size or optimizer changes. Check: an LR range test, or overfit one batch (too
    low: it does not; too high: it diverges); log the update/weight ratio (~1e-3 is sane).
    """

    name = "scale_lr"
    category = "optim"
    summary = "Multiply the optimizer's learning rate by a factor (x100 by default, or x0.01)."
    expected = "breaks_training"
    node_types = (cst.Call,)
    parameters = {"factor": Param(100.0, "multiplier applied to the learning rate")}
    variants = ({"factor": 0.01},)
    examples = (
        Example(
            before="import torch\nopt = torch.optim.Adam(model.parameters(), lr=1e-3)\n",
            after="import torch\nopt = torch.optim.Adam(model.parameters(), lr=0.1)\n",
        ),
        Example(
            before="from torch import optim\nopt = optim.AdamW(params, lr=args.lr)\n",
            after="from torch import optim\nopt = optim.AdamW(params, lr=args.lr * 100)\n",
        ),
        Example(
            before="from torch.optim import SGD\nopt = SGD(params, 0.1, momentum=0.9)\n",
            after="from torch.optim import SGD\nopt = SGD(params, 0.001, momentum=0.9)\n",
            params={"factor": 0.01},
        ),
        Example(
            before="import torch.optim as optim\nopt = optim.RMSprop(net.parameters())\n",
            after="import torch.optim as optim\nopt = optim.RMSprop(net.parameters(), lr=1.0)\n",
        ),
        Example(
            before="import torch\nopt = torch.optim.Adam(ps, lr=base_lr + extra)\n",
            after="import torch\nopt = torch.optim.Adam(ps, lr=(base_lr + extra) * 0.01)\n",
            params={"factor": 0.01},
        ),
    )
    non_examples = (
        "import torch\nsched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1)\n",
        "lr = 1e-3\n",
        "import torch\nopt = torch.optim.Adam(model.parameters(), **cfg)\n",
        "run(model, lr=1e-3)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        found = _optimizer_call(node, ctx)
        return found is not None and (
            find_arg(found[0], "lr", 1) is not None or found[1] in _DEFAULT_LR
        )

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        assert isinstance(node, cst.Call)
        factor = self.params["factor"]
        lr = find_arg(node, "lr", 1)
        if lr is None:
            default = _DEFAULT_LR[optimizer_class(node, ctx) or ""]
            return with_keyword(node, "lr", number_literal(default * factor))
        return with_arg_value(node, lr, _times(lr.value, factor))


# -- warmup -------------------------------------------------------------------------------------

_WARMUP = re.compile(r"warm", re.IGNORECASE)
_WARMUP_CONSTANT = re.compile(r"warmup", re.IGNORECASE)
_DIVIDES = (cst.Divide, cst.FloorDivide, cst.Modulo)


def _mentions_warmup(root: cst.CSTNode, ctx: Context) -> bool:
    return any(_WARMUP.search(name.value) for name in ctx.nodes_within(root, cst.Name))


def _scheduler_named(call: cst.Call, ctx: Context, names: frozenset[str]) -> bool:
    resolved = resolve(call.func, ctx, strict=False).names
    if resolved:
        return any(
            q.startswith(SCHEDULER_MODULE) and q.rsplit(".", 1)[-1] in names for q in resolved
        )
    return callee_name(call) in names


def _is_ramp(expr: cst.BaseExpression, ctx: Context) -> bool:
    """Does ``expr`` divide by the warmup length (``(step + 1) / warmup_steps``)? A numerator
    that mentions it too (``(step - warmup) / (total - warmup)``) is post-warmup progress."""
    return any(
        isinstance(division.operator, cst.Divide)
        and _mentions_warmup(division.right, ctx)
        and not _mentions_warmup(division.left, ctx)
        for division in ctx.nodes_within(expr, cst.BinaryOperation)
    )


def _warmup_comparison(test: cst.BaseExpression, ctx: Context) -> bool:
    """``step < warmup_steps`` / ``warmup > step``: true while warming up."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if isinstance(target.operator, (cst.LessThan, cst.LessThanEqual)):
        return _mentions_warmup(target.comparator, ctx)
    if isinstance(target.operator, (cst.GreaterThan, cst.GreaterThanEqual)):
        return _mentions_warmup(test.left, ctx)
    return False


def _with_parens_of(expr: cst.BaseExpression, owner: cst.BaseExpression) -> cst.BaseExpression:
    if owner.lpar and not expr.lpar:
        return expr.with_changes(lpar=owner.lpar, rpar=owner.rpar)
    return expr


def _min_one_edits(call: cst.Call, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
    """``min(1.0, (step + 1) / warmup)`` -> ``1.0``; ``min(...) * decay`` -> ``decay``."""
    if callee_name(call) != "min" or not isinstance(call.func, cst.Name) or len(call.args) != 2:
        return None
    if any(arg.keyword is not None or arg.star for arg in call.args):
        return None
    ones = [arg for arg in call.args if number_value(arg.value) == 1.0]
    if len(ones) != 1:
        return None
    ramp = call.args[1] if ones[0] is call.args[0] else call.args[0]
    if not _is_ramp(ramp.value, ctx):
        return None
    parent = ctx.parent(call)
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Multiply):
        other = parent.right if parent.left is call else parent.left
        return {parent: _with_parens_of(other, parent)}
    return {call: ones[0].value.with_changes(lpar=(), rpar=())}


def _branch_edits(node: cst.If | cst.IfExp, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
    """Drop the warming-up branch of ``if step < warmup: ...`` (or of ``a if s < w else b``)."""
    if not _warmup_comparison(node.test, ctx):
        return None
    if isinstance(node, cst.IfExp):
        return {node: _with_parens_of(node.orelse, node)}
    if isinstance(node.orelse, cst.If):
        return {node: node.orelse.with_changes(leading_lines=node.leading_lines)}
    if isinstance(node.orelse, cst.Else):
        body = node.orelse.body
        if not isinstance(body, cst.IndentedBlock):
            return None
        statements = list(body.body)
        statements[0] = statements[0].with_changes(leading_lines=node.leading_lines)
        return {node: cst.FlattenSentinel(statements)}
    # Without an else, the branch must end the function (return) or only set the LR, so
    # that deleting it leaves valid code.
    sets_lr = any(
        a.attr.value == "param_groups" for a in ctx.nodes_within(node.body, cst.Attribute)
    )
    if ctx.nodes_within(node.body, cst.Return) or sets_lr:
        return {node: cst.RemoveFromParent()}
    return None


def _scheduler_argument_edits(
    call: cst.Call, ctx: Context
) -> dict[cst.CSTNode, Replacement] | None:
    """``get_*_schedule_with_warmup(opt, num_warmup_steps=100)`` -> 0;
    ``LinearLR(opt, start_factor=0.1)`` (a ramp up) -> ``start_factor=1.0``."""
    if "with_warmup" in (callee_name(call) or ""):
        warmup = find_arg(call, "num_warmup_steps", 1)
        if warmup is None or number_value(warmup.value) == 0:
            return None
        return {call: with_arg_value(call, warmup, cst.Integer("0"))}
    if not _scheduler_named(call, ctx, frozenset({"LinearLR"})):
        return None
    start, end = find_arg(call, "start_factor", 1), find_arg(call, "end_factor", 2)
    start_value = number_value(start.value) if start else 1.0 / 3.0
    end_value = number_value(end.value) if end else 1.0
    if start_value is None or end_value is None or start_value >= end_value:
        return None
    flat = number_literal(end_value)
    if start is None:
        return {call: with_keyword(call, "start_factor", flat)}
    return {call: with_arg_value(call, start, flat)}


def _structural_warmup_edits(
    node: cst.CSTNode, ctx: Context
) -> dict[cst.CSTNode, Replacement] | None:
    if isinstance(node, (cst.If, cst.IfExp)):
        return _branch_edits(node, ctx)
    if isinstance(node, cst.Call):
        return _min_one_edits(node, ctx) or _scheduler_argument_edits(node, ctx)
    return None


@per_module
def _has_structural_warmup(ctx: Context) -> bool:
    """Does a schedule (a ramp, a warmup branch, a warmup argument) exist anywhere?"""
    return any(
        _structural_warmup_edits(node, ctx) is not None
        for kind in (cst.Call, cst.If, cst.IfExp)
        for node in ctx.nodes(kind)
    )


def _zero_safe_use(use: cst.Name, ctx: Context) -> bool:
    """Would ``use`` survive the value 0: never a bare divisor, or only behind
    ``max(1, ...)`` or inside ``if step < warmup:`` (never taken at 0)?"""
    child: cst.CSTNode = use
    clamped = False
    for ancestor in ctx.ancestors(use):
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            return True
        if (
            isinstance(ancestor, cst.Call)
            and callee_name(ancestor) == "max"
            and any((number_value(a.value) or 0) > 0 for a in ancestor.args)
        ):
            clamped = True
        if (
            isinstance(ancestor, cst.BinaryOperation)
            and isinstance(ancestor.operator, _DIVIDES)
            and ancestor.right is child
            and not clamped
        ):
            return False
        if (
            isinstance(ancestor, (cst.If, cst.IfExp))
            and ancestor.body is child
            and _warmup_comparison(ancestor.test, ctx)
        ):
            return True
        child = ancestor
    return True


def _constant_warmup(node: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """(name, literal) of ``warmup_steps = 100``, ``self.warmup = 500``, a dataclass field
    ``warmup_steps: int = 100`` or ``add_argument("--warmup-steps", default=100)``."""
    if isinstance(node, cst.Assign) and len(node.targets) == 1:
        target, value = node.targets[0].target, node.value
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    elif isinstance(node, cst.Call) and method_name(node) == "add_argument":
        flag = node.args[0].value if node.args else None
        default = find_arg(node, "default")
        if not isinstance(flag, cst.SimpleString) or default is None:
            return None
        name = str(flag.evaluated_value).lstrip("-").replace("-", "_")
        return (name, default.value) if _is_positive_warmup(name, default.value) else None
    else:
        return None
    name = dotted_name(target)
    if name is None:
        return None
    name = name.rsplit(".", 1)[-1]
    return (name, value) if _is_positive_warmup(name, value) else None


def _is_positive_warmup(name: str, value: cst.BaseExpression) -> bool:
    return bool(_WARMUP_CONSTANT.search(name)) and (number_value(value) or 0) > 0


class DropLrWarmup(Operator):
    """Remove the learning-rate warmup.

    Bug: training starts at the full learning rate. Sites: the ramp of a ``LambdaLR``
    function (``min(1.0, (step + 1) / warmup_steps)`` -> ``1.0``; ``if step < warmup:
    return ...`` deleted), a manual warmup branch, ``num_warmup_steps`` of a
    ``get_*_schedule_with_warmup`` set to 0, a ramping ``LinearLR`` made flat, and, only
    where none of these exists, the warmup constant set to 0 when no unguarded division
    by it would follow. Impact: Adam's second-moment estimates are noisy in the first
    steps, so full-size updates can spike the loss or diverge (transformers, large
    batches); small models usually just train a little less smoothly. Fix: ramp the LR
    up linearly over the first ~1-5% of steps. Check: plot the LR schedule and the loss
    of the first few hundred steps (early spikes, grad-norm bursts).
    """

    name = "drop_lr_warmup"
    category = "optim"
    summary = "Remove the learning-rate warmup: training starts at the full learning rate."
    expected = "degrades"
    node_types = (cst.Call, cst.If, cst.IfExp, cst.Assign, cst.AnnAssign)
    examples = (
        Example(
            before=(
                "from torch.optim.lr_scheduler import LambdaLR\n"
                "sched = LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup_steps))\n"
            ),
            after=(
                "from torch.optim.lr_scheduler import LambdaLR\n"
                "sched = LambdaLR(opt, lambda step: 1.0)\n"
            ),
        ),
        Example(
            before=(
                "import torch\n\ndef lr_lambda(step):\n    if step < warmup_steps:\n"
                "        return step / max(1, warmup_steps)\n    return max(0.0, 1 - step / total)\n\n"
                "sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)\n"
            ),
            after=(
                "import torch\n\ndef lr_lambda(step):\n    return max(0.0, 1 - step / total)\n\n"
                "sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)\n"
            ),
        ),
        Example(
            before=(
                "import math\nfrom torch.optim import lr_scheduler\n"
                "f = lambda s: min(s / WARMUP, 1.0) * 0.5 * (1 + math.cos(math.pi * s / T))\n"
                "sched = lr_scheduler.LambdaLR(opt, lr_lambda=f)\n"
            ),
            after=(
                "import math\nfrom torch.optim import lr_scheduler\n"
                "f = lambda s: 0.5 * (1 + math.cos(math.pi * s / T))\n"
                "sched = lr_scheduler.LambdaLR(opt, lr_lambda=f)\n"
            ),
        ),
        Example(
            before=(
                "for step, batch in enumerate(loader):\n    if step < args.warmup:\n"
                "        for g in opt.param_groups:\n            g['lr'] = lr * (step + 1) / args.warmup\n"
                "    train_step(batch)\n"
            ),
            after="for step, batch in enumerate(loader):\n    train_step(batch)\n",
        ),
        Example(
            before=(
                "from transformers import get_linear_schedule_with_warmup\n"
                "sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=500, "
                "num_training_steps=total)\n"
            ),
            after=(
                "from transformers import get_linear_schedule_with_warmup\n"
                "sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=0, "
                "num_training_steps=total)\n"
            ),
        ),
        Example(
            before=(
                "from torch.optim.lr_scheduler import LinearLR\n"
                "warm = LinearLR(opt, start_factor=0.01, total_iters=100)\n"
            ),
            after=(
                "from torch.optim.lr_scheduler import LinearLR\n"
                "warm = LinearLR(opt, start_factor=1.0, total_iters=100)\n"
            ),
        ),
        Example(
            before=(
                "WARMUP_STEPS = 200\n"
                "sched = build_scheduler(opt, warmup_steps=WARMUP_STEPS, total_steps=10_000)\n"
            ),
            after=(
                "WARMUP_STEPS = 0\n"
                "sched = build_scheduler(opt, warmup_steps=WARMUP_STEPS, total_steps=10_000)\n"
            ),
        ),
        Example(
            before='parser.add_argument("--warmup-steps", type=int, default=100)\nrun(args.warmup_steps)\n',
            after='parser.add_argument("--warmup-steps", type=int, default=0)\nrun(args.warmup_steps)\n',
        ),
    )
    non_examples = (
        # Setting this constant to 0 would divide by zero.
        "warmup_steps = 100\nfactor = (step + 1) / warmup_steps\n",
        # A decay, not a warmup.
        "from torch.optim.lr_scheduler import LinearLR\nd = LinearLR(opt, start_factor=1.0, end_factor=0.1)\n",
        "x = min(1.0, a / b)\n",
        "def f(step):\n    if step < total_steps:\n        return 1.0\n    return 0.5\n",
        "warmup_steps = 0\n",
    )

    def _edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        structural = _structural_warmup_edits(node, ctx)
        if structural is not None:
            return structural
        constant = _constant_warmup(node)
        if constant is None:
            return None
        name, value = constant
        if not all(_zero_safe_use(use, ctx) for use in ctx.nodes(cst.Name) if use.value == name):
            return None
        if _has_structural_warmup(ctx):
            return None  # the schedule itself is the site
        zero = cst.Integer("0") if isinstance(value, cst.Integer) else cst.Float("0.0")
        return {value: zero}

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return self._edits(node, ctx) is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        edits = self._edits(node, ctx)
        assert edits is not None
        return edits


# -- scheduler stepping ------------------------------------------------------------------------


def _batch_loop_step(statement: cst.CSTNode, ctx: Context) -> cst.CSTNode | None:
    """The optimizer step inside the batch loop that runs just before ``statement``."""
    for earlier in reversed(ctx.preceding_statements(statement)):
        for line in reversed(ctx.nodes_within(earlier, cst.SimpleStatementLine)):
            loop = ctx.enclosing(line, (cst.For, cst.While))
            if _optimizer_step(line, ctx) and loop is not None and ctx.within(earlier, loop):
                return line
    return None


class SchedulerStepPerBatch(Operator):
    """Move a once-per-epoch ``scheduler.step()`` into the batch loop, after ``optimizer.step()``.

    Bug: an epoch-based schedule (``StepLR(step_size=30)``, ``CosineAnnealingLR(T_max=epochs)``,
    ``MultiStepLR``) is advanced once per batch. Impact: the schedule runs
    batches-per-epoch times too fast: a StepLR decays the LR to ~0 within the first epochs
    and training stalls early (loss plateaus high); a cosine schedule with ``T_max=epochs``
    cycles up and down every few batches. Fix: step epoch-based schedulers once per epoch,
    or express ``T_max``/``step_size`` in steps for a per-batch schedule. Check: log
    ``scheduler.get_last_lr()`` per step and plot the LR against the intended schedule.
    """

    name = "scheduler_step_per_batch"
    category = "optim"
    summary = "Call an epoch scheduler's step() once per batch: the LR schedule runs far too fast."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)\n"
                "for epoch in range(20):\n    for x, y in loader:\n        loss = f(x, y)\n"
                "        loss.backward()\n        opt.step()\n        opt.zero_grad()\n"
                "    sched.step()\n    print(epoch)\n"
            ),
            after=(
                "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)\n"
                "for epoch in range(20):\n    for x, y in loader:\n        loss = f(x, y)\n"
                "        loss.backward()\n        opt.step()\n        sched.step()\n"
                "        opt.zero_grad()\n    print(epoch)\n"
            ),
        ),
        Example(
            before=(
                "class T:\n    def fit(self, loader, epochs):\n        for epoch in range(epochs):\n"
                "            for batch in loader:\n                if self.ready(batch):\n"
                "                    self.optimizer.step()\n            self.lr_scheduler.step()\n"
            ),
            after=(
                "class T:\n    def fit(self, loader, epochs):\n        for epoch in range(epochs):\n"
                "            for batch in loader:\n                if self.ready(batch):\n"
                "                    self.optimizer.step()\n"
                "                    self.lr_scheduler.step()\n"
            ),
        ),
    )
    non_examples = (
        # Already per batch.
        "for x in loader:\n    opt.step()\n    scheduler.step()\n",
        # The batch loop is in another function: nothing to move into here.
        "for epoch in range(3):\n    train_one_epoch(model, loader, opt)\n    scheduler.step()\n",
        # ReduceLROnPlateau needs the epoch's metric.
        "for epoch in range(3):\n    for x in loader:\n        opt.step()\n    scheduler.step(val_loss)\n",
        "for epoch in range(3):\n    for x in loader:\n        opt.step()\n    opt.step()\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        call = expression_call(node)
        return (
            call is not None
            and not call.args
            and is_scheduler_step(node, ctx)
            and _batch_loop_step(node, ctx) is not None
        )

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        step = _batch_loop_step(node, ctx)
        assert step is not None
        moved = node.with_changes(leading_lines=())
        return {node: cst.RemoveFromParent(), step: cst.FlattenSentinel([step, moved])}


class DropSchedulerStep(Operator):
    """Delete ``scheduler.step()``.

    Bug: the learning-rate scheduler is built but never advanced. Impact: the LR stays at
    its initial value: no decay (the loss plateaus higher than it should late in training,
    slightly worse final metrics); with a warmup schedule the LR stays at the first, tiny
    warmup value forever and training barely moves. Fix: call ``scheduler.step()`` once per
    epoch (epoch schedules) or once per optimizer step (warmup/OneCycle/per-step lambdas),
    after ``optimizer.step()``. Check: log ``scheduler.get_last_lr()`` (or the optimizer's
    ``param_groups[0]["lr"]``) every epoch: it never changes.
    """

    name = "drop_scheduler_step"
    category = "optim"
    summary = "Remove scheduler.step(): the learning rate never follows its schedule."
    expected = "degrades"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="for epoch in range(3):\n    train(model)\n    scheduler.step()\n",
            after="for epoch in range(3):\n    train(model)\n",
        ),
        Example(
            before=(
                "from torch.optim import lr_scheduler\n"
                "plateau = lr_scheduler.ReduceLROnPlateau(opt)\nplateau.step(val_loss)\n"
            ),
            after=(
                "from torch.optim import lr_scheduler\nplateau = lr_scheduler.ReduceLROnPlateau(opt)\n"
            ),
        ),
    )
    non_examples = (
        "optimizer.step()\n",
        "import torch\nopt = torch.optim.SGD(ps, lr=0.1)\nopt.step()\n",
        "scaler.step(optimizer)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return is_scheduler_step(node, ctx)

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()


# -- optimizer choice and hyperparameters --------------------------------------------------------


class AdamL2InsteadOfAdamW(Operator):
    """Replace ``AdamW`` by ``Adam`` with the same ``weight_decay``.

    Bug: Adam's ``weight_decay`` is an L2 term added to the gradient, which Adam then
    divides by its per-parameter second-moment estimate, so weights with large gradients
    are barely decayed; AdamW decays every weight by ``lr * wd`` directly (decoupled).
    Impact: weaker, uneven regularisation: usually a somewhat worse generalisation gap,
    rarely visible in a short small run. AdamW's implicit default (0.01) is written out so
    the mutant changes only the coupling. Fix: use ``AdamW`` for decoupled decay (and
    exclude biases/norm weights from it). Check: compare the weight-norm trajectory and the
    train/val gap against the AdamW run.
    """

    name = "adam_l2_instead_of_adamw"
    category = "optim"
    summary = (
        "Use Adam(weight_decay=wd) where AdamW was meant: coupled L2 instead of decoupled decay."
    )
    expected = "silent"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch\nopt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)\n",
            after="import torch\nopt = torch.optim.Adam(model.parameters(), lr=3e-4, weight_decay=0.05)\n",
        ),
        Example(
            before="from torch.optim import AdamW\nopt = AdamW(params, lr=1e-3)\n",
            after="from torch.optim import Adam, AdamW\nopt = Adam(params, lr=1e-3, weight_decay=0.01)\n",
        ),
        Example(
            before="from torch.optim import Adam, AdamW\nopt = AdamW(params, weight_decay=wd)\n",
            after="from torch.optim import Adam, AdamW\nopt = Adam(params, weight_decay=wd)\n",
        ),
    )
    non_examples = (
        "import torch\nopt = torch.optim.AdamW(params, weight_decay=0.0)\n",
        "import torch\nopt = torch.optim.Adam(params, weight_decay=0.01)\n",
        "opt = MyAdamW(params)\n",
    )

    def _edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        found = _optimizer_call(node, ctx)
        if found is None or found[1] != "AdamW":
            return None
        node = found[0]
        decay = find_arg(node, "weight_decay", 4)
        if decay is not None and number_value(decay.value) == 0:
            return None  # no decay at all: Adam and AdamW agree
        swapped = renamed_callee(node.func, ctx, "Adam", new_first=True)
        if swapped is None:
            return None
        callee, extra = swapped
        call = node.with_changes(func=callee)
        if decay is None:
            call = with_keyword(call, "weight_decay", cst.Float("0.01"))
        return {node: call, **extra}

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return self._edits(node, ctx) is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        edits = self._edits(node, ctx)
        assert edits is not None
        return edits


_ADAM_ONLY_KEYWORDS = frozenset({"betas", "eps", "amsgrad", "capturable", "decoupled_weight_decay"})


class SgdInsteadOfAdam(Operator):
    """Replace ``Adam``/``AdamW`` by plain ``SGD`` with the same learning rate.

    Bug: the optimizer is swapped (a copy-paste from another script, a config default)
    while the learning rate stays tuned for Adam. Impact: plain SGD at an Adam-sized LR
    (~1e-3) takes tiny steps without per-parameter scaling or momentum: the loss falls
    far more slowly and the run ends badly underfit. Adam-only arguments (``betas``,
    ``eps``, ``amsgrad``) are dropped so the mutant runs; Adam's default LR is written
    out. Fix: keep the optimizer the LR was tuned for, or retune (SGD typically needs
    ~0.1 with momentum 0.9). Check: overfit one batch (slow), log the update/weight ratio
    (orders of magnitude below 1e-3).
    """

    name = "sgd_instead_of_adam"
    category = "optim"
    summary = "Use plain SGD with Adam's learning rate: updates become far too small."
    expected = "degrades"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch.optim as optim\nopt = optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))\n",
            after="import torch.optim as optim\nopt = optim.SGD(model.parameters(), lr=1e-3)\n",
        ),
        Example(
            before="from torch.optim import AdamW\nopt = AdamW(params, weight_decay=0.1)\n",
            after="from torch.optim import SGD, AdamW\nopt = SGD(params, weight_decay=0.1, lr=0.001)\n",
        ),
    )
    non_examples = (
        "import torch\nopt = torch.optim.SGD(params, lr=0.1)\n",
        "import torch\nopt = torch.optim.Adam(params, **kw)\n",
    )

    def _edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        found = _optimizer_call(node, ctx)
        if found is None or found[1] not in ("Adam", "AdamW"):
            return None
        node, optimizer = found
        swapped = renamed_callee(node.func, ctx, "SGD", new_first=True)
        if swapped is None:
            return None
        callee, extra = swapped
        positional = positional_args(node)[:2]  # params, lr
        keywords = [
            arg
            for arg in node.args
            if arg.keyword is not None and arg.keyword.value not in _ADAM_ONLY_KEYWORDS
        ]
        args = closed_args([*positional, *keywords])
        call = node.with_changes(func=callee, args=args)
        if find_arg(call, "lr", 1) is None:
            call = with_keyword(call, "lr", number_literal(_DEFAULT_LR[optimizer]))
        return {node: call, **extra}

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return self._edits(node, ctx) is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        edits = self._edits(node, ctx)
        assert edits is not None
        return edits


class DropMomentum(Operator):
    """Remove ``momentum=`` (and ``nesterov=``, which needs it) from ``SGD``.

    Bug: SGD runs without momentum at a learning rate tuned with it. Impact: the effective
    step is ~1/(1 - momentum) = 10x smaller for momentum 0.9 and noise is no longer
    averaged out: the loss falls markedly more slowly and zig-zags in ill-conditioned
    directions, ending underfit for the same budget. Fix: ``SGD(params, lr,
    momentum=0.9)`` (optionally ``nesterov=True``), or scale the LR up when dropping
    momentum on purpose. Check: compare the loss curve with the tuned run; print
    ``optimizer.defaults`` / ``param_groups`` when debugging an optimizer config.
    """

    name = "drop_momentum"
    category = "optim"
    summary = "Remove momentum from SGD: much slower, noisier convergence."
    expected = "degrades"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)\n",
            after="import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.05)\n",
        ),
        Example(
            before="from torch import optim\nopt = optim.SGD(ps, lr=0.1, momentum=MOMENTUM, nesterov=True, weight_decay=5e-4)\n",
            after="from torch import optim\nopt = optim.SGD(ps, lr=0.1, weight_decay=5e-4)\n",
        ),
        Example(
            before="from torch.optim import SGD\nopt = SGD(ps, 0.1, 0.9)\n",
            after="from torch.optim import SGD\nopt = SGD(ps, 0.1)\n",
        ),
    )
    non_examples = (
        "import torch\nopt = torch.optim.SGD(ps, lr=0.1)\n",
        "import torch\nopt = torch.optim.SGD(ps, lr=0.1, momentum=0)\n",
        "import torch\nopt = torch.optim.RMSprop(ps, lr=0.01, momentum=0.9)\n",
    )

    def _momentum(self, node: cst.CSTNode, ctx: Context) -> cst.Arg | None:
        found = _optimizer_call(node, ctx)
        if found is None or found[1] != "SGD":
            return None
        node = found[0]
        momentum = find_arg(node, "momentum", 2)
        if momentum is None or number_value(momentum.value) == 0:
            return None
        return momentum

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return self._momentum(node, ctx) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        momentum = self._momentum(node, ctx)
        assert momentum is not None and isinstance(node, cst.Call)
        positional = positional_args(node)
        if momentum.keyword is None and momentum is not positional[-1]:
            call = with_arg_value(node, momentum, cst.Integer("0"))  # later positionals follow
        else:
            call = without_arg(node, momentum)
        nesterov = find_arg(call, "nesterov", 5)
        return call if nesterov is None else without_arg(call, nesterov)


# Decay PyTorch applies when ``weight_decay`` is not given (non-zero only for AdamW).
_DEFAULT_WEIGHT_DECAY = {"AdamW": 0.01}


class WeightDecayTooHigh(Operator):
    """Multiply the optimizer's ``weight_decay`` by ``factor`` (AdamW's implicit 0.01 too).

    Bug: a regularisation strength off by orders of magnitude (a value meant for decoupled
    AdamW given to coupled SGD/Adam, ``5e-2`` typed for ``5e-4``). Impact: the decay term
    dominates the gradient, weights shrink towards zero and the model underfits: the
    training loss plateaus well above the reference and accuracy stays low; at the
    extreme the loss drifts back up to chance level. Fix: typical values are 1e-4 to 5e-4
    for SGD/Adam (coupled L2) and 0.01 to 0.1 for AdamW; tune on validation data. Check:
    log the global weight norm (it collapses) and compare the training loss with a run
    without decay.
    """

    name = "weight_decay_too_high"
    category = "optim"
    summary = "Multiply weight_decay by a factor (x100): weights shrink, the model underfits."
    expected = "degrades"
    node_types = (cst.Call,)
    parameters = {"factor": Param(100.0, "multiplier applied to weight_decay")}
    examples = (
        Example(
            before="import torch\nopt = torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=5e-4)\n",
            after="import torch\nopt = torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.05)\n",
        ),
        Example(
            before="from torch import optim\nopt = optim.AdamW(ps, lr=1e-3)\n",
            after="from torch import optim\nopt = optim.AdamW(ps, lr=1e-3, weight_decay=1.0)\n",
        ),
        Example(
            before="import torch\nopt = torch.optim.Adam(ps, weight_decay=cfg.wd)\n",
            after="import torch\nopt = torch.optim.Adam(ps, weight_decay=cfg.wd * 100)\n",
        ),
    )
    non_examples = (
        "import torch\nopt = torch.optim.Adam(ps, lr=1e-3)\n",
        "import torch\nopt = torch.optim.SGD(ps, lr=0.1, weight_decay=0)\n",
        "model = build(weight_decay=5e-4)\n",
    )

    def _decay(self, node: cst.CSTNode, ctx: Context) -> tuple[str, cst.Arg | None] | None:
        found = _optimizer_call(node, ctx)
        if found is None:
            return None
        call, optimizer = found
        decay = find_arg(call, "weight_decay")
        if decay is None:
            return (optimizer, None) if optimizer in _DEFAULT_WEIGHT_DECAY else None
        return None if number_value(decay.value) == 0 else (optimizer, decay)

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return self._decay(node, ctx) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        found = self._decay(node, ctx)
        assert found is not None and isinstance(node, cst.Call)
        optimizer, decay = found
        factor = self.params["factor"]
        if decay is None:
            return with_keyword(
                node, "weight_decay", number_literal(_DEFAULT_WEIGHT_DECAY[optimizer] * factor)
            )
        return with_arg_value(node, decay, _times(decay.value, factor))


# -- optimizer state ------------------------------------------------------------------------------


def _is_stateful(call: cst.Call, optimizer: str) -> bool:
    """Plain SGD keeps no state: recreating it changes nothing."""
    if optimizer != "SGD":
        return True
    momentum = find_arg(call, "momentum", 2)
    return momentum is not None and number_value(momentum.value) != 0


def _is_epoch_loop(loop: cst.CSTNode, ctx: Context) -> bool:
    """``for epoch in range(...)`` or any loop holding another loop (the batch loop)."""
    if isinstance(loop, cst.For) and "epoch" in ctx.code(loop.target).lower():
        return True
    if not isinstance(loop, (cst.For, cst.While)):
        return False
    return bool(ctx.nodes_within(loop.body, cst.For) or ctx.nodes_within(loop.body, cst.While))


class OptimizerRecreatedEachEpoch(Operator):
    """Construct the optimizer at the top of every epoch (moved into the epoch loop, or
    copied there when code before the loop, such as a scheduler, needs it).

    Bug: ``optimizer = Adam(model.parameters(), ...)`` inside the epoch loop. Impact: the
    optimizer state is thrown away every epoch: Adam's moment estimates and bias
    correction restart (large, noisy first steps each epoch), SGD momentum restarts from
    zero; a scheduler still drives the old optimizer, so the new one keeps the initial LR
    and the schedule silently stops working. Loss curves show a bump at each epoch
    boundary. Plain SGD without momentum has no state and is not a site. Fix: build the
    optimizer (and scheduler) once, before the loop; reload its ``state_dict`` when
    resuming. Check: assert ``id(optimizer)`` is constant across epochs; plot per-step loss
    (spikes at epoch starts) and the LR actually used.
    """

    name = "optimizer_recreated_each_epoch"
    category = "optim"
    summary = "Build the optimizer inside the epoch loop: its state (moments, momentum) resets."
    expected = "degrades"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "import torch\nopt = torch.optim.Adam(model.parameters(), lr=1e-3)\n\n"
                "for epoch in range(10):\n    # one pass\n    train_one_epoch(model, loader, opt)\n"
            ),
            after=(
                "import torch\n\nfor epoch in range(10):\n"
                "    # one pass\n    opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
                "    train_one_epoch(model, loader, opt)\n"
            ),
        ),
        Example(
            before=(
                "import torch\ndef main(model, loader):\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
                "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 5)\n"
                "    for epoch in range(10):\n        for x, y in loader:\n"
                "            step(model, optimizer, x, y)\n        scheduler.step()\n"
            ),
            after=(
                "import torch\ndef main(model, loader):\n"
                "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
                "    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 5)\n"
                "    for epoch in range(10):\n"
                "        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
                "        for x, y in loader:\n"
                "            step(model, optimizer, x, y)\n        scheduler.step()\n"
            ),
        ),
    )
    non_examples = (
        # Plain SGD has no state to lose.
        "import torch\nopt = torch.optim.SGD(ps, lr=0.1)\nfor epoch in range(3):\n    fit(opt)\n",
        # The loop never uses this optimizer (a trainer holds it).
        "import torch\nopt = torch.optim.Adam(ps)\ntrainer = T(opt)\nfor epoch in range(3):\n    trainer.fit()\n",
        # A batch loop is not an epoch loop.
        "import torch\nopt = torch.optim.Adam(ps)\nfor x, y in loader:\n    step(opt, x, y)\n",
    )

    def _plan(self, node: cst.CSTNode, ctx: Context) -> tuple[str, cst.CSTNode, bool] | None:
        """(optimizer name, epoch loop, whether code before the loop still needs the original)."""
        assign = single_assignment(node)
        if assign is None:
            return None
        name = dotted_name(assign.targets[0].target)
        optimizer = optimizer_class(assign.value, ctx)
        if name is None or optimizer is None:
            return None
        assert isinstance(assign.value, cst.Call)
        if not _is_stateful(assign.value, optimizer):
            return None
        between = []
        for statement in ctx.following_statements(node):
            if isinstance(statement, (cst.For, cst.While)) and mentions(statement, name, ctx):
                if not _is_epoch_loop(statement, ctx) or not isinstance(
                    statement.body, cst.IndentedBlock
                ):
                    return None
                needed = any(mentions(other, name, ctx) for other in between)
                return name, statement, needed
            between.append(statement)
        return None

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return self._plan(node, ctx) is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        plan = self._plan(node, ctx)
        assert plan is not None
        _, loop, needed = plan
        assert isinstance(loop, (cst.For, cst.While)) and isinstance(loop.body, cst.IndentedBlock)
        first = loop.body.body[0]
        inside = node.with_changes(leading_lines=first.leading_lines)
        edits: dict[cst.CSTNode, Replacement] = {
            first: cst.FlattenSentinel([inside, first.with_changes(leading_lines=())])
        }
        if not needed:
            edits[node] = cst.RemoveFromParent()
        return edits


# -- batch size -------------------------------------------------------------------------------------


class ChangeBatchSize(Operator):
    """Multiply the training DataLoader's ``batch_size`` by ``factor`` (x8, or x1/8).

    Bug: a batch size changed without retuning anything else (a GPU with more memory, a
    config copied from another run). Impact: with a fixed number of epochs, x8 means 8x
    fewer optimizer steps at the same learning rate, so training ends markedly underfit
    (and larger batches generalise a little worse); x1/8 means noisier gradients and 8x
    more steps (slower, noisier curves, sometimes instability at the old LR). Validation
    loaders are not sites. Fix: scale the LR with the batch size (linear rule for SGD,
    ~sqrt for Adam) and budget in steps, not epochs. Check: count optimizer steps per
    epoch; compare loss-vs-steps and loss-vs-samples curves with the reference.
    """

    name = "change_batch_size"
    category = "optim"
    summary = "Multiply the training batch size by a factor (x8 or x1/8) with nothing retuned."
    expected = "degrades"
    node_types = (cst.Call,)
    parameters = {"factor": Param(8.0, "multiplier applied to batch_size")}
    variants = ({"factor": 0.125},)
    examples = (
        Example(
            before=(
                "from torch.utils.data import DataLoader\n"
                "train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)\n"
            ),
            after=(
                "from torch.utils.data import DataLoader\n"
                "train_loader = DataLoader(train_ds, batch_size=512, shuffle=True)\n"
            ),
        ),
        Example(
            before=(
                "import torch\n"
                "loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True)\n"
            ),
            after=(
                "import torch\n"
                "loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size * 8, shuffle=True)\n"
            ),
        ),
        Example(
            before="from torch.utils.data import DataLoader\ndl = DataLoader(train_set, 64)\n",
            after="from torch.utils.data import DataLoader\ndl = DataLoader(train_set, 8)\n",
            params={"factor": 0.125},
        ),
        Example(
            before=(
                "from torch.utils.data import DataLoader\n"
                "fit(DataLoader(train_ds, batch_size=bs, shuffle=True))\n"
            ),
            after=(
                "from torch.utils.data import DataLoader\n"
                "fit(DataLoader(train_ds, batch_size=max(1, bs // 8), shuffle=True))\n"
            ),
            params={"factor": 0.125},
        ),
    )
    non_examples = (
        "from torch.utils.data import DataLoader\nval_loader = DataLoader(val_ds, batch_size=256)\n",
        "from torch.utils.data import DataLoader\n"
        "test_loader = DataLoader(test_ds, batch_size=64, shuffle=True)\n",
        "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=None)\n",
        "from torch.utils.data import DataLoader\ntrain_loader = DataLoader(train_ds, shuffle=True)\n",
    )

    def _batch_size(self, node: cst.CSTNode, ctx: Context) -> cst.Arg | None:
        if not isinstance(node, cst.Call) or has_star_args(node):
            return None
        if not is_data_loader(node, ctx):
            return None
        size = find_arg(node, "batch_size", 1)
        if size is None or (isinstance(size.value, cst.Name) and size.value.value == "None"):
            return None
        return size if is_training_loader(node, ctx) else None

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return self._batch_size(node, ctx) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        size = self._batch_size(node, ctx)
        assert size is not None and isinstance(node, cst.Call)
        return with_arg_value(node, size, self._scaled(size.value))

    def _scaled(self, size: cst.BaseExpression) -> cst.BaseExpression:
        factor = self.params["factor"]
        value = number_value(size)
        if value is not None:
            return number_literal(max(1, int(value * factor)), integer=True)
        if factor >= 1:
            return _times(size, factor)
        divisor = 1 / factor
        if abs(divisor - round(divisor)) < 1e-9:  # x0.125 reads best as // 8
            smaller: cst.BaseExpression = cst.BinaryOperation(
                as_factor(size), cst.FloorDivide(), cst.Integer(str(round(divisor)))
            )
        else:
            product = cst.BinaryOperation(as_factor(size), cst.Multiply(), _factor_literal(factor))
            smaller = cst.Call(cst.Name("int"), [cst.Arg(product)])
        return cst.Call(cst.Name("max"), [cst.Arg(cst.Integer("1")), cst.Arg(smaller)])
