"""The ``step_before_backward`` operator (StepBeforeBackward)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import nearest_preceding_backward
from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
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
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "for x, y in loader:\n    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n"
                "    loss.backward()\n    optimizer.step()\n"
            ),
            after=(
                "for x, y in loader:\n    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n"
                "    optimizer.step()\n    loss.backward()\n"
            ),
        ),
        Example(
            before=(
                "loss.backward()\nnn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                "self.optimizer.step()\n"
            ),
            after=(
                "self.optimizer.step()\nloss.backward()\n"
                "nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            ),
        ),
    )
    non_examples = (
        "optimizer.step()\nloss.backward()\n",
        "loss.backward()\nscheduler.step()\n",
        "loss.backward()\nif (i + 1) % accum_steps == 0:\n    optimizer.step()\n",
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if not (is_optimizer_step(node, ctx) and nearest_preceding_backward(ctx, node) is not None):
            return None
        backward = nearest_preceding_backward(ctx, node)
        assert backward is not None
        return move_before(node, backward)
