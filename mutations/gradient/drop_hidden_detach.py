"""The ``drop_hidden_detach`` operator (DropHiddenDetach)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    callee_name,
    dotted_name,
    dotted_names_in,
    drives_training,
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
    grow with every batch. An evaluation loop (no backward) and a detached value that is
    no state handed back to the model are no sites. Fix: detach the carried state once per batch. Check: the
    crash itself at step two, or a memory watch / time-per-step log when retained.
    """

    name = "drop_hidden_detach"
    category = "gradient"
    summary = "Remove hidden = hidden.detach() in a TBPTT loop: backward reaches freed graphs."
    expected = "crash"
    witness = "more graph_kept", "the hidden state keeps the last chunk's graph alive"
    crashes = ("backward through the graph a second time",)
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
        # No hidden state (issue 22, minimalRL's PPO): the advantage turned into numpy.
        """
            for i in range(K_epoch):
                delta = td_target - model.v(s)
                delta = delta.detach().numpy()
                loss.mean().backward()
        """,
        # Evaluation runs no backward (AWD-LSTM's evaluate).
        """
            def evaluate(data_source):
                hidden = model.init_hidden(10)
                for i in range(0, data_source.size(0) - 1, bptt):
                    output, hidden = model(data, hidden)
                    hidden = repackage_hidden(hidden)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        assign = single_assignment(node)
        if assign is None:
            return None
        loop = ctx.enclosing(node, (cst.For, cst.While))
        if loop is None:
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
        if not _fed_back(set(state), loop, assign, ctx):  # type: ignore[arg-type]
            return None  # ``delta = delta.detach().numpy()``: no state handed to the model
        if in_no_grad(node, ctx) or not drives_training(loop, ctx):
            return NonSite("evaluation runs no backward: a graph kept there only costs memory")
        return cst.RemoveFromParent()


def _fed_back(state: set[str], loop: cst.CSTNode, assign: cst.Assign, ctx: Context) -> bool:
    """Is the state handed to a call in the loop (the model's next step), other than the
    detach itself?"""
    for call in ctx.nodes_within(loop, cst.Call):
        if ctx.within(assign, call):
            continue
        for arg in call.args:  # type: ignore[attr-defined]
            if dotted_names_in(arg.value, ctx) & state:
                return True
    return False
