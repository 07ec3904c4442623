"""The ``clip_before_backward`` operator (ClipBeforeBackward)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import clip_call, nearest_preceding_backward
from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import move_before


class ClipBeforeBackward(Operator):
    """Move gradient clipping above ``loss.backward()`` in the same block.

    Bug: the clip runs before this step's gradients exist. Impact: it clips the cleared
    (``None`` or zero) gradients left by ``zero_grad()``, i.e. nothing, and the fresh
    gradients reach ``step()`` unclipped: the same as no clipping at all, which is
    harmless on a tame loop and a loss spike or divergence where clipping mattered (RNNs,
    high learning rates). The returned norm, if logged, reads zero. Fix: clip after
    ``backward()`` (and ``scaler.unscale_``) and before ``step()``. Check: log the norm
    that the clipping call returns (zero every step) next to the gradient norm at
    ``step()`` (above ``max_norm``).
    """

    name = "clip_before_backward"
    category = "gradient"
    summary = "Move gradient clipping before loss.backward(): it clips stale/empty gradients."
    expected = "silent"
    witness = "more clip_before_backward", "gradient clipping runs before this step's backward"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            """,
            after="""
                optimizer.zero_grad()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                loss.backward()
                optimizer.step()
            """,
        ),
        Example(
            before="""
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            """,
            after="""
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
            """,
        ),
    )
    non_examples = (
        """
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            loss.backward()
        """,
        """
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if clip_call(node) is None:
            return None
        backward = nearest_preceding_backward(ctx, node)
        return None if backward is None else move_before(node, backward)
