"""The ``retain_graph_left_in`` operator (RetainGraphLeftIn)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import find_arg, method_name, parse_expr, with_keyword


class RetainGraphLeftIn(Swap):
    """Add ``retain_graph=True`` to a training ``backward()`` call.

    Bug: ``retain_graph=True`` is left in ``backward()`` (copied from a debugging session or
    from a double-backward snippet, or added to silence "Trying to backward through the graph
    a second time"). Impact: the saved activations of every step's graph are not freed by
    ``backward()``; they live until the loss tensor is dropped, so peak memory holds two
    steps' graphs at once, and where a tensor carries the graph from one step into the next
    (an undetached hidden state, a running loss total) each backward runs again through every
    earlier step: time and memory grow per step, with the error that would have flagged it
    silenced. Results are unchanged. Fix: call ``loss.backward()`` without ``retain_graph``;
    detach whatever crosses steps. Check: peak memory per step against a run without it, the
    time per step over an epoch.
    """

    name = "retain_graph_left_in"
    category = "gradient"
    summary = "loss.backward(retain_graph=True) left in: every step's graph outlives its backward."
    expected = "cost_only"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                loss = criterion(model(x), y)
                loss.backward()
            """,
            after="""
                loss = criterion(model(x), y)
                loss.backward(retain_graph=True)
            """,
        ),
        Example(
            before="scaler.scale(loss).backward()\n",
            after="scaler.scale(loss).backward(retain_graph=True)\n",
        ),
        Example(
            before="accelerator.backward(loss)\n",
            after="accelerator.backward(loss, retain_graph=True)\n",
        ),
    )
    non_examples = (
        "loss.backward(retain_graph=True)\n",
        # A double backward (gradient penalty) needs the graph: already explicit.
        "grads = torch.autograd.grad(out, x, create_graph=True)\n",
        "loss.backward(create_graph=True)\n",
        "torch.autograd.backward(loss)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        if method_name(node) != "backward" or not isinstance(node.func, cst.Attribute):
            return None
        if any(arg.star for arg in node.args):
            return None
        if find_arg(node, "retain_graph") or find_arg(node, "create_graph"):
            return None
        # torch.autograd.backward(tensors, ...) takes retain_graph too, but is rare in loops
        # and its positional layout differs: leave it alone.
        if isinstance(node.func.value, cst.Attribute) and node.func.value.attr.value == "autograd":
            return None
        return with_keyword(node, "retain_graph", parse_expr("True"))
