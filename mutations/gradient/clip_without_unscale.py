"""The ``clip_without_unscale`` operator (ClipWithoutUnscale)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import clip_call
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import expression_call, method_name, receiver, receiver_kind


def is_unscale(statement: cst.CSTNode, ctx: Context) -> bool:
    """``scaler.unscale_(optimizer)`` as a statement, on a GradScaler."""
    call = expression_call(statement)
    return (
        call is not None
        and method_name(call) == "unscale_"
        and receiver_kind(receiver(call), ctx) == "scaler"
    )


class ClipWithoutUnscale(Swap):
    """Delete ``scaler.unscale_(optimizer)`` before gradient clipping under AMP.

    Bug: with a GradScaler the gradients after ``scaler.scale(loss).backward()`` are
    multiplied by the loss scale (65536 at first); ``unscale_`` divides it out so that
    clipping compares true norms. Without it the clip sees norms thousands of times too
    large. Impact: on every step the gradients are clipped to ``max_norm / scale`` of their
    real size: the updates shrink by the loss scale (training stalls while the loss scale
    stays high), and the threshold no longer means anything. Only where the scaler is
    enabled (CUDA float16); a disabled scaler (CPU, bfloat16) makes this equivalent.
    Fix: call ``scaler.unscale_(optimizer)`` right before ``clip_grad_norm_``. Check: the
    norm returned by ``clip_grad_norm_`` is ~``scaler.get_scale()`` times the fp32 norm.
    """

    name = "clip_without_unscale"
    category = "gradient"
    summary = "Remove scaler.unscale_() before clipping: AMP-scaled gradients are clipped."
    expected = "degrades"
    witness = "fewer scaler_unscale", "clipping sees gradients no GradScaler unscaled"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                scaler = torch.cuda.amp.GradScaler()
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
            """,
            after="""
                scaler = torch.cuda.amp.GradScaler()
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
            """,
        ),
        Example(
            before="""
                if grad_clip != 0.0:
                    scaler.unscale_(optimizer)
                    norm = clip_grad_norm_(model.parameters(), grad_clip)
            """,
            after="""
                if grad_clip != 0.0:
                    norm = clip_grad_norm_(model.parameters(), grad_clip)
            """,
        ),
    )
    non_examples = (
        # Unscaled for logging the norm, no clipping follows: removing it changes a print.
        """
            scaler.unscale_(optimizer)
            print(grad_norm(model))
            scaler.step(optimizer)
        """,
        """
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if not is_unscale(node, ctx):
            return None
        # The bug is about clipping: the next statements of the block must clip.
        for following in ctx.following_statements(node):
            if clip_call(following) is not None:
                return cst.RemoveFromParent()
        return None
