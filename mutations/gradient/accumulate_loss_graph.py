"""The ``accumulate_loss_graph`` operator (AccumulateLossGraph)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import backward_calls
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    dotted_name,
    dotted_names_in,
    in_no_grad,
    method_name,
)


class AccumulateLossGraph(Swap):
    """Accumulate the loss tensor instead of its value: ``total_loss += loss``.

    Bug: ``.item()`` is dropped from the running-loss sum. Impact: ``total_loss`` becomes a
    tensor that references every step's autograd graph, so activations of all steps of
    the epoch stay alive: memory grows linearly with the step count (an OOM on a GPU run
    with a long epoch) and steps slow down; the logged number is now a tensor. Training
    itself is unaffected. Fix: accumulate ``loss.item()`` (or ``loss.detach()``). Check: a
    memory watch over steps (steady growth within an epoch), or
    ``torch.cuda.max_memory_allocated`` in a GPU run.
    """

    name = "accumulate_loss_graph"
    category = "gradient"
    summary = "total_loss += loss (no .item()): every step's graph stays alive, memory grows."
    expected = "cost_only"
    node_types = (cst.AugAssign,)
    examples = (
        Example(
            before="""
                loss.backward()
                total_loss += loss.item()
            """,
            after="""
                loss.backward()
                total_loss += loss
            """,
        ),
        Example(
            before="""
                def train(loader):
                    for x, y in loader:
                        loss = criterion(model(x), y)
                        loss.backward()
                        total_loss += loss.item() * x.size(0)
            """,
            after="""
                def train(loader):
                    for x, y in loader:
                        loss = criterion(model(x), y)
                        loss.backward()
                        total_loss += loss * x.size(0)
            """,
        ),
    )
    non_examples = (
        # Validation: no graph is recorded, so nothing leaks.
        """
            loss.backward()
            with torch.no_grad():
                val_loss += loss.item()
        """,
        "correct += (pred == y).sum().item()\n",
        """
            total_loss += loss.detach().item()
            loss.backward()
        """,
        """
            total_loss -= loss.item()
            loss.backward()
        """,
    )

    def _item_call(self, node: cst.AugAssign, ctx: Context) -> cst.Call | None:
        if not isinstance(node.operator, cst.AddAssign) or in_no_grad(node, ctx):
            return None
        candidates: list[cst.BaseExpression] = [node.value]
        while candidates:
            expr = candidates.pop()
            if isinstance(expr, cst.BinaryOperation):
                candidates.extend([expr.left, expr.right])
            elif isinstance(expr, cst.Call) and method_name(expr) == "item" and not expr.args:
                assert isinstance(expr.func, cst.Attribute)
                receiver = dotted_name(expr.func.value)
                if receiver is not None and any(
                    receiver in dotted_names_in(call, ctx) for call in backward_calls(ctx, node)
                ):
                    return expr
        return None

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.AugAssign)
        item = self._item_call(node, ctx)
        if item is None:
            return None
        assert isinstance(item.func, cst.Attribute)
        return node.deep_replace(item, item.func.value)
