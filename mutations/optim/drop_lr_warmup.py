"""The ``drop_lr_warmup`` operator (DropLrWarmup)."""

from __future__ import annotations

import re

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    SCHEDULER_MODULE,
    callee_name,
    dotted_name,
    find_arg,
    method_name,
    number_literal,
    number_value,
    per_module,
    resolve,
    with_arg_value,
    with_keyword,
)

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


def _min_one_edits(call: cst.Call, ctx: Context) -> Edits | None:
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


def _branch_edits(node: cst.If | cst.IfExp, ctx: Context) -> Edits | None:
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


def _scheduler_argument_edits(call: cst.Call, ctx: Context) -> Edits | None:
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


def _structural_warmup_edits(node: cst.CSTNode, ctx: Context) -> Edits | None:
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
    witness = "differs lr", "the learning rates differ (no warmup)"
    node_types = (cst.Call, cst.If, cst.IfExp, cst.Assign, cst.AnnAssign)
    examples = (
        Example(
            before="""
                from torch.optim.lr_scheduler import LambdaLR
                sched = LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup_steps))
            """,
            after="""
                from torch.optim.lr_scheduler import LambdaLR
                sched = LambdaLR(opt, lambda step: 1.0)
            """,
        ),
        Example(
            before="""
                import torch

                def lr_lambda(step):
                    if step < warmup_steps:
                        return step / max(1, warmup_steps)
                    return max(0.0, 1 - step / total)

                sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
            """,
            after="""
                import torch

                def lr_lambda(step):
                    return max(0.0, 1 - step / total)

                sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
            """,
        ),
        Example(
            before="""
                import math
                from torch.optim import lr_scheduler
                f = lambda s: min(s / WARMUP, 1.0) * 0.5 * (1 + math.cos(math.pi * s / T))
                sched = lr_scheduler.LambdaLR(opt, lr_lambda=f)
            """,
            after="""
                import math
                from torch.optim import lr_scheduler
                f = lambda s: 0.5 * (1 + math.cos(math.pi * s / T))
                sched = lr_scheduler.LambdaLR(opt, lr_lambda=f)
            """,
        ),
        Example(
            before="""
                for step, batch in enumerate(loader):
                    if step < args.warmup:
                        for g in opt.param_groups:
                            g['lr'] = lr * (step + 1) / args.warmup
                    train_step(batch)
            """,
            after="""
                for step, batch in enumerate(loader):
                    train_step(batch)
            """,
        ),
        Example(
            before="""
                from transformers import get_linear_schedule_with_warmup
                sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=500, num_training_steps=total)
            """,
            after="""
                from transformers import get_linear_schedule_with_warmup
                sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=0, num_training_steps=total)
            """,
        ),
        Example(
            before="""
                from torch.optim.lr_scheduler import LinearLR
                warm = LinearLR(opt, start_factor=0.01, total_iters=100)
            """,
            after="""
                from torch.optim.lr_scheduler import LinearLR
                warm = LinearLR(opt, start_factor=1.0, total_iters=100)
            """,
        ),
        Example(
            before="""
                WARMUP_STEPS = 200
                sched = build_scheduler(opt, warmup_steps=WARMUP_STEPS, total_steps=10_000)
            """,
            after="""
                WARMUP_STEPS = 0
                sched = build_scheduler(opt, warmup_steps=WARMUP_STEPS, total_steps=10_000)
            """,
        ),
        Example(
            before="""
                parser.add_argument("--warmup-steps", type=int, default=100)
                run(args.warmup_steps)
            """,
            after="""
                parser.add_argument("--warmup-steps", type=int, default=0)
                run(args.warmup_steps)
            """,
        ),
    )
    non_examples = (
        # Setting this constant to 0 would divide by zero.
        """
            warmup_steps = 100
            factor = (step + 1) / warmup_steps
        """,
        # A decay, not a warmup.
        """
            from torch.optim.lr_scheduler import LinearLR
            d = LinearLR(opt, start_factor=1.0, end_factor=0.1)
        """,
        "x = min(1.0, a / b)\n",
        """
            def f(step):
                if step < total_steps:
                    return 1.0
                return 0.5
        """,
        "warmup_steps = 0\n",
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
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
