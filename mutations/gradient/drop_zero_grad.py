"""The ``drop_zero_grad`` operator (DropZeroGrad)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import is_call_statement


class DropZeroGrad(Swap):
    """Delete the ``zero_grad()`` call of the training step.

    Bug: gradients are never cleared, so every ``backward()`` adds onto the sum of all
    earlier ones. Impact: the update direction is dominated by stale gradients and its
    size grows with the step count, as if the learning rate kept rising; with momentum
    or Adam the loss typically stalls, oscillates or diverges. Fix: call
    ``optimizer.zero_grad()`` (or ``model.zero_grad()``) once per step, before
    ``backward()``. Check: log the global gradient norm per step (it climbs steadily
    instead of settling) or overfit one batch (it fails).
    """

    name = "drop_zero_grad"
    category = "gradient"
    summary = "Remove optimizer.zero_grad(): gradients accumulate across steps."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="opt.zero_grad()\nloss.backward()\nopt.step()\n",
            after="loss.backward()\nopt.step()\n",
        ),
        Example(
            before=(
                "class T:\n    def step(self, loss):\n"
                "        self.optimizer.zero_grad(set_to_none=True)\n"
                "        loss.backward()\n        self.optimizer.step()\n"
            ),
            after=(
                "class T:\n    def step(self, loss):\n"
                "        loss.backward()\n        self.optimizer.step()\n"
            ),
        ),
        Example(
            before="for x in xs:\n    model.zero_grad()\n",
            after="for x in xs:\n    pass\n",
        ),
    )
    non_examples = (
        "loss.backward()\nopt.step()\n",
        "zero_grad = True\n",
        "grads = opt.zero_grad\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if not (is_call_statement(node, "zero_grad")):
            return None
        return cst.RemoveFromParent()
