"""The ``drop_zero_grad`` operator (DropZeroGrad)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import is_call_statement, is_manual_zero_grad


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
    witness = "more stale_grad", "a backward adds into a .grad no zero_grad cleared"
    node_types = (cst.SimpleStatementLine,)
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
                    loss.backward()
                    with torch.no_grad():
                        for p in model.parameters():
                            p.data.add_(p.grad, alpha=-lr)
            """,
        ),
        Example(
            before="""
                opt.zero_grad()
                loss.backward()
                opt.step()
            """,
            after="""
                loss.backward()
                opt.step()
            """,
        ),
        Example(
            before="""
                class T:
                    def step(self, loss):
                        self.optimizer.zero_grad(set_to_none=True)
                        loss.backward()
                        self.optimizer.step()
            """,
            after="""
                class T:
                    def step(self, loss):
                        loss.backward()
                        self.optimizer.step()
            """,
        ),
        Example(
            before="""
                for x in xs:
                    model.zero_grad()
            """,
            after="""
                for x in xs:
                    pass
            """,
        ),
    )
    non_examples = (
        """
            loss.backward()
            opt.step()
        """,
        "zero_grad = True\n",
        "grads = opt.zero_grad\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        zeroes = is_call_statement(node, "zero_grad") or is_manual_zero_grad(node)
        return cst.RemoveFromParent() if zeroes else None
