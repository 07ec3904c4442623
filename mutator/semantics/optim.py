"""Optimizers and schedulers: which class a constructor builds, what a receiver holds, their steps."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from mutator.context import Context
from mutator.semantics.cache import per_module, per_node
from mutator.semantics.names import resolve
from mutator.semantics.scope import assigned_values, values_of
from mutator.semantics.syntax import (
    _own_name,
    callee_name,
    dotted_name,
    expression_call,
    find_arg,
    method_name,
    method_statement_receiver,
    receiver,
)

# -- optimizers and schedulers ----------------------------------------------------------------

OPTIMIZER_CLASSES = frozenset(
    {"SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop", "Adagrad"}
    | {"Adadelta", "SparseAdam", "LBFGS", "ASGD", "Adafactor"}
)
SCHEDULER_CLASSES = frozenset(
    {"StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "OneCycleLR", "CyclicLR"}
    | {"CosineAnnealingWarmRestarts", "LambdaLR", "MultiplicativeLR", "LinearLR", "ConstantLR"}
    | {"PolynomialLR", "SequentialLR", "ChainedScheduler", "ReduceLROnPlateau", "LRScheduler"}
)
SCHEDULER_MODULE = "torch.optim.lr_scheduler."


@per_node
def optimizer_class(call: cst.CSTNode, ctx: Context) -> str | None:
    """``"Adam"`` for ``optim.Adam(...)``/``torch.optim.Adam(...)``/``Adam(...)``, else None."""
    if not isinstance(call, cst.Call):
        return None
    # The script's own ``class Adam`` is no torch optimizer: it takes none of its arguments.
    resolved = resolve(call.func, ctx).names
    for qualified in resolved:
        tail = qualified.rsplit(".", 1)[-1]
        if (
            qualified.startswith("torch.optim.")
            and not qualified.startswith(SCHEDULER_MODULE)
            and tail in OPTIMIZER_CLASSES
        ):
            return tail
    tail = callee_name(call)
    if not resolved and tail in OPTIMIZER_CLASSES:
        return tail
    return None


def constructor_kind(call: cst.Call, ctx: Context) -> str | None:
    """``optimizer``, ``scheduler`` or ``scaler`` (GradScaler) for the class a call builds."""
    return class_kind(call.func, ctx)


def class_kind(cls: cst.BaseExpression, ctx: Context) -> str | None:
    """``optimizer``, ``scheduler`` or ``scaler`` for a class name (``optim.Adam``, an
    annotation ``lr_scheduler.LRScheduler``), by what it resolves to, else its name."""
    names = resolve(cls, ctx, strict=False).names
    for name in names:
        if name.startswith(SCHEDULER_MODULE):
            return "scheduler"
        if name.rsplit(".", 1)[-1] == "GradScaler":
            return "scaler"
        if name.startswith("torch.optim."):
            return "optimizer"
    tail = _own_name(cls) or ""
    if tail in SCHEDULER_CLASSES:
        return "scheduler"
    if tail in OPTIMIZER_CLASSES or tail == "Optimizer":
        return "optimizer"
    if tail == "GradScaler":
        return "scaler"
    # A scheduler from another library (``get_cosine_schedule_with_warmup``, timm's ``*LR``).
    if "schedul" in tail.lower() or (not names and tail.endswith("LR")):
        return "scheduler"
    return None


def _kind_by_name(name: str) -> str | None:
    lowered = name.lower()
    if "sched" in lowered:
        return "scheduler"
    if "scaler" in lowered:
        return "scaler"
    if "optim" in lowered or lowered == "opt" or lowered.startswith("opt_"):
        return "optimizer"
    if lowered.endswith("_opt"):
        return "optimizer"
    return None


def _annotation_kind(name: str, ctx: Context) -> str | None:
    for param in ctx.nodes(cst.Param):
        if param.name.value == name and param.annotation is not None:  # type: ignore[attr-defined]
            kind = class_kind(param.annotation.annotation, ctx)  # type: ignore[attr-defined]
            if kind is not None:
                return kind
    return None


@per_node
def receiver_kind(expr: cst.BaseExpression, ctx: Context) -> str | None:
    """Is this object an ``optimizer``, a ``scheduler`` or a (GradScaler) ``scaler``?

    What it was constructed from decides first (``torch.optim.X``, ``lr_scheduler.X``),
    then a parameter annotation, then its name (``sched`` before ``opt``, so
    ``optim_scheduler`` is a scheduler).
    """
    while isinstance(expr, cst.Subscript):  # self.optimizers[0]
        expr = expr.value
    dotted = dotted_name(expr)
    if dotted is None:
        return None
    for value in assigned_values(ctx, dotted):
        if isinstance(value, cst.Call):
            kind = constructor_kind(value, ctx)
            if kind is not None:
                return kind
    if "." not in dotted:
        kind = _annotation_kind(dotted, ctx)
        if kind is not None:
            return kind
    return _kind_by_name(dotted.rsplit(".", 1)[-1])


def is_optimizer_step(statement: cst.CSTNode, ctx: Context) -> bool:
    """``optimizer.step()`` / ``self.opt.step(closure)`` / ``scaler.step(optimizer)``."""
    call = expression_call(statement)
    if call is None or method_name(call) != "step":
        return False
    kind = receiver_kind(receiver(call), ctx)
    if kind == "optimizer":
        return True
    if kind == "scaler":
        first = find_arg(call, position=0)
        return first is not None and receiver_kind(first.value, ctx) == "optimizer"
    return False


def is_scheduler_step(statement: cst.CSTNode, ctx: Context) -> bool:
    """``scheduler.step()`` (or ``scheduler.step(val_loss)``) of an LR scheduler."""
    stepped = method_statement_receiver(statement, "step")
    return stepped is not None and receiver_kind(stepped, ctx) == "scheduler"


# Optimizers that normalise the step by a running second moment: their useful learning
# rates are ~1e-4..3e-3, a hundred times below SGD's, and a tiny ``eps`` makes them explode.
ADAPTIVE_OPTIMIZERS = frozenset({"Adam", "AdamW", "NAdam", "RAdam", "Adamax", "Adagrad", "RMSprop"})


def adaptive_optimizer(call: cst.CSTNode, ctx: Context) -> str | None:
    """``"Adam"`` for ``optim.Adam(...)`` (any alias) when it is adaptive, else None."""
    name = optimizer_class(call, ctx)
    return name if name in ADAPTIVE_OPTIMIZERS else None


def reads_grad(expr: cst.CSTNode) -> bool:
    """Does ``expr`` read some tensor's ``.grad`` (``p.grad``, ``param.grad.data``)?"""
    return bool(m.findall(expr, m.Attribute(attr=m.Name("grad"))))


