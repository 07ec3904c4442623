"""The ``retain_graph_left_in`` operator (RetainGraphLeftIn)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import find_arg, loops_around, method_name, parse_expr, with_keyword

# What a step function may hand back without keeping its graph alive: plain numbers.
_NUMBER_CALLS = frozenset({"item", "tolist", "float", "int"})
_ESCAPES = (cst.Yield, cst.Global, cst.Nonlocal)
_STORES = frozenset({"append", "extend", "add", "put", "update"})


def _keeps_nothing(value: cst.BaseExpression | None, ctx: Context) -> bool:
    """A returned value holding no tensor: nothing, a constant, ``loss.item()``, tuples of those."""
    if value is None or isinstance(value, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)):
        return (
            value is None
            or not isinstance(value, cst.Name)
            or value.value in ("None", "True", "False")
        )
    if isinstance(value, cst.Call):
        name = method_name(value) or (
            value.func.value if isinstance(value.func, cst.Name) else None
        )
        return name in _NUMBER_CALLS
    if isinstance(value, (cst.Tuple, cst.List)):
        return all(_keeps_nothing(element.value, ctx) for element in value.elements)
    return False


def _graph_freed_at_return(call: cst.Call, ctx: Context) -> bool:
    """Is ``call`` a backward in a function whose graph dies when it returns: nothing but
    numbers returned, nothing stored on an object or in a container, no generator?"""
    function = ctx.enclosing_function(call)
    if function is None or any(ctx.within(function, loop) for loop in loops_around(call, ctx)):
        return False  # a loop around it: the graph lives until the next step's loss replaces it
    if any(ctx.nodes_within(function, kind) for kind in _ESCAPES):
        return False
    if not all(_keeps_nothing(r.value, ctx) for r in ctx.nodes_within(function, cst.Return)):  # type: ignore[attr-defined]
        return False
    targets = [t.target for t in ctx.nodes_within(function, cst.AssignTarget)]  # type: ignore[attr-defined]
    targets += [a.target for a in ctx.nodes_within(function, cst.AugAssign)]  # type: ignore[attr-defined]
    if any(isinstance(target, (cst.Attribute, cst.Subscript)) for target in targets):
        return False  # ``self.last = out``: kept past the return
    return not any(
        method_name(inner) in _STORES  # type: ignore[arg-type]
        and not all(_keeps_nothing(arg.value, ctx) for arg in inner.args)  # type: ignore[attr-defined]
        for inner in ctx.nodes_within(function, cst.Call)
    )


class RetainGraphLeftIn(Swap):
    """Add ``retain_graph=True`` to a training ``backward()`` call.

    Bug: ``retain_graph=True`` is left in ``backward()`` (copied from a debugging session or
    from a double-backward snippet, or added to silence "Trying to backward through the graph
    a second time"). Impact: the saved activations of every step's graph are not freed by
    ``backward()``; they live until the loss tensor is dropped, so peak memory holds two
    steps' graphs at once, and where a tensor carries the graph from one step into the next
    (an undetached hidden state, a running loss total) each backward runs again through every
    earlier step: time and memory grow per step, with the error that would have flagged it
    silenced. Results are unchanged. A backward in a function that keeps no tensor past
    its return (a step function returning ``loss.item()``) is no site: the graph dies with
    the frame, so the mutant is equivalent. Fix: call ``loss.backward()`` without ``retain_graph``;
    detach whatever crosses steps. Check: peak memory per step against a run without it, the
    time per step over an epoch.
    """

    name = "retain_graph_left_in"
    category = "gradient"
    summary = "loss.backward(retain_graph=True) left in: every step's graph outlives its backward."
    expected = "cost_only"
    witness = "more retained_graph", "a retained graph is still alive at the next forward"
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
        # Equivalent: the step's graph dies with its frame; only a float leaves it.
        """
            def train_step(model, batch, criterion, optimizer):
                inputs, targets = batch
                optimizer.zero_grad()
                loss = criterion(model(inputs), targets)
                loss.backward()
                optimizer.step()
                return loss.item()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
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
        if _graph_freed_at_return(node, ctx):
            return NonSite(
                "equivalent: the loss is a local of a function that keeps no tensor past its "
                "return, so the retained graph is freed before the next step"
            )
        return with_keyword(node, "retain_graph", parse_expr("True"))
