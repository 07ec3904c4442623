"""Analyses the gradient operators share (private to this package)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import (
    callee_name,
    enclosing_function,
    expression_call,
    is_call_statement,
    is_optimizer_step,
    method_name,
    per_module,
)

CLIP_FUNCTIONS = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"})


def is_backward(statement: cst.CSTNode) -> bool:
    """``loss.backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``."""
    return is_call_statement(statement, "backward")


def clip_call(statement: cst.CSTNode) -> cst.Call | None:
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
    if call is not None and callee_name(call) in CLIP_FUNCTIONS:
        return call
    return None


def backward_calls(ctx: Context, near: cst.CSTNode) -> list[cst.Call]:
    """The ``.backward(...)`` calls in the same function (or module level) as ``near``."""
    return backward_calls_by_scope(ctx).get(enclosing_function(near, ctx), [])


@per_module
def backward_calls_by_scope(ctx: Context) -> dict[cst.FunctionDef | None, list[cst.Call]]:
    found: dict[cst.FunctionDef | None, list[cst.Call]] = {}
    for call in ctx.nodes(cst.Call):
        if method_name(call) == "backward":  # type: ignore[arg-type]
            found.setdefault(enclosing_function(call, ctx), []).append(call)  # type: ignore[arg-type]
    return found


def nearest_preceding_backward(ctx: Context, statement: cst.CSTNode) -> cst.CSTNode | None:
    """The first ``backward()`` of the ones that fill the gradients ``statement`` (a step, a
    clip) reads: back to the previous ``zero_grad()`` or step. A GAN discriminator backwards
    its real and its fake loss before one step; landing between the two would leave half of
    the batch's gradients in place (issue 29)."""
    found = None
    for candidate in reversed(list(ctx.preceding_statements(statement))):
        if is_backward(candidate):
            found = candidate
        elif is_call_statement(candidate, "zero_grad") or is_optimizer_step(candidate, ctx):
            break
    return found


def last_backward_before_step(ctx: Context, statement: cst.CSTNode) -> cst.CSTNode | None:
    """The last ``backward()`` after ``statement`` (a ``zero_grad()``) before the step that
    uses the gradients (or before the block ends)."""
    found = None
    for candidate in ctx.following_statements(statement):
        if is_backward(candidate):
            found = candidate
        elif is_optimizer_step(candidate, ctx):
            break
    return found
