"""The ``amp_without_grad_scaler`` operator (AmpWithoutGradScaler)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    enclosing_function,
    expression_call,
    find_arg,
    method_call,
    method_name,
    receiver,
    receiver_kind,
)


def _scaler_call(statement: cst.CSTNode, method: str, ctx: Context) -> cst.Call | None:
    """``scaler.<method>(...)`` as a statement, on a GradScaler, else None."""
    call = expression_call(statement)
    if call is None or method_name(call) != method:
        return None
    return call if receiver_kind(receiver(call), ctx) == "scaler" else None


class AmpWithoutGradScaler(Operator):
    """Take the GradScaler out of a mixed-precision step: plain ``loss.backward()`` and
    ``optimizer.step()``, no ``unscale_``/``update``.

    Bug: autocast is kept but the loss is no longer scaled (the scaler removed in a
    refactor, or never added when float16 autocast was switched on). Impact: under float16
    autocast, small gradients underflow to zero in the half-precision backward: layers far
    from the loss, or all of them once the loss is small, stop learning; the loss plateaus
    early with no error. Equivalent where the scaler was disabled (CPU, bfloat16, or
    ``enabled=False``). Fix: ``scaler.scale(loss).backward()``, ``scaler.step(optimizer)``,
    ``scaler.update()`` (and ``scaler.unscale_`` before clipping). Check: the share of
    exactly-zero gradient entries per layer, or compare against an fp32 run.
    """

    name = "amp_without_grad_scaler"
    category = "numerics"
    summary = "Remove the GradScaler from an AMP step: float16 gradients underflow to zero."
    expected = "degrades"
    witness = "fewer scaler_scale", "no enabled GradScaler scales the AMP loss"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                scaler = torch.cuda.amp.GradScaler()
                with autocast():
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            """,
            after="""
                scaler = torch.cuda.amp.GradScaler()
                with autocast():
                    loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            """,
        ),
        Example(
            before="""
                scaler = torch.amp.GradScaler("cuda")
                def step(loss):
                    scaler.scale(loss).backward()
                    scaler.unscale_(opt)
                    clip_grad_norm_(params, 1.0)
                    scaler.step(opt)
                    scaler.update()
            """,
            after="""
                scaler = torch.amp.GradScaler("cuda")
                def step(loss):
                    loss.backward()
                    clip_grad_norm_(params, 1.0)
                    opt.step()
            """,
        ),
    )
    non_examples = (
        """
            loss.backward()
            optimizer.step()
        """,
        # Not a GradScaler: a feature scaler's transform.
        """
            scaler = StandardScaler()
            x = scaler.scale(x)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        call = expression_call(node)
        if call is None or method_name(call) != "backward" or call.args:
            return None
        scaled = receiver(call)
        if not isinstance(scaled, cst.Call) or method_name(scaled) != "scale":
            return None
        scaler = receiver(scaled)
        loss = find_arg(scaled, position=0)
        if receiver_kind(scaler, ctx) != "scaler" or loss is None or len(scaled.args) != 1:
            return None
        edits: Edits = {
            node: node.with_changes(body=[cst.Expr(method_call(loss.value, "backward"))])
        }
        function = enclosing_function(node, ctx)
        for statement in ctx.nodes(cst.SimpleStatementLine):
            if enclosing_function(statement, ctx) is not function:
                continue
            if _scaler_call(statement, "update", ctx) or _scaler_call(statement, "unscale_", ctx):
                edits[statement] = cst.RemoveFromParent()
                continue
            step = _scaler_call(statement, "step", ctx)
            optimizer = find_arg(step, position=0) if step is not None else None
            if optimizer is not None and len(step.args) == 1:
                edits[statement] = statement.with_changes(
                    body=[cst.Expr(method_call(optimizer.value, "step"))]
                )
        # Without the step rewritten the mutant would still scale the update: not this bug.
        return edits if len(edits) > 1 else None