# In-place tensor methods a hand-written optimizer updates parameters with.
_UPDATE_METHODS = frozenset({"add_", "sub_", "addcdiv_", "addcmul_", "copy_"})


@per_module
def manual_updates(ctx: Context) -> list[cst.CSTNode]:
    """Parameter updates written by hand from gradients, the optimizer step of scripts that
    use none: ``p -= lr * p.grad``, ``p.data.add_(p.grad, alpha=-lr)``,
    ``p.data = p.data - lr * p.grad``."""
    found: list[cst.CSTNode] = []
    for node in ctx.nodes(cst.AugAssign):
        if reads_grad(node.value):  # type: ignore[attr-defined]
            found.append(node)
    for node in ctx.nodes(cst.Assign):
        targets = [dotted_name(t.target) or "" for t in node.targets]  # type: ignore[attr-defined]
        if any(t.endswith(".data") for t in targets) and reads_grad(node.value):  # type: ignore[attr-defined]
            found.append(node)
    for call in ctx.nodes(cst.Call):
        if method_name(call) in _UPDATE_METHODS and any(reads_grad(a.value) for a in call.args):  # type: ignore[attr-defined]
            found.append(call)
    return found


@per_module  # asked per function: scanning every call each time was quadratic
def step_closures(ctx: Context) -> frozenset[str]:
    """Names of local functions handed to ``.step(...)`` as a closure (LBFGS): the step
    runs them, so their backward() has its optimizer step outside them."""
    names = set()
    for call in ctx.nodes(cst.Call):
        if method_name(call) == "step":  # type: ignore[arg-type]
            for arg in call.args:  # type: ignore[attr-defined]
                if isinstance(arg.value, cst.Name) and (
                    arg.keyword is None or arg.keyword.value == "closure"
                ):
                    names.add(arg.value.value)
    return frozenset(names)


# -- hand-written schedules and parameter groups ----------------------------------------------


def _group_key(target: cst.BaseExpression) -> tuple[str, str] | None:
    """(group variable, key) of ``group["lr"]``."""
    if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name)):
        return None
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return None
    key = target.slice[0].slice.value
    if not isinstance(key, cst.SimpleString):
        return None
    return target.value.value, key.evaluated_value  # type: ignore[return-value]


@per_module
def manual_lr_writes(ctx: Context) -> list[cst.Assign]:
    """A hand-written schedule: ``for g in optimizer.param_groups: g["lr"] = lr`` written
    unconditionally in a loop, or ``optimizer.param_groups[0]["lr"] = lrnow`` anywhere in a
    loop (cleanrl's annealing). Every step then runs with this value, whatever ``lr=`` the
    optimizer was built with. A write that rescales the current rate (``lr2 =
    group["lr"]`` ... ``group["lr"] = lr2 * k``) is no schedule: the built ``lr=`` stays
    the base."""
    found = []
    for assign in ctx.nodes(cst.Assign):
        targets = assign.targets  # type: ignore[attr-defined]
        if len(targets) != 1 or _reads_current_lr(assign.value, ctx, assign):  # type: ignore[attr-defined]
            continue
        target = targets[0].target
        if _indexed_group_lr(target):
            if ctx.enclosing(assign, (cst.For, cst.While)) is not None:
                found.append(assign)
            continue
        key = _group_key(target)
        if key is None or key[1] != "lr":
            continue
        loop = ctx.enclosing(assign, (cst.For, cst.If))
        if not isinstance(loop, cst.For) or dotted_name(loop.target) != key[0]:
            continue
        if method_name(cst.Call(func=loop.iter)) != "param_groups":  # type: ignore[arg-type]
            continue
        found.append(assign)
    return found  # type: ignore[return-value]


