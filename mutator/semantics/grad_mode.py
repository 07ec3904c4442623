"""Gradient mode: which context managers and decorators switch autograd off or on.

Semantics follow torch: ``no_grad()`` and ``inference_mode()`` / ``inference_mode(True)``
turn gradients off; ``enable_grad()`` and ``set_grad_enabled(True)`` turn them back on;
``set_grad_enabled(False)`` turns them off; ``inference_mode(False)`` only leaves inference
mode and does NOT re-enable gradients inside a ``no_grad`` block. The innermost switch
around a node decides.
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics.names import resolve
from mutator.semantics.scope import function_uses
from mutator.semantics.syntax import is_false, is_true

NO_GRAD = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
ENABLE_GRAD = frozenset(
    {"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"}
)
INFERENCE_MODE = frozenset({"torch.inference_mode", "torch.autograd.grad_mode.inference_mode"})
SET_GRAD_ENABLED = frozenset(
    {
        "torch.set_grad_enabled",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.grad_mode.set_grad_enabled",
    }
)


def grad_switch(expr: cst.BaseExpression, ctx: Context) -> bool | None:
    """What a ``with`` item or decorator does to autograd: False (off), True (on), or None
    (no effect on gradients, or not known statically)."""
    if not isinstance(expr, cst.Call):  # a decorator used uncalled: ``@torch.no_grad``
        if resolve(expr, ctx, strict=False).matches(NO_GRAD | INFERENCE_MODE):
            return False
        return True if resolve(expr, ctx, strict=False).matches(ENABLE_GRAD) else None
    callee = resolve(expr.func, ctx, strict=False)
    if callee.matches(NO_GRAD):
        return False if not expr.args else None
    if callee.matches(ENABLE_GRAD):
        return True if not expr.args else None
    if callee.matches(INFERENCE_MODE):
        # inference_mode(False) leaves gradients as they were.
        return False if not expr.args or is_true(expr.args[0].value) else None
    if callee.matches(SET_GRAD_ENABLED) and len(expr.args) == 1:
        flag = expr.args[0].value
        return False if is_false(flag) else True if is_true(flag) else None
    return None


def disables_grad(expr: cst.BaseExpression, ctx: Context) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``
    (and, for decorators, the uncalled ``torch.no_grad``)."""
    return grad_switch(expr, ctx) is False


def in_no_grad(node: cst.CSTNode, ctx: Context) -> bool:
    """Do gradients stay off at ``node``? The innermost ``with`` block or decorated function
    around it that switches grad mode decides."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.With):
            switches = [item.item for item in ancestor.items]
        elif isinstance(ancestor, cst.FunctionDef):
            switches = [decorator.decorator for decorator in ancestor.decorators]
        else:
            continue
        decided = [s for s in (grad_switch(sw, ctx) for sw in switches) if s is not None]
        if decided:
            return not decided[-1]  # ``with a, b:`` enters b last
    return False


def only_used_without_grad(function: cst.FunctionDef, ctx: Context) -> bool:
    """Is every use of the script's ``function`` (a call, or a reference handed on) inside a
    block or function that disables gradients? Then a ``no_grad`` decorator on it changes
    nothing (issue 22: a diffusion model's sampling methods, decorated and called from a
    decorated sampler or an ``inference_mode`` block). False for a function never used."""
    uses = function_uses(function, ctx)
    return bool(uses) and all(in_no_grad(use, ctx) for use in uses)  # type: ignore[union-attr]
