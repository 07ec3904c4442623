"""The ``accumulate_loss_graph`` operator (AccumulateLossGraph)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import backward_calls
from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    code_of,
    dotted_name,
    dotted_names_in,
    in_no_grad,
    is_optimizer_step,
    loops_around,
    method_name,
    number_value,
    starts_before,
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
    witness = "more graph_kept", "a backwarded graph is still alive at the next backward"
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
        # Reset only when printed every 100 batches (issue 29): graphs pile up in between.
        Example(
            before="""
                for i, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    running_loss += loss.item()
                    if i % 100 == 99:
                        print(running_loss / 100)
                        running_loss = 0.0
            """,
            after="""
                for i, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    running_loss += loss
                    if i % 100 == 99:
                        print(running_loss / 100)
                        running_loss = 0.0
            """,
        ),
    )
    non_examples = (
        # A test loss computed under no_grad has no graph (issue 29: a tutorial's test loop).
        """
            import torch
            for x, y in test_loader:
                with torch.no_grad():
                    loss = criterion(model(x), y)
                eval_loss += loss.item()
        """,
        # Set back to zero at every optimizer step (a diffusion Trainer with gradient
        # accumulation): the graphs live for one step, memory does not grow (issue 22).
        """
            import torch
            opt = torch.optim.Adam(model.parameters())
            while step < train_num_steps:
                total_loss = 0.0
                for _ in range(gradient_accumulate_every):
                    loss = model(next(dl))
                    total_loss += loss.item()
                    loss.backward()
                opt.step()
                opt.zero_grad()
        """,
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

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        assert isinstance(node, cst.AugAssign)
        item = self._item_call(node, ctx)
        if item is None:
            return None
        if _reset_every_step(node, ctx):
            return NonSite(
                f"equivalent: `{code_of(node.target)}` is set back to a number at every "
                "optimizer step: each graph lives one step, memory does not grow"
            )
        assert isinstance(item.func, cst.Attribute)
        if _built_without_graph(item.func.value, node, ctx):
            return NonSite(
                f"equivalent: `{code_of(item.func.value)}` is computed under no_grad: there "
                "is no graph to keep alive"
            )
        return node.deep_replace(item, item.func.value)


def _built_without_graph(value: cst.BaseExpression, at: cst.CSTNode, ctx: Context) -> bool:
    """Is every assignment of the summed name in ``at``'s scope inside a no_grad block (a
    test loss summed after ``with torch.no_grad(): loss = criterion(out, y)``; issue 29)?"""
    name = dotted_name(value)
    if name is None or not isinstance(value, cst.Name):
        return False
    scope = ctx.enclosing_function(at) or ctx.module
    assigned = [
        a
        for a in ctx.nodes_within(scope, cst.Assign)
        if any(dotted_name(t.target) == name for t in a.targets)  # type: ignore[attr-defined]
        and ctx.enclosing_function(a) is ctx.enclosing_function(at)
    ]
    loops = loops_around(at, ctx)
    if loops:  # the assignment of this iteration, before the sum (a name reused elsewhere)
        here = [a for a in assigned if ctx.within(loops[0], a) and starts_before(a, at, ctx)]
        assigned = here or assigned
    return bool(assigned) and all(in_no_grad(a, ctx) for a in assigned)


def _reset_every_step(node: cst.AugAssign, ctx: Context) -> bool:
    """Is the running sum set back to a number inside the loop whose every iteration is one
    optimizer step (``total_loss = 0.`` at the top of each step, around a gradient
    accumulation loop)? Then graphs live for one step only: memory does not grow."""
    name = dotted_name(node.target)
    for loop in loops_around(node, ctx):
        steps = [
            line
            for line in ctx.nodes_within(loop, cst.SimpleStatementLine)
            if is_optimizer_step(line, ctx)
        ]
        if not any(loops_around(step, ctx)[:1] == [loop] for step in steps):
            continue  # no step of its own in this loop's body
        return any(
            any(dotted_name(t.target) == name for t in assign.targets)  # type: ignore[attr-defined]
            and number_value(assign.value) is not None  # type: ignore[attr-defined]
            and _unconditional_in(assign, loop, ctx)
            for assign in ctx.nodes_within(loop, cst.Assign)
        )
    return False


def _unconditional_in(node: cst.CSTNode, loop: cst.CSTNode, ctx: Context) -> bool:
    """Does ``node`` run on every iteration of ``loop``? A reset under ``if i % 100 == 99:``
    (a running loss printed every N batches, issue 29) does not."""
    for ancestor in ctx.ancestors(node):
        if ancestor is loop:
            return True
        if isinstance(ancestor, (cst.If, cst.For, cst.While, cst.Try)):
            return False
    return False
