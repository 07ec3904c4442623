"""The ``drop_hidden_detach`` operator (DropHiddenDetach)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    callee_name,
    dotted_name,
    dotted_names_in,
    in_no_grad,
    single_assignment,
)


class DropHiddenDetach(Swap):
    """Remove the detach of a recurrent hidden state carried across batches.

    Bug: truncated back-propagation through time needs ``hidden = hidden.detach()`` (or
    ``repackage_hidden(hidden)``) at each batch; without it the new graph links to the
    previous batch's graph. Impact: the second ``backward()`` reaches into the previous,
    already freed graph and raises "Trying to backward through the graph a second
    time"; the tempting "fix" ``retain_graph=True`` instead makes memory and step time
    grow with every batch. Fix: detach the carried state once per batch. Check: the
    crash itself at step two, or a memory watch / time-per-step log when retained.
    """

    name = "drop_hidden_detach"
    category = "gradient"
    summary = "Remove hidden = hidden.detach() in a TBPTT loop: backward reaches freed graphs."
    expected = "crash"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                for x, y in batches:
                    hidden = repackage_hidden(hidden)
                    out, hidden = model(x, hidden)
                    loss = criterion(out, y)
                    loss.backward()
            """,
            after="""
                for x, y in batches:
                    out, hidden = model(x, hidden)
                    loss = criterion(out, y)
                    loss.backward()
            """,
        ),
        Example(
            before="""
                for x, y in batches:
                    out, (h, c) = self.lstm(x, (h, c))
                    h, c = h.detach(), c.detach()
                    loss.backward()
            """,
            after="""
                for x, y in batches:
                    out, (h, c) = self.lstm(x, (h, c))
                    loss.backward()
            """,
        ),
    )
    non_examples = (
        # Not carried across iterations of a loop.
        "hidden = hidden.detach()\n",
        """
            for x in batches:
                target = output.detach()
        """,
        """
            for x in batches:
                with torch.no_grad():
                    h = h.detach()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assign = single_assignment(node)
        if assign is None:
            return None
        if ctx.enclosing(node, (cst.For, cst.While)) is None or in_no_grad(node, ctx):
            return None
        target = assign.targets[0].target
        parts = [e.value for e in target.elements] if isinstance(target, cst.Tuple) else [target]
        state = [dotted_name(part) for part in parts]
        if None in state or not set(state) <= dotted_names_in(assign.value, ctx):
            return None  # only re-binding the same state to its detached self
        if not any(
            "detach" in (callee_name(call) or "") or "repackage" in (callee_name(call) or "")
            for call in ctx.nodes_within(assign.value, cst.Call)
        ):
            return None
        return cst.RemoveFromParent()
