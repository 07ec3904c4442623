"""A scheduler that counts epochs, stepped once per batch."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import resolve_number
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Script
from mutator.semantics import (
    callee_name,
    constructor_kind,
    dotted_name,
    find_arg,
    identifier_words,
    receiver,
)

_LOADER = re.compile(r"loader|batches", re.IGNORECASE)  # a ``for`` over batches
# Arguments that count optimizer steps: ``T_max=epochs * len(loader)``, ``total_steps``.
_PER_STEP = frozenset({"len", "steps", "batches", "iters", "iterations", "total"})


class EpochSchedulerPerBatch(LintRule):
    """A scheduler whose settings count epochs is stepped in the batch loop (a ``for`` over
    a loader): ``StepLR``/``MultiStepLR``/``CosineAnnealingLR`` whose arguments name epochs
    (``step_size=LR_STEP_EPOCHS``, ``T_max=args.epochs``), or ``ExponentialLR`` with a
    per-epoch ``gamma`` of 0.99 or less. The learning rate decays batches-per-epoch times
    too fast.

    Silent when the arguments also count steps or batches (``T_max=epochs * len(loader)``)."""

    code = "TW507"
    category = "optim"
    summary = "epoch scheduler stepped per batch"
    operators = ("scheduler_step_per_batch",)
    confidence = "medium"
    gamma_max = 0.99  # per-batch ExponentialLR decays use 0.999 and up
    invalid = (
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.95)
            for epoch in range(10):
                for x, y in train_loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
                    scheduler.step()  # <-
            """
        ),
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=LR_STEP_EPOCHS)
            for epoch in range(10):
                for i, (x, y) in enumerate(loader):
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
                    scheduler.step()  # <-
            """
        ),
    )
    valid = (
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.95)
            for epoch in range(10):
                for x, y in train_loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
                scheduler.step()
            """
        ),
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
                opt, T_max=args.epochs * len(train_loader)
            )
            for epoch in range(args.epochs):
                for x, y in train_loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
                    scheduler.step()
            """
        ),
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9999)
            for x, y in train_loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                opt.step()
                scheduler.step()
            """
        ),
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1000)
            for x, y in train_loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                opt.step()
                scheduler.step()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for call in script.calls_of("sched_step"):
            loop = script.scope(call)
            if not (isinstance(loop, cst.For) and _LOADER.search(script.ctx.code(loop.iter))):
                continue
            name = dotted_name(receiver(call))
            for value in [v for _, v in script.assignments.get(name or "", [])]:
                reason = self._counts_epochs(script, value)
                if reason:
                    yield call, f"{name} {reason} but is stepped every batch"
                    break

    def _counts_epochs(self, script: Script, value: cst.BaseExpression) -> str | None:
        if not isinstance(value, cst.Call) or constructor_kind(value, script.ctx) != "scheduler":
            return None
        kind = callee_name(value)
        arguments = " ".join(script.ctx.code(arg.value) for arg in value.args[1:])
        words = identifier_words(arguments)
        counts_epochs = bool(words & {"epoch", "epochs"}) and not words & _PER_STEP
        if kind in {"StepLR", "MultiStepLR", "CosineAnnealingLR"} and counts_epochs:
            return "counts epochs"
        if kind == "ExponentialLR":
            gamma = find_arg(value, keyword="gamma", position=1)
            rate = resolve_number(script, gamma.value) if gamma is not None else None
            if rate is not None and rate <= self.gamma_max:
                return f"decays by gamma={rate:g} per step"
        return None