def _indexed_group_lr(target: cst.BaseExpression) -> bool:
    """``optimizer.param_groups[i]["lr"]``."""
    if not isinstance(target, cst.Subscript) or len(target.slice) != 1:
        return False
    key = target.slice[0].slice
    if not (isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString)):
        return False
    group = target.value
    return (
        key.value.evaluated_value == "lr"
        and isinstance(group, cst.Subscript)
        and isinstance(group.value, cst.Attribute)
        and group.value.attr.value == "param_groups"
    )


def _reads_current_lr(
    value: cst.BaseExpression, ctx: Context, at: cst.CSTNode, depth: int = 0
) -> bool:
    """Does ``value`` read an optimizer's current rate (``param_groups``), itself or through
    names bound to such a read (``group = opt.param_groups[0]``; ``lr2 = group["lr"]``)?"""
    seen: set[int] = set()
    level = [(value, at)]
    for _ in range(depth, 4):
        following = []
        for expr, where in level:
            if id(expr) in seen:
                continue
            seen.add(id(expr))
            if _mentions_param_groups(expr, ctx):
                return True
            for name in ctx.nodes_within(expr, cst.Name):
                following.extend((bound, bound) for bound in values_of(name, ctx, where))  # type: ignore[arg-type]
        level = following
    return False


@per_node
def _mentions_param_groups(expr: cst.CSTNode, ctx: Context) -> bool:
    """``param_groups`` anywhere in ``expr`` (read from the tree: rendering the code of every
    value a schedule reads made one 1,100-line trainer take seconds)."""
    return any(
        isinstance(node, cst.Attribute) and node.attr.value == "param_groups"
        for node in ctx.nodes_within(expr, cst.Attribute)
    ) or (isinstance(expr, cst.Name) and expr.value == "param_groups")


def group_dicts(call: cst.Call, ctx: Context) -> list[cst.Dict] | None:
    """The parameter-group dicts of ``Optimizer([{...}, {...}], ...)`` (also through a name
    bound once to the list), or None where the parameters are no visible group list."""
    first = find_arg(call, "params", 0)
    if first is None:
        return None
    value = first.value
    if isinstance(value, cst.Name):
        values = assigned_values(ctx, value.value)
        value = values[0] if len(values) == 1 else value
    if not isinstance(value, cst.List) or not value.elements:
        return None
    dicts = [element.value for element in value.elements]
    return dicts if all(isinstance(d, cst.Dict) for d in dicts) else None  # type: ignore[return-value]


def group_sets(group: cst.Dict, key: str) -> cst.DictElement | None:
    """The ``"key": value`` entry of a parameter-group dict literal."""
    for element in group.elements:
        if (
            isinstance(element, cst.DictElement)
            and isinstance(element.key, cst.SimpleString)
            and element.key.evaluated_value == key
        ):
            return element
    return None


def every_group_sets(call: cst.Call, ctx: Context, key: str) -> bool:
    """Does every parameter group override the constructor's ``key`` (``weight_decay``)?"""
    groups = group_dicts(call, ctx)
    return bool(groups) and all(group_sets(g, key) is not None for g in groups)  # type: ignore[union-attr]


def is_manual_step(statement: cst.CSTNode, ctx: Context) -> bool:
    """A statement line that is one hand-written update (``p.data.add_(p.grad, alpha=-lr)``,
    ``p -= lr * p.grad``): the optimizer step of a script without an optimizer."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    update = small.value if isinstance(small, cst.Expr) else small
    return any(update is found for found in manual_updates(ctx))


def _calls_backward(node: cst.CSTNode, ctx: Context) -> bool:
    return any(method_name(call) == "backward" for call in ctx.nodes_within(node, cst.Call))  # type: ignore[arg-type]


def is_manual_step_block(statement: cst.CSTNode, ctx: Context) -> bool:
    """The largest statement around a hand-written update that runs no backward()
    (``with torch.no_grad(): for p in model.parameters(): ...``): the step as a whole,
    to move or dedent like ``optimizer.step()``."""
    if not isinstance(statement, (cst.With, cst.For)) or _calls_backward(statement, ctx):
        return False
    if not any(ctx.within(statement, update) for update in manual_updates(ctx)):
        return False
    owner = ctx.enclosing(statement, (cst.BaseCompoundStatement, cst.FunctionDef))
    return owner is not None and _calls_backward(owner, ctx)


def is_manual_zero_grad(statement: cst.CSTNode) -> bool:
    """``p.grad.zero_()``, ``p.grad.data.zero_()`` or ``p.grad = None`` on one line."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        name = dotted_name(small.value.func) or ""
        return name.endswith((".grad.zero_", ".grad.data.zero_"))
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = dotted_name(small.targets[0].target) or ""
        return (
            target.endswith(".grad")
            and isinstance(small.value, cst.Name)
            and small.value.value == "None"
        )
    return False
