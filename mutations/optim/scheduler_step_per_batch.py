"""The ``scheduler_step_per_batch`` operator (SchedulerStepPerBatch)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    expression_call,
    is_scheduler_step,
    method_statement_receiver,
    receiver_kind,
)


def _optimizer_step(statement: cst.CSTNode, ctx: Context) -> bool:
    """``optimizer.step()``, ``self.opt.step()``, ``scaler.step(optimizer)``: not a scheduler."""
    stepped = method_statement_receiver(statement, "step")
    return stepped is not None and receiver_kind(stepped, ctx) != "scheduler"


def _batch_loop_step(statement: cst.CSTNode, ctx: Context) -> cst.CSTNode | None:
    """The optimizer step inside the batch loop that runs just before ``statement``."""
    for earlier in reversed(ctx.preceding_statements(statement)):
        for line in reversed(ctx.nodes_within(earlier, cst.SimpleStatementLine)):
            loop = ctx.enclosing(line, (cst.For, cst.While))
            if _optimizer_step(line, ctx) and loop is not None and ctx.within(earlier, loop):
                return line
    return None


class SchedulerStepPerBatch(Operator):
    """Move a once-per-epoch ``scheduler.step()`` into the batch loop, after ``optimizer.step()``.

    Bug: an epoch-based schedule (``StepLR(step_size=30)``, ``CosineAnnealingLR(T_max=epochs)``,
    ``MultiStepLR``) is advanced once per batch. Impact: the schedule runs
    batches-per-epoch times too fast: a StepLR decays the LR to ~0 within the first epochs
    and training stalls early (loss plateaus high); a cosine schedule with ``T_max=epochs``
    cycles up and down every few batches. Fix: step epoch-based schedulers once per epoch,
    or express ``T_max``/``step_size`` in steps for a per-batch schedule. Check: log
    ``scheduler.get_last_lr()`` per step and plot the LR against the intended schedule.
    """

    name = "scheduler_step_per_batch"
    category = "optim"
    summary = "Call an epoch scheduler's step() once per batch: the LR schedule runs far too fast."
    expected = "breaks_training"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)\n"
                "for epoch in range(20):\n    for x, y in loader:\n        loss = f(x, y)\n"
                "        loss.backward()\n        opt.step()\n        opt.zero_grad()\n"
                "    sched.step()\n    print(epoch)\n"
            ),
            after=(
                "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)\n"
                "for epoch in range(20):\n    for x, y in loader:\n        loss = f(x, y)\n"
                "        loss.backward()\n        opt.step()\n        sched.step()\n"
                "        opt.zero_grad()\n    print(epoch)\n"
            ),
        ),
        Example(
            before=(
                "class T:\n    def fit(self, loader, epochs):\n        for epoch in range(epochs):\n"
                "            for batch in loader:\n                if self.ready(batch):\n"
                "                    self.optimizer.step()\n            self.lr_scheduler.step()\n"
            ),
            after=(
                "class T:\n    def fit(self, loader, epochs):\n        for epoch in range(epochs):\n"
                "            for batch in loader:\n                if self.ready(batch):\n"
                "                    self.optimizer.step()\n"
                "                    self.lr_scheduler.step()\n"
            ),
        ),
    )
    non_examples = (
        # Already per batch.
        "for x in loader:\n    opt.step()\n    scheduler.step()\n",
        # The batch loop is in another function: nothing to move into here.
        "for epoch in range(3):\n    train_one_epoch(model, loader, opt)\n    scheduler.step()\n",
        # ReduceLROnPlateau needs the epoch's metric.
        "for epoch in range(3):\n    for x in loader:\n        opt.step()\n    scheduler.step(val_loss)\n",
        "for epoch in range(3):\n    for x in loader:\n        opt.step()\n    opt.step()\n",
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        call = expression_call(node)
        if not (
            call is not None
            and not call.args
            and is_scheduler_step(node, ctx)
            and _batch_loop_step(node, ctx) is not None
        ):
            return None
        step = _batch_loop_step(node, ctx)
        assert step is not None
        moved = node.with_changes(leading_lines=())
        return {node: cst.RemoveFromParent(), step: cst.FlattenSentinel([step, moved])}
