"""The ``drop_grad_clipping`` operator (DropGradClipping)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import clip_call
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import callee_name, expression_call, find_arg, parse_expr, with_arg_value


class DropGradClipping(Swap):
    """Delete the gradient-clipping call (``clip_grad_norm_`` / ``clip_grad_value_``).

    Bug: clipping is removed (a refactor, a copied loop without it). Impact: on a small,
    well-conditioned loop at a sane learning rate nothing changes; where clipping was
    holding the run together (RNNs, transformers, high learning rates, the first steps
    with a large loss) a gradient spike produces a huge update: loss spikes, then
    divergence or NaN. Fix: clip after ``backward()`` (after ``scaler.unscale_`` under AMP)
    and before ``step()``. Check: the gradient-norm log (spikes far above the former
    ``max_norm``), loss spikes in the train curve.
    """

    name = "drop_grad_clipping"
    category = "gradient"
    summary = "Remove clip_grad_norm_/clip_grad_value_: gradient spikes pass unclipped."
    expected = "silent"
    witness = "fewer clip_active", "no clipping cuts a gradient the reference's cut"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
            """,
            after="""
                loss.backward()
                optimizer.step()
            """,
        ),
        Example(
            before="""
                from torch.nn.utils import clip_grad_value_
                loss.backward()
                clip_grad_value_(model.parameters(), 0.5)
            """,
            after="""
                from torch.nn.utils import clip_grad_value_
                loss.backward()
            """,
        ),
        # The norm is logged afterwards (issue 29): it is still computed, nothing clipped.
        Example(
            before="""
                grad_norm = clip_grad_norm_(model.parameters(), 1.0)
                print(grad_norm)
            """,
            after="""
                grad_norm = clip_grad_norm_(model.parameters(), float("inf"))
                print(grad_norm)
            """,
        ),
    )
    non_examples = ("x = torch.clamp(x, -1, 1)\n",)

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        call = clip_call(node)
        if call is None:
            return None
        if expression_call(node) is not None:
            return cst.RemoveFromParent()
        # ``norm = clip_grad_norm_(params, 1.0)`` logged later (issue 29): the norm is still
        # computed and returned, nothing is clipped.
        limit = find_arg(call, "max_norm", 1)
        if callee_name(call) != "clip_grad_norm_" or limit is None:
            return None
        return node.deep_replace(call, with_arg_value(call, limit, parse_expr('float("inf")')))
