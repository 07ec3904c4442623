"""Where a learning-rate warmup is written (private to ``drop_lr_warmup``): a ramp inside a
``LambdaLR`` function or a per-batch scheduler class, a warm-up branch, a warmup argument of
a scheduler, and the edit that removes each."""

from __future__ import annotations

import re

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits
from mutator.semantics import (
    SCHEDULER_MODULE,
    callee_name,
    dotted_name,
    find_arg,
    number_literal,
    number_value,
    per_module,
    resolve,
    with_arg_value,
    with_keyword,
)
from mutator.semantics.hyperparams import kind_of
from mutator.semantics.schedules import lr_schedule_of

WARMUP = re.compile(r"warm", re.IGNORECASE)


def _mentions_warmup(root: cst.CSTNode, ctx: Context) -> bool:
    return any(WARMUP.search(name.value) for name in ctx.nodes_within(root, cst.Name))


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
        (
            isinstance(division.operator, cst.Divide)
            and _mentions_warmup(division.right, ctx)
            and not _mentions_warmup(division.left, ctx)
        )
        or _inverse_power_of_warmup(division, ctx)  # type: ignore[arg-type]
        for division in ctx.nodes_within(expr, cst.BinaryOperation)
    )


def _inverse_power_of_warmup(node: cst.BinaryOperation, ctx: Context) -> bool:
    """``warmup ** (-1.5)``: a division by the warmup length (the Transformer's Noam rate
    ``min(step ** -0.5, step * warmup ** -1.5)``, issue 29)."""
    if not isinstance(node.operator, cst.Power) or not _mentions_warmup(node.left, ctx):
        return False
    exponent = number_value(node.right)
    if exponent is None and isinstance(node.right, cst.UnaryOperation):
        inner = number_value(node.right.expression)
        exponent = (
            -inner if inner is not None and isinstance(node.right.operator, cst.Minus) else None
        )
    return exponent is not None and exponent < 0


def warmup_comparison(test: cst.BaseExpression, ctx: Context) -> bool:
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
        # ``min(step ** -0.5, step * warmup ** -1.5)``: the schedule without its ramp.
        ramps = [arg for arg in call.args if _is_ramp(arg.value, ctx)]
        if len(ramps) != 1:
            return None
        other = call.args[1] if ramps[0] is call.args[0] else call.args[0]
        if _mentions_warmup(other.value, ctx):
            return None
        return {call: _with_parens_of(other.value, call) if call.lpar else other.value}
    ramp = call.args[1] if ones[0] is call.args[0] else call.args[0]
    if not _is_ramp(ramp.value, ctx):
        return None
    parent = ctx.parent(call)
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Multiply):
        other = parent.right if parent.left is call else parent.left
        return {parent: _with_parens_of(other, parent)}
    return {call: ones[0].value.with_changes(lpar=(), rpar=())}


def _sets_rate(node: cst.If | cst.IfExp, ctx: Context) -> bool:
    """Does the branch compute a learning rate: in a schedule (``mutator.semantics.schedules``),
    writing ``param_groups``, or assigning a name of kind lr? ``if epoch < warmup_epochs:
    freeze(backbone)`` is a warm-up of something else."""
    if lr_schedule_of(node, ctx) is not None:
        return True
    for attribute in ctx.nodes_within(node.body, cst.Attribute):
        if attribute.attr.value == "param_groups":  # type: ignore[attr-defined]
            return True
    return any(
        kind_of((dotted_name(t.target) or "").rsplit(".", 1)[-1]) == "lr"
        for assign in ctx.nodes_within(node.body, cst.Assign)
        for t in assign.targets  # type: ignore[attr-defined]
    )


def _branch_edits(node: cst.If | cst.IfExp, ctx: Context) -> Edits | None:
    """Drop the warming-up branch of ``if step < warmup: ...`` (or of ``a if s < w else b``)."""
    if not warmup_comparison(node.test, ctx) or not _sets_rate(node, ctx):
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


def structural_warmup_edits(node: cst.CSTNode, ctx: Context) -> Edits | None:
    if isinstance(node, (cst.If, cst.IfExp)):
        return _branch_edits(node, ctx)
    if isinstance(node, cst.Call):
        return _min_one_edits(node, ctx) or _scheduler_argument_edits(node, ctx)
    return None


@per_module
def has_structural_warmup(ctx: Context) -> bool:
    """Does a schedule (a ramp, a warmup branch, a warmup argument) exist anywhere?"""
    return any(
        structural_warmup_edits(node, ctx) is not None
        for kind in (cst.Call, cst.If, cst.IfExp)
        for node in ctx.nodes(kind)
    )
