"""The ``step_before_backward`` operator (StepBeforeBackward)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import nearest_preceding_backward
from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    is_manual_step_block,
    is_optimizer_step,
    move_before,
)


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
    witness = "more empty_steps", "the optimizer steps before the gradients exist"
    # A hand-written update reads gradients that do not exist yet (None): its TypeError.
    crashes = ("NoneType",)
    node_types = (cst.SimpleStatementLine, cst.With, cst.For)
    examples = (
        # A hand-written update (no optimizer) is the step.
        Example(
            before="""
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    with torch.no_grad():
                        for p in model.parameters():
                            p.data.add_(p.grad, alpha=-lr)
                            p.grad.zero_()
            """,
            after="""
                for x, y in loader:
                    loss = criterion(model(x), y)
                    with torch.no_grad():
                        for p in model.parameters():
                            p.data.add_(p.grad, alpha=-lr)
                            p.grad.zero_()
                    loss.backward()
            """,
        ),
        Example(
            before="""
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            after="""
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    optimizer.step()
                    loss.backward()
            """,
        ),
        Example(
            before="""
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                self.optimizer.step()
            """,
            after="""
                self.optimizer.step()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            """,
        ),
    )
    non_examples = (
        """
            optimizer.step()
            loss.backward()
        """,
        """
            loss.backward()
            scheduler.step()
        """,
        """
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if not (is_optimizer_step(node, ctx) or is_manual_step_block(node, ctx)):
            return None
        backward = nearest_preceding_backward(ctx, node)
        return None if backward is None else move_before(node, backward)
