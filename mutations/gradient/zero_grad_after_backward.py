"""The ``zero_grad_after_backward`` operator (ZeroGradAfterBackward)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import last_backward_before_step
from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    is_call_statement,
    move_after,
)


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
    witness = "more empty_steps", "the optimizer steps on just-cleared gradients"
    # A hand-written update reads the cleared (None) gradients: its TypeError is the step.
    crashes = ("NoneType",)
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                opt.zero_grad()
                out = model(x)
                loss.backward()
                opt.step()
            """,
            after="""
                out = model(x)
                loss.backward()
                opt.zero_grad()
                opt.step()
            """,
        ),
        # Two backward calls feed one step (a GAN discriminator): after the last (issue 29).
        Example(
            before="""
                optimizer_D.zero_grad()
                real_loss.backward()
                fake_loss.backward()
                optimizer_D.step()
            """,
            after="""
                real_loss.backward()
                fake_loss.backward()
                optimizer_D.zero_grad()
                optimizer_D.step()
            """,
        ),
    )
    non_examples = (
        """
            loss.backward()
            opt.zero_grad()
            opt.step()
        """,
        """
            opt.zero_grad()
            opt.step()
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if not is_call_statement(node, "zero_grad"):
            return None
        backward = last_backward_before_step(ctx, node)
        return None if backward is None else move_after(node, backward)
