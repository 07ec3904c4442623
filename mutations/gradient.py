"""Gradient-flow bugs: gradients that accumulate, vanish, never reach the model or never apply."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Operator
from mutator.patterns import expression_call, is_call_statement


class DropZeroGrad(Operator):
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

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return is_call_statement(node, "zero_grad")

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()


class ZeroGradAfterBackward(Operator):
    """Move ``zero_grad()`` from before ``backward()`` to between ``backward()`` and ``step()``.

    Bug: the freshly computed gradients are erased before the optimizer sees them.
    Impact: ``step()`` runs on zero (or ``None``) gradients, so the weights never move
    (Adam/SGD with weight decay still shrink them); the loss stays flat at its initial
    value. Fix: clear gradients before ``backward()``, never between it and ``step()``.
    Check: a params-changed check after one step, or gradient norm logged at ``step()``
    (zero every time).
    """

    name = "zero_grad_after_backward"
    category = "gradient"
    summary = "Move zero_grad() between backward() and step(): every update sees zero gradients."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="opt.zero_grad()\nout = model(x)\nloss.backward()\nopt.step()\n",
            after="out = model(x)\nloss.backward()\nopt.zero_grad()\nopt.step()\n",
        ),
    )
    non_examples = (
        "loss.backward()\nopt.zero_grad()\nopt.step()\n",
        "opt.zero_grad()\nopt.step()\n",
    )

    def _backward_after(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode | None:
        for statement in ctx.following_statements(node):
            if is_call_statement(statement, "backward"):
                return statement
        return None

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return is_call_statement(node, "zero_grad") and self._backward_after(node, ctx) is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, object]:
        backward = self._backward_after(node, ctx)
        assert backward is not None and expression_call(node) is not None
        moved = node.with_changes(leading_lines=())
        return {
            node: cst.RemoveFromParent(),
            backward: cst.FlattenSentinel([backward, moved]),
        }
