"""The ``drop_scheduler_step`` operator (DropSchedulerStep)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import is_scheduler_step


class DropSchedulerStep(Swap):
    """Delete ``scheduler.step()``.

    Bug: the learning-rate scheduler is built but never advanced. Impact: the LR stays at
    its initial value: no decay (the loss plateaus higher than it should late in training,
    slightly worse final metrics); with a warmup schedule the LR stays at the first, tiny
    warmup value forever and training barely moves. Fix: call ``scheduler.step()`` once per
    epoch (epoch schedules) or once per optimizer step (warmup/OneCycle/per-step lambdas),
    after ``optimizer.step()``. Check: log ``scheduler.get_last_lr()`` (or the optimizer's
    ``param_groups[0]["lr"]``) every epoch: it never changes.
    """

    name = "drop_scheduler_step"
    category = "optim"
    summary = "Remove scheduler.step(): the learning rate never follows its schedule."
    expected = "degrades"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                for epoch in range(3):
                    train(model)
                    scheduler.step()
            """,
            after="""
                for epoch in range(3):
                    train(model)
            """,
        ),
        Example(
            before="""
                from torch.optim import lr_scheduler
                plateau = lr_scheduler.ReduceLROnPlateau(opt)
                plateau.step(val_loss)
            """,
            after="""
                from torch.optim import lr_scheduler
                plateau = lr_scheduler.ReduceLROnPlateau(opt)
            """,
        ),
    )
    non_examples = (
        "optimizer.step()\n",
        """
            import torch
            opt = torch.optim.SGD(ps, lr=0.1)
            opt.step()
        """,
        "scaler.step(optimizer)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        return cst.RemoveFromParent() if is_scheduler_step(node, ctx) else None
