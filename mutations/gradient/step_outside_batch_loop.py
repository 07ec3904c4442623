"""The ``step_outside_batch_loop`` operator (StepOutsideBatchLoop)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    is_manual_step_block,
    is_optimizer_step,
    method_name,
)
from mutator.semantics.loops import whole_run_loop


class StepOutsideBatchLoop(Operator):
    """Dedent ``optimizer.step()`` out of the batch loop, so it runs once after the loop.

    Bug: an indentation slip puts the step after the ``for batch in loader:`` loop.
    Impact: the model is updated once per epoch instead of once per batch, and only with
    the last batch's gradient when ``zero_grad()`` runs each batch (with it missing, one
    huge step on the summed gradients). A loop that is the whole run (full-batch steps,
    a step counter without epochs) is no site: there the dedent leaves one update in all. Training crawls: the loss falls far slower than
    the reference and validation stays near chance for a short budget; nothing crashes.
    Fix: indent ``optimizer.step()`` into the batch loop, right after ``backward()``.
    Check: count optimizer steps per epoch (one instead of ``len(loader)``), or compare
    train/val curves against a known-good run.
    """

    name = "step_outside_batch_loop"
    category = "gradient"
    summary = "Dedent optimizer.step() out of the batch loop: one update per epoch."
    expected = "breaks_training"
    witness = "fewer steps", "the optimizer steps fewer times (once per epoch)"
    node_types = (cst.SimpleStatementLine, cst.With, cst.For)
    examples = (
        # A hand-written update (no optimizer) is the step.
        Example(
            before="""
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    with torch.no_grad():
                        for p in model.parameters():
                            p.data.add_(p.grad, alpha=-lr)
                            p.grad.zero_()
            """,
            after="""
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                with torch.no_grad():
                    for p in model.parameters():
                        p.data.add_(p.grad, alpha=-lr)
                        p.grad.zero_()
            """,
        ),
        Example(
            before="""
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
                print(total)
            """,
            after="""
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    total += loss.item()
                optimizer.step()
                print(total)
            """,
        ),
        # A step counter inside a function called once per episode is a batch loop.
        Example(
            before="""
                def train(q, optimizer):
                    for i in range(10):
                        q(memory.sample()).sum().backward()
                        optimizer.step()
                for episode in range(10000): train(q, optimizer)
            """,
            after="""
                def train(q, optimizer):
                    for i in range(10):
                        q(memory.sample()).sum().backward()
                    optimizer.step()
                for episode in range(10000): train(q, optimizer)
            """,
        ),
        Example(  # a while loop over the batches of an epoch (AWD-LSTM)
            before="""
                def train():
                    while i < n:
                        loss.backward()
                        optimizer.step()
                        i += seq_len
                for epoch in range(1, epochs + 1): train()
            """,
            after="""
                def train():
                    while i < n:
                        loss.backward()
                        i += seq_len
                    optimizer.step()
                for epoch in range(1, epochs + 1): train()
            """,
        ),
    )
    non_examples = (
        """
            for group in opt.param_groups:
                opt.step()
        """,
        # Full-batch steps: the loop is the whole run (issue 22, a notebook's regression).
        """
            for t in range(200):
                loss = loss_func(net(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        """
            def train_step(loss):
                loss.backward()
                optimizer.step()
        """,
        """
            for x in loader:
                loss.backward()
                scheduler.step()
        """,
    )

    def _loop(self, node: cst.CSTNode, ctx: Context) -> cst.For | cst.While | None:
        block = ctx.parent(node)
        loop = ctx.parent(block) if isinstance(block, cst.IndentedBlock) else None
        if not isinstance(loop, (cst.For, cst.While)) or loop.body is not block:
            return None
        if not isinstance(ctx.parent(loop), (cst.IndentedBlock, cst.Module)):
            return None
        return None if whole_run_loop(loop, ctx) else loop

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if not (is_optimizer_step(node, ctx) or is_manual_step_block(node, ctx)):
            return None
        loop = self._loop(node, ctx)
        # Only the batch loop: one that also runs backward() (not a loop over param groups).
        if loop is None or not any(
            method_name(call) == "backward" for call in ctx.nodes_within(loop, cst.Call)
        ):
            return None
        assert isinstance(loop.body, cst.IndentedBlock)
        remaining = [statement for statement in loop.body.body if statement is not node]
        if not remaining:
            remaining = [cst.SimpleStatementLine([cst.Pass()])]
        shortened = loop.with_changes(body=loop.body.with_changes(body=remaining))
        moved = node.with_changes(leading_lines=())
        return {loop: cst.FlattenSentinel([shortened, moved])}
