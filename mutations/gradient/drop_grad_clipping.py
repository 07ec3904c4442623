"""The ``drop_grad_clipping`` operator (DropGradClipping)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import CLIP_FUNCTIONS, clip_call
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    callee_name,
    expression_call,
    find_arg,
    method_name,
    parse_expr,
    reads_grad,
    with_arg_value,
)
from mutator.semantics.modules import imported_definition


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
    node_types = (cst.SimpleStatementLine, cst.If)
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
        # A one-line ``if`` (AWD-LSTM) and the script's own clipping helper (issue 29).
        Example(
            before="""
                import torch
                loss.backward()
                if args.clip: torch.nn.utils.clip_grad_norm_(params, args.clip)
                optimizer.step()
            """,
            after="""
                import torch
                loss.backward()
                optimizer.step()
            """,
        ),
        Example(
            before="""
                def clip_gradient(optimizer, grad_clip):
                    for group in optimizer.param_groups:
                        for param in group["params"]:
                            if param.grad is not None:
                                param.grad.data.clamp_(-grad_clip, grad_clip)

                loss.backward()
                clip_gradient(optimizer, 5.0)
                optimizer.step()
            """,
            after="""
                def clip_gradient(optimizer, grad_clip):
                    for group in optimizer.param_groups:
                        for param in group["params"]:
                            if param.grad is not None:
                                param.grad.data.clamp_(-grad_clip, grad_clip)

                loss.backward()
                optimizer.step()
            """,
        ),
    )
    non_examples = ("x = torch.clamp(x, -1, 1)\n",)

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if isinstance(node, cst.If):  # ``if args.clip: clip_grad_norm_(...)`` on one line
            suite = node.body
            alone = isinstance(suite, cst.SimpleStatementSuite) and len(suite.body) == 1
            line = cst.SimpleStatementLine(body=suite.body) if alone else None  # type: ignore[union-attr]
            if line is None or node.orelse is not None or expression_call(line) is None:
                return None
            return cst.RemoveFromParent() if clip_call(line) is not None else None
        call = clip_call(node)
        if call is None:
            helper_call = expression_call(node)
            if helper_call is not None and _clipping_helper(helper_call, ctx):
                return cst.RemoveFromParent()  # ``clip_gradient(optimizer, grad_clip)``
            return None
        if expression_call(node) is not None:
            return cst.RemoveFromParent()
        # ``norm = clip_grad_norm_(params, 1.0)`` logged later (issue 29): the norm is still
        # computed and returned, nothing is clipped.
        limit = find_arg(call, "max_norm", 1)
        if callee_name(call) != "clip_grad_norm_" or limit is None:
            return None
        return node.deep_replace(call, with_arg_value(call, limit, parse_expr('float("inf")')))


def _clipping_helper(call: cst.Call, ctx: Context) -> bool:
    """Is ``call`` a call of the script's (or the project's) own function whose body clips
    gradients: ``clip_grad_norm_``/``clip_grad_value_``, or ``p.grad`` clamped in place?"""
    name = callee_name(call)
    if name is None:
        return False
    local = [f for f in ctx.nodes(cst.FunctionDef) if f.name.value == name]  # type: ignore[attr-defined]
    if isinstance(call.func, cst.Name) and len(local) == 1:
        helper, where = local[0], ctx
    else:
        found = imported_definition(call.func, ctx)
        if found is None or not isinstance(found[0], cst.FunctionDef):
            return False
        helper, where = found
    calls = where.nodes_within(helper, cst.Call)
    if any(method_name(inner) in _STEP_METHODS for inner in calls):  # type: ignore[arg-type]
        return False  # a training step that also clips: not a clipping helper
    return any(
        callee_name(inner) in CLIP_FUNCTIONS  # type: ignore[arg-type]
        or (method_name(inner) in ("clamp_", "clip_") and reads_grad(inner.func))  # type: ignore[arg-type, attr-defined]
        for inner in calls
    )


_STEP_METHODS = frozenset({"backward", "step", "zero_grad"})
