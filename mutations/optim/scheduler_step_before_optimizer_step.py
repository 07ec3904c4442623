"""The ``scheduler_step_before_optimizer_step`` operator (SchedulerStepBeforeOptimizerStep)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    callee_name,
    code_of,
    expression_call,
    identifier_words,
    is_model,
    is_optimizer_step,
    is_scheduler_step,
    method_name,
    move_after,
    move_before,
    receiver,
    receiver_kind,
    single_assignment,
)


def _local_function(call: cst.Call, ctx: Context) -> cst.FunctionDef | None:
    """The script's own function that a plain-name call runs (``train(...)``), else None."""
    if not isinstance(call.func, cst.Name):
        return None
    for function in ctx.nodes(cst.FunctionDef):
        if function.name.value == call.func.value:  # type: ignore[union-attr]
            return function  # type: ignore[return-value]
    return None


def _trains_with_optimizer(call: cst.Call, ctx: Context) -> bool:
    """A call named for training that is handed an optimizer: ``tnt.train(model=...,
    optimizer=opt)``, ``train_one_epoch(model, loader, optimizer)`` (its body may live in
    another module, but it steps the optimizer it is given)."""
    name = callee_name(call) or ""
    if not identifier_words(name) & {"train", "training", "fit"}:
        return False
    return any(receiver_kind(arg.value, ctx) == "optimizer" for arg in call.args)


def _steps_optimizer(statement: cst.CSTNode, ctx: Context, depth: int = 0) -> bool:
    """Does running ``statement`` step the optimizer: the step itself, a block holding it,
    or a call of the script's own function that does (``train(model, optimizer, ...)``)?"""
    if is_optimizer_step(statement, ctx):
        return True
    lines = (
        ctx.nodes_within(statement, cst.SimpleStatementLine)
        if not isinstance(statement, cst.SimpleStatementLine)
        else [statement]
    )
    for line in lines:
        if line is not statement and is_optimizer_step(line, ctx):
            return True
        if depth >= 2:
            continue
        assign = single_assignment(line)
        call = assign.value if assign is not None else expression_call(line)
        function = _local_function(call, ctx) if isinstance(call, cst.Call) else None
        if function is not None and _steps_optimizer(function, ctx, depth + 1):
            return True
        if isinstance(call, cst.Call) and _trains_with_optimizer(call, ctx):
            return True
    return False


def _guarded_line(guard: cst.CSTNode | None) -> cst.CSTNode | None:
    """The one line of ``if <condition>: <line>`` without ``else``, else None."""
    if not isinstance(guard, cst.If) or guard.orelse is not None:
        return None
    body = guard.body
    return body.body[0] if isinstance(body, cst.IndentedBlock) and len(body.body) == 1 else None


def _landing(moved: cst.CSTNode, training: cst.CSTNode, ctx: Context) -> Edits:
    """Move ``moved`` to the start of the epoch's training: right after the ``model.train()``
    that opens it when one comes first in the block (old tutorials step the scheduler there),
    else right above the training statement itself."""
    if is_optimizer_step(training, ctx):
        return move_before(moved, training)  # a per-batch schedule: right above the step
    for earlier in reversed(ctx.preceding_statements(training)):
        if _steps_optimizer(earlier, ctx):
            break
        call = expression_call(earlier)
        opens = call is not None and method_name(call) == "train" and not call.args
        if opens and is_model(receiver(call), ctx):  # type: ignore[arg-type]
            return move_after(moved, earlier)
    return move_before(moved, training)


