"""The ``no_grad_training_step`` operator (NoGradTrainingStep)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    bound_names,
    disables_grad,
    expression_call,
    in_no_grad,
    method_name,
    module_alias,
    parse_expr,
    receiver,
)


def _assigned(statement: cst.CSTNode, ctx: Context) -> set[str]:
    """Names an assignment (or the assignments inside a ``with`` block) binds."""
    names: set[str] = set()
    for target in ctx.nodes_within(statement, cst.AssignTarget):
        names.update(bound_names(target.target))  # type: ignore[attr-defined]
    for assign in ctx.nodes_within(statement, cst.AugAssign):
        names.update(bound_names(assign.target))  # type: ignore[attr-defined]
    return names


def _backward_of(statement: cst.CSTNode) -> str | None:
    """``loss`` for ``loss.backward()`` or ``scaler.scale(loss).backward()``."""
    call = expression_call(statement)
    if call is None or method_name(call) != "backward":
        return None
    tensor = receiver(call)
    if isinstance(tensor, cst.Call) and method_name(tensor) == "scale" and len(tensor.args) == 1:
        tensor = tensor.args[0].value
    return tensor.value if isinstance(tensor, cst.Name) else None


class NoGradTrainingStep(Operator):
    """Wrap the statement that computes the training loss in ``with torch.no_grad():``.

    Bug: the training forward runs with gradients off: a ``with torch.no_grad():`` (or
    ``inference_mode``) copied from the evaluation code, or a context manager left around the
    step. Impact: the loss has no ``grad_fn`` and ``loss.backward()`` raises "element 0 of
    tensors does not require grad and does not have a grad_fn" on the first batch.
    (Written as ``loss.requires_grad_()`` to silence the error, the model would never
    learn.) Fix: compute the forward and the loss with gradients on; keep ``no_grad`` for
    evaluation. Check: ``assert loss.requires_grad`` before ``backward()``.
    """

    name = "no_grad_training_step"
    category = "mode"
    summary = "Compute the training loss under torch.no_grad(): backward() has no graph."
    expected = "crash"
    node_types = (cst.SimpleStatementLine, cst.With)
    examples = (
        Example(
            before="""
                import torch
                output = model(x)
                loss = criterion(output, y)
                loss.backward()
            """,
            after="""
                import torch
                output = model(x)
                with torch.no_grad():
                    loss = criterion(output, y)
                loss.backward()
            """,
        ),
        Example(
            before="""
                import torch
                with autocast():
                    logits, loss = model(X, Y)
                    loss = loss / accumulation_steps
                X, Y = get_batch("train")
                scaler.scale(loss).backward()
            """,
            after="""
                import torch
                with torch.no_grad():
                    with autocast():
                        logits, loss = model(X, Y)
                        loss = loss / accumulation_steps
                X, Y = get_batch("train")
                scaler.scale(loss).backward()
            """,
        ),
        # The loss is reassigned before backward: only the last assignment is the site.
        Example(
            before="""
                import torch
                loss = criterion(model(x), y)
                loss = loss / accum_steps
                loss.backward()
            """,
            after="""
                import torch
                loss = criterion(model(x), y)
                with torch.no_grad():
                    loss = loss / accum_steps
                loss.backward()
            """,
        ),
        # One function for training and evaluation: the backward sits in a block below.
        Example(
            before="""
                import torch
                def run_epoch(model, loader, optimizer=None):
                    for x, y in loader:
                        loss = criterion(model(x), y)
                        if optimizer is not None:
                            loss.backward()
            """,
            after="""
                import torch
                def run_epoch(model, loader, optimizer=None):
                    for x, y in loader:
                        with torch.no_grad():
                            loss = criterion(model(x), y)
                        if optimizer is not None:
                            loss.backward()
            """,
        ),
    )
    non_examples = (
        # Evaluation: no backward follows.
        """
            import torch
            loss = criterion(model(x), y)
            total += loss.item()
        """,
        # Already under no_grad (a gradient-free block): not this bug.
        """
            import torch
            with torch.no_grad():
                z = model(x)
            z.backward()
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        names = _assigned(node, ctx)
        torch = module_alias(ctx, "torch", node)
        if not names or torch is None or in_no_grad(node, ctx):
            return None
        if isinstance(node, cst.With) and (
            any(disables_grad(item.item, ctx) for item in node.items)
            or ctx.nodes_within(node, cst.FunctionDef)
        ):
            return None  # already gradient-free, or a block defining functions
        for following in ctx.following_statements(node):
            # The backward may sit in a block below: ``if optimizer is not None: ...``.
            lines = (
                [following]
                if isinstance(following, cst.SimpleStatementLine)
                else ctx.nodes_within(following, cst.SimpleStatementLine)
            )
            for line in lines:
                if _backward_of(line) in names:
                    return {node: _wrapped(node, torch)}
                if names & _assigned(line, ctx):
                    return None  # reassigned first: a later statement is the site
        return None


def _wrapped(statement: cst.CSTNode, torch: str) -> cst.With:
    """``with torch.no_grad():`` holding ``statement`` (its leading lines stay outside)."""
    assert isinstance(statement, (cst.SimpleStatementLine, cst.With))
    return cst.With(
        items=[cst.WithItem(item=parse_expr(f"{torch}.no_grad()"))],
        body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=())]),
        leading_lines=statement.leading_lines,
    )
