"""Learning-rate scheduler rules: stepped before the optimizer, or never stepped."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.facts import first_of, ordered, reaches
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Node, Script
from mutator.semantics import (
    bound_names,
    constructor_kind,
    dotted_name,
    method_name,
    receiver,
    receiver_kind,
)

_LOOPS = (cst.For, cst.While)


class SchedulerBeforeOptimizer(LintRule):
    """``scheduler.step()`` before the loop body's first ``optimizer.step()``: the first
    learning rate is skipped (PyTorch warns about it). The optimizer step may sit in the
    same body, in a batch loop below, or in a local function called below
    (``for epoch: scheduler.step(); train_one_epoch(...)``).

    Through a loop or a function only for a plain ``scheduler.step()`` written directly in
    the loop body: ``scheduler.step(epoch)`` (the old explicit-epoch form) and a step under
    an ``if`` (``if epoch > 0: scheduler.step()``) may be deliberate."""

    code = "TW502"
    category = "optim"
    summary = "scheduler step before optimizer step"
    operators = ("scheduler_step_before_optimizer_step",)
    invalid = (
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.StepLR(opt, 10)
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                scheduler.step()  # <-
                opt.step()
            """
        ),
        in_training_script(
            """
            def train_one_epoch():
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()

            scheduler = torch.optim.lr_scheduler.StepLR(opt, 10)
            for epoch in range(10):
                scheduler.step()  # <-
                train_one_epoch()
            """
        ),
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)
            for epoch in range(10):
                scheduler.step()  # <-
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """
        ),
    )
    valid = (
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.StepLR(opt, 10)
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                opt.step()
                scheduler.step()
            """
        ),
        in_training_script(
            """
            def train_one_epoch():
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()

            scheduler = torch.optim.lr_scheduler.StepLR(opt, 10)
            for epoch in range(10):
                train_one_epoch()
                scheduler.step()
            """
        ),
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.StepLR(opt, 10)
            for epoch in range(10):
                if epoch > 0:
                    scheduler.step()
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """
        ),
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
            for epoch in range(10):
                scheduler.step(val_loss)
                train_one_epoch()
            """
        ),
    )

    message = "scheduler.step() before optimizer.step(): the first learning rate is skipped"

    def check(self, script: Script) -> Report:
        for sequence in ordered(script, ("opt_step", "sched_step")):
            call = first_of(sequence, "sched_step", "opt_step")
            if call is not None:
                yield call, self.message
        for call in script.calls_of("sched_step"):
            statement = script.ctx.statement_of(call)
            loop = script.ctx.parent(script.ctx.parent(statement) or call)
            if call.args or not isinstance(loop, _LOOPS):
                continue
            inside = script.ctx.nodes_within(loop.body, cst.Call)
            before = [c for c in inside if script.before(c, call)]
            after = [c for c in inside if script.before(call, c)]
            if not reaches(script, before, {"opt_step"}) and reaches(script, after, {"opt_step"}):
                yield call, self.message


class SchedulerNeverStepped(LintRule):
    """A learning-rate scheduler is built and bound to a name that is never stepped: no
    ``name.step(...)``, and no local function it is handed to steps a scheduler. The
    learning rate stays at its initial value.

    Silent when the scheduler is handed to code outside this file (a trainer, a
    ``return``, a list) that may step it, and when some ``.step()`` call's receiver is
    neither an optimizer, a GradScaler nor a scheduler built here (it may be this one
    under another name)."""

    code = "TW505"
    category = "optim"
    summary = "scheduler never stepped"
    operators = ("drop_scheduler_step",)
    invalid = (
        in_training_script(
            """
            def train_one_epoch(model, opt, scheduler):
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()

            scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=10)  # <-
            for epoch in range(30):
                train_one_epoch(model, opt, scheduler)
                print(scheduler.get_last_lr())
            """
        ),
        in_training_script(
            """
            warmup = torch.optim.lr_scheduler.LinearLR(opt, 0.1, total_iters=5)  # <-
            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
            for epoch in range(30):
                train_one_epoch(model, opt)
                plateau.step(validate(model))
            """
        ),
    )
    valid = (
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
            for epoch in range(30):
                train_one_epoch(model, opt)
                scheduler.step()
            """
        ),
        in_training_script(
            """
            def configure_optimizers(self):
                scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
                return [opt], [scheduler]
            """
        ),
        in_training_script(
            """
            sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=100)
            trainer = Trainer(model, opt, lr_scheduler=sched)
            trainer.train()
            """
        ),
        in_training_script(
            """
            scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
            lr_policy = scheduler
            for epoch in range(30):
                train_one_epoch(model, opt)
                lr_policy.step()
            """
        ),
        in_training_script(
            """
            def train_one_epoch(model, opt, sched):
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
                    sched.step()

            scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=100)
            for epoch in range(30):
                train_one_epoch(model, opt, scheduler)
            """
        ),
    )

    def check(self, script: Script) -> Report:
        built = {}
        for call in script.calls:
            if constructor_kind(call, script.ctx) == "scheduler":
                assign = _binding(script, call)
                names = [n for t in assign.targets for n in bound_names(t.target)] if assign else []
                if len(names) == 1:
                    built.setdefault(names[0], []).append((call, assign))
        steps = [c for c in script.calls if method_name(c) == "step"]
        stepped = {dotted_name(receiver(c)) for c in steps}
        if any(
            name not in built
            and receiver_kind(receiver(c), script.ctx) not in ("optimizer", "scaler")
            for c, name in ((c, dotted_name(receiver(c))) for c in steps)
        ):
            return  # a step we cannot name may be one of these schedulers'
        for name, sites in built.items():
            if name in stepped or any(self._handed_over(script, name, a) for _, a in sites):
                continue
            yield sites[0][0], f"{name} is never stepped: the learning rate never changes"

    @staticmethod
    def _handed_over(script: Script, name: str, assign: Node) -> bool:
        """Is ``name`` read anywhere except as ``name.attr``, or handed to a local function
        that steps a scheduler?"""
        for node in script.ctx.nodes(cst.Name) + script.ctx.nodes(cst.Attribute):
            if dotted_name(node) != name or script.ctx.within(assign, node):
                continue
            parent = script.ctx.parent(node)
            if isinstance(parent, (cst.Param, cst.AssignTarget)) or (
                isinstance(parent, cst.Arg) and parent.keyword is node
            ):
                continue  # a parameter, keyword or rebinding that shares the name
            if isinstance(parent, cst.Attribute):
                continue  # scheduler.get_last_lr(), or the ``name`` of some ``x.name``
            if isinstance(parent, cst.Arg):
                callees = script.local_callees(script.ctx.parent(parent))
                if callees and not any("sched_step" in script.effects(f) for f in callees):
                    continue
            return True
        return False


def _binding(script: Script, node: Node) -> cst.Assign | None:
    """The ``x = <node>`` statement ``node`` is the whole value of."""
    statement = script.ctx.statement_of(node)
    if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign):
        assign = statement.body[0]
        return assign if assign.value is node else None
    return None
