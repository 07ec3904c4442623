"""The ``scheduler_step_per_batch`` operator (SchedulerStepPerBatch)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    code_of,
    expression_call,
    function_role,
    identifier_words,
    is_scheduler_step,
    method_statement_receiver,
    parse_statement,
    receiver_kind,
    split_role,
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


def _loader_of_training_call(node: cst.CSTNode, ctx: Context) -> cst.BaseExpression | None:
    """``train(model, train_loader, ...)`` just before ``scheduler.step()`` in the epoch loop:
    the training loader handed to the script's training function."""
    for earlier in reversed(list(ctx.preceding_statements(node))):
        call = expression_call(earlier)
        if call is None or not isinstance(call.func, cst.Name):
            continue
        functions = [
            f
            for f in ctx.nodes(cst.FunctionDef)
            if f.name.value == call.func.value  # type: ignore[attr-defined]
        ]
        if len(functions) != 1 or function_role(functions[0], ctx) != "train":  # type: ignore[arg-type]
            continue
        for arg in call.args:
            if isinstance(arg.value, cst.Name) and _is_training_loader_name(arg.value.value):
                return arg.value
    return None


def _is_training_loader_name(name: str) -> bool:
    words = identifier_words(name)
    return "loader" in words and split_role(name) == "train"


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
    witness = "differs lr", "the learning rates differ (schedule stepped per batch)"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        # The batch loop is in train(): step once per batch of the loader it gets.
        Example(
            before="""
                def train(model, train_loader, optimizer):
                    for x, y in train_loader:
                        optimizer.step()
                for epoch in range(3):
                    train(model, train_loader, optimizer)
                    scheduler.step()
            """,
            after="""
                def train(model, train_loader, optimizer):
                    for x, y in train_loader:
                        optimizer.step()
                for epoch in range(3):
                    train(model, train_loader, optimizer)
                    for _ in range(len(train_loader)):
                        scheduler.step()
            """,
        ),
        Example(
            before="""
                import torch
                sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
                for epoch in range(20):
                    for x, y in loader:
                        loss = f(x, y)
                        loss.backward()
                        opt.step()
                        opt.zero_grad()
                    sched.step()
                    print(epoch)
            """,
            after="""
                import torch
                sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
                for epoch in range(20):
                    for x, y in loader:
                        loss = f(x, y)
                        loss.backward()
                        opt.step()
                        sched.step()
                        opt.zero_grad()
                    print(epoch)
            """,
        ),
        Example(
            before="""
                class T:
                    def fit(self, loader, epochs):
                        for epoch in range(epochs):
                            for batch in loader:
                                if self.ready(batch):
                                    self.optimizer.step()
                            self.lr_scheduler.step()
            """,
            after="""
                class T:
                    def fit(self, loader, epochs):
                        for epoch in range(epochs):
                            for batch in loader:
                                if self.ready(batch):
                                    self.optimizer.step()
                                    self.lr_scheduler.step()
            """,
        ),
    )
    non_examples = (
        # Already per batch.
        """
            for x in loader:
                opt.step()
                scheduler.step()
        """,
        # The batch loop is in another function, and no training loader is handed to it.
        """
            for epoch in range(3):
                train_one_epoch(model, batches, opt)
                scheduler.step()
        """,
        # ReduceLROnPlateau needs the epoch's metric.
        """
            for epoch in range(3):
                for x in loader:
                    opt.step()
                scheduler.step(val_loss)
        """,
        """
            for epoch in range(3):
                for x in loader:
                    opt.step()
                opt.step()
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        call = expression_call(node)
        if call is None or call.args or not is_scheduler_step(node, ctx):
            return None
        step = _batch_loop_step(node, ctx)
        if step is None:
            loader = _loader_of_training_call(node, ctx)
            if loader is None:
                return None
            # The batch loop is in the training function: step once per batch of it here.
            loop = parse_statement(
                f"for _ in range(len({code_of(loader)})):\n    {ctx.code(node).strip()}\n"
            )
            return {node: loop.with_changes(leading_lines=node.leading_lines)}  # type: ignore[attr-defined]
        moved = node.with_changes(leading_lines=())
        return {node: cst.RemoveFromParent(), step: cst.FlattenSentinel([step, moved])}