class SchedulerStepBeforeOptimizerStep(Operator):
    """Move ``scheduler.step()`` above the optimizer step it followed (or above the batch
    loop / training call of the epoch).

    Bug: the scheduler is stepped before the optimizer (the pre-1.1 PyTorch order, still in
    old tutorials). Impact: the first value of the schedule is skipped and every later one
    comes one step (batch or epoch) early: the warmup's first step or the first epoch at
    the base learning rate is lost, decays start one epoch early; PyTorch only warns.
    Small for long schedules, visible in short runs and warmups. Real fixes:
    Abe404/segmentation_of_roots_in_soil_with_unet@8d0f478 and
    jdonnelly36/Deformable-ProtoPNet@e6a7d39 (an epoch scheduler, guarded by an ``if``,
    stepped where the epoch's training opens, before a training call handed the
    optimizer). Fix: ``optimizer.step()``
    first, then ``scheduler.step()``. Check: log ``scheduler.get_last_lr()`` on the first
    step: it must equal the configured base (or warmup start) learning rate.
    """

    name = "scheduler_step_before_optimizer_step"
    category = "optim"
    summary = "scheduler.step() moved before optimizer.step(): the schedule runs one step early."
    expected = "silent"
    witness = "differs lr", "the learning rates differ (schedule one step early)"
    node_types = (cst.SimpleStatementLine, cst.If)
    examples = (
        Example(
            before="""
                scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
                loss.backward()
                optimizer.step()
                scheduler.step()
            """,
            after="""
                scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup)
                loss.backward()
                scheduler.step()
                optimizer.step()
            """,
        ),
        Example(
            before="""
                scheduler = StepLR(optimizer, step_size=30)
                for epoch in range(epochs):
                    for x, y in loader:
                        optimizer.zero_grad()
                        criterion(model(x), y).backward()
                        optimizer.step()
                    scheduler.step()
            """,
            after="""
                scheduler = StepLR(optimizer, step_size=30)
                for epoch in range(epochs):
                    scheduler.step()
                    for x, y in loader:
                        optimizer.zero_grad()
                        criterion(model(x), y).backward()
                        optimizer.step()
            """,
        ),
        Example(
            before="""
                def train(model, loader, optimizer):
                    for x, y in loader:
                        optimizer.step()

                scheduler = StepLR(optimizer, step_size=1)
                for epoch in range(3):
                    loss = train(model, loader, optimizer)
                    scheduler.step()
            """,
            after="""
                def train(model, loader, optimizer):
                    for x, y in loader:
                        optimizer.step()

                scheduler = StepLR(optimizer, step_size=1)
                for epoch in range(3):
                    scheduler.step()
                    loss = train(model, loader, optimizer)
            """,
        ),
        Example(  # a guarded epoch scheduler lands where the epoch's training opens
            before="""
                scheduler = MultiStepLR(optimizer, milestones=[30])
                for epoch in range(epochs):
                    model.train()
                    start = time.time()
                    for x, y in loader:
                        criterion(model(x), y).backward()
                        optimizer.step()
                    if scheduler:
                        scheduler.step()
            """,
            after="""
                scheduler = MultiStepLR(optimizer, milestones=[30])
                for epoch in range(epochs):
                    model.train()
                    if scheduler:
                        scheduler.step()
                    start = time.time()
                    for x, y in loader:
                        criterion(model(x), y).backward()
                        optimizer.step()
            """,
        ),
        Example(  # a training function from another module, handed the optimizer
            before="""
                scheduler = StepLR(optimizer, step_size=1)
                for epoch in range(3):
                    engine.train_one_epoch(model, loader, optimizer)
                    scheduler.step()
            """,
            after="""
                scheduler = StepLR(optimizer, step_size=1)
                for epoch in range(3):
                    scheduler.step()
                    engine.train_one_epoch(model, loader, optimizer)
            """,
        ),
    )
    non_examples = (
        # Already first (the bug itself): nothing precedes to move above.
        """
            scheduler = StepLR(optimizer, step_size=30)
            for epoch in range(epochs):
                scheduler.step()
                train(model, optimizer)
        """,
        # ReduceLROnPlateau needs the validation loss computed after training.
        """
            scheduler = ReduceLROnPlateau(optimizer)
            for epoch in range(epochs):
                train(model, optimizer)
                scheduler.step(val_loss)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        # ``if scheduler: scheduler.step()`` moves as a whole: the site is the ``if``.
        line = _guarded_line(node) if isinstance(node, cst.If) else node
        if line is None or (line is node and _guarded_line(ctx.parent(ctx.parent(node))) is node):
            return None
        if not is_scheduler_step(line, ctx):
            return None
        call = expression_call(line)
        if call is None:
            return None
        if call.args:
            return NonSite(f"`{code_of(call)}`: its metric exists only after the training step")
        for previous in reversed(ctx.preceding_statements(node)):
            if _steps_optimizer(previous, ctx):
                return _landing(node, previous, ctx)
        return None
