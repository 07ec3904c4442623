"""The ``drop_scheduler_step`` operator (DropSchedulerStep)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    expression_call,
    is_scheduler_step,
    manual_lr_writes,
    single_assignment,
)
from mutator.semantics.modules import imported_definition


class DropSchedulerStep(Swap):
    """Delete ``scheduler.step()``, or the write of a hand-written schedule
    (``param_group["lr"] = lr``, ``optimizer.param_groups[0]["lr"] = lrnow``).

    A call of a function of the project's other files that writes the learning rate
    (``util.adjust_learning_rate(opt, optimizer, epoch)``) is a site too (issue 29).

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
    witness = "differs lr", "the learning rate does not follow the schedule"
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
        # A hand-written annealing (issue 22, cleanrl's PPO): the rate stays at lr=.
        Example(
            before="""
                for iteration in range(1, num_iterations + 1):
                    lrnow = (1.0 - (iteration - 1.0) / num_iterations) * learning_rate
                    optimizer.param_groups[0]["lr"] = lrnow
                    train_step()
            """,
            after="""
                for iteration in range(1, num_iterations + 1):
                    lrnow = (1.0 - (iteration - 1.0) / num_iterations) * learning_rate
                    train_step()
            """,
        ),
        Example(
            before="""
                for it in range(max_iters):
                    lr = get_lr(it)
                    for param_group in optimizer.param_groups:
                        param_group["lr"] = lr
                    step()
            """,
            after="""
                for it in range(max_iters):
                    lr = get_lr(it)
                    for param_group in optimizer.param_groups:
                        pass
                    step()
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
        # The current rate rescaled for one batch and put back: no schedule (AWD-LSTM).
        """
            for batch in batches:
                group = optimizer.param_groups[0]
                lr2 = group["lr"]
                optimizer.param_groups[0]["lr"] = lr2 * seq_len / bptt
                step()
                optimizer.param_groups[0]["lr"] = lr2
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if is_scheduler_step(node, ctx):
            return cst.RemoveFromParent()
        write = single_assignment(node)
        if write is not None and write in manual_lr_writes(ctx):
            return cst.RemoveFromParent()
        return cst.RemoveFromParent() if _project_schedule(node, ctx) else None


def _project_schedule(node: cst.CSTNode, ctx: Context) -> bool:
    """Is the line a call of a function of the project's other files that writes the
    optimizer's learning rate (SupContrast's ``adjust_learning_rate(opt, optimizer, epoch)``
    in util.py; issue 29)? The script's own such functions have their writes as sites."""
    call = expression_call(node)
    found = imported_definition(call.func, ctx) if call is not None else None
    if found is None or not isinstance(found[0], cst.FunctionDef):
        return False
    function, where = found
    return any(where.within(function, write) for write in manual_lr_writes(where))
