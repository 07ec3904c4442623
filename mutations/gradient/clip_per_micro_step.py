"""The ``clip_per_micro_step`` operator (ClipPerMicroStep)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import CLIP_FUNCTIONS, is_backward
from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import callee_name, insert_before, is_optimizer_step


def _clips(statement: cst.CSTNode, ctx: Context) -> bool:
    """A clipping line, or an ``if`` (no ``else``) that only guards clipping lines."""
    if isinstance(statement, cst.If):
        body = statement.body
        return (
            statement.orelse is None
            and isinstance(body, cst.IndentedBlock)
            and all(_clips(inner, ctx) for inner in body.body)
        )
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    return any(callee_name(c) in CLIP_FUNCTIONS for c in ctx.nodes_within(statement, cst.Call))  # type: ignore[arg-type]


class ClipPerMicroStep(Operator):
    """Move gradient clipping out of the update block of a gradient-accumulation loop, so
    it runs after every micro-batch's ``backward()``.

    Bug: with accumulation (``backward()`` every micro-batch, ``optimizer.step()`` every k
    of them), the clipping sits next to the backward instead of inside the ``if`` that
    steps. Real fix: ApolloResearch/e2e_sae@84857f2 (``clip_grad_norm_`` ran after every
    micro-batch before the ``if is_grad_step:`` block). Impact: each partial sum of the
    gradient is clipped: the first micro-batches' contributions are scaled down again and
    again while the last ones are not, so the accumulated gradient is neither the clipped
    full-batch gradient nor the sum of micro-batch gradients; with a threshold that
    binds, updates shrink and lean towards the last micro-batches; the logged gradient
    norm is a partial one. Fix: clip once, inside the update block, right before
    ``optimizer.step()``. Check: log the clip's returned norm together with the step count;
    it must be recorded once per update.
    """

    name = "clip_per_micro_step"
    category = "gradient"
    summary = "Gradient clipping moved out of the accumulation's update block: every micro-step."
    expected = "degrades"
    witness = "more clip_calls", "clipping runs on every micro-batch, not once per step"
    node_types = (cst.SimpleStatementLine, cst.If)
    examples = (
        Example(
            before="""
                for step, batch in enumerate(loader):
                    loss = model(batch) / accum_steps
                    loss.backward()
                    if (step + 1) % accum_steps == 0:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            after="""
                for step, batch in enumerate(loader):
                    loss = model(batch) / accum_steps
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    if (step + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        ),
    )
    non_examples = (
        # No accumulation: clipping already runs once per step.
        """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
        """,
        # A guard of the clipping alone is not the update block.
        """
            for x, y in loader:
                criterion(model(x), y).backward()
                if max_norm is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if not _clips(node, ctx):
            return None
        parent = ctx.parent(ctx.parent(node))
        if (
            isinstance(node, cst.SimpleStatementLine)
            and isinstance(parent, cst.If)
            and _clips(parent, ctx)
        ):
            return None  # the guard around it is the site
        block = ctx.parent(node)
        update = ctx.parent(block) if isinstance(block, cst.IndentedBlock) else None
        if not isinstance(update, cst.If) or update.orelse is not None:
            return None
        if not any(is_optimizer_step(s, ctx) for s in block.body):  # type: ignore[union-attr]
            return None
        if not any(is_backward(s) for s in ctx.preceding_statements(update)):
            return None  # backward every iteration, step under the ``if``: accumulation
        # The clipping sits inside its anchor: the update block is rebuilt without it.
        moved = node.with_changes(leading_lines=())  # type: ignore[attr-defined]
        return insert_before(update, moved, anchor_becomes=update.deep_remove(node))  # type: ignore[arg-type]
