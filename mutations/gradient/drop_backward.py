"""The ``drop_backward`` operator (DropBackward)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import is_backward
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap


class DropBackward(Swap):
    """Delete the ``backward()`` call of the training step.

    Bug: the loss is computed and logged but never differentiated. Impact: no parameter
    ever receives a gradient, so ``optimizer.step()`` skips every parameter (``grad`` is
    ``None``); the weights stay at their initialisation and the loss stays flat at its
    initial value while the script runs without an error. Fix: call ``loss.backward()``
    (``scaler.scale(loss).backward()`` under AMP) between the forward pass and ``step()``.
    Check: a params-changed check after one step (nothing changes) or the gradient-norm
    log (no gradients at all); overfit-one-batch fails.
    """

    name = "drop_backward"
    category = "gradient"
    summary = "Remove loss.backward(): no gradients, the weights never change."
    expected = "breaks_training"
    witness = "fewer backward_calls", "no backward() runs: the model gets no gradient"
    crashes = ("NoneType",)
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
            """,
            after="""
                opt.zero_grad()
                loss = criterion(model(x), y)
                opt.step()
            """,
        ),
        Example(
            before="""
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            """,
            after="""
                scaler.step(optimizer)
                scaler.update()
            """,
        ),
    )
    non_examples = (
        """
            def backward(ctx, grad):
                return grad
        """,
        """
            loss = criterion(out, y)
            hook = loss.backward
        """,
        "grads = torch.autograd.grad(loss, params)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        return cst.RemoveFromParent() if is_backward(node) else None
