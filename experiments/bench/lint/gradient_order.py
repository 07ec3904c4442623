"""Gradient rules about the order of zero_grad(), backward() and step()."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.facts import first_of, ordered, training_units
from experiments.bench.lint.rule import CORRECT_LOOP, LintRule, Report, in_training_script
from experiments.bench.lint.script import Node, Script
from mutator.semantics import manual_updates, step_closures


class _MissingCall(LintRule):
    """A function (or the module) that makes the ``present`` calls but not ``absent``;
    reported at the first ``at`` call."""

    present: tuple[str, str] = ("", "")
    absent = ""
    at = ""
    message = ""

    def excused(self, script: Script, unit: Node) -> bool:
        """The missing call is done another way (by hand, by a caller): stay silent."""
        return False

    def check(self, script: Script) -> Report:
        for unit, calls in training_units(script):
            missing = all(calls[kind] for kind in self.present) and not calls[self.absent]
            if missing and not self.excused(script, unit):
                yield calls[self.at][0], self.message


class _CallBefore(LintRule):
    """In one loop body, an ``early`` call comes before the first ``late`` call it should
    follow; reported at the ``early`` call."""

    early = ""
    late = ""
    message = ""

    def check(self, script: Script) -> Report:
        for sequence in ordered(script, (self.late, self.early)):
            call = first_of(sequence, self.early, self.late)
            if call is not None:
                yield call, self.message


class MissingZeroGrad(_MissingCall):
    """A function calls backward() and an optimizer step but never zero_grad(), and never
    resets ``.grad`` by hand: gradients accumulate across steps. Reported at the backward()."""

    code = "TW101"
    category = "gradient"
    summary = "missing zero_grad()"
    operators = ("drop_zero_grad",)
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()  # <-
                opt.step()
            """
        ),
    )
    valid = (
        CORRECT_LOOP,
        in_training_script(
            """
            for x, y in loader:
                for p in model.parameters():
                    p.grad = None
                criterion(model(x), y).backward()
                opt.step()
            """
        ),
    )

    present = ("backward", "opt_step")
    absent = "zero_grad"
    at = "backward"
    message = "backward() and step() without zero_grad(): gradients accumulate across steps"

    def excused(self, script: Script, unit: Node) -> bool:
        return script.mentions(r"\.grad\s*=\s*None|\.grad\.zero_\(\)")


class MissingBackward(_MissingCall):
    """A function zeroes gradients and steps the optimizer but never calls backward()."""

    code = "TW102"
    category = "gradient"
    summary = "missing backward()"
    operators = ("drop_backward",)
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                opt.step()  # <-
            """
        ),
    )
    valid = (CORRECT_LOOP,)

    present = ("opt_step", "zero_grad")
    absent = "backward"
    at = "opt_step"
    message = "optimizer step without backward(): there are no gradients to apply"


class MissingStep(_MissingCall):
    """A function zeroes gradients and calls backward() but never steps the optimizer.

    Silent when the file updates parameters by hand from their gradients (``p -= lr *
    p.grad``) and inside a closure passed to ``optimizer.step(closure)`` (LBFGS)."""

    code = "TW103"
    category = "gradient"
    summary = "missing optimizer step"
    operators = ("drop_optimizer_step",)
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()  # <-
            """
        ),
    )
    valid = (
        CORRECT_LOOP,
        in_training_script(
            """
            for x, y in loader:
                model.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                with torch.no_grad():
                    for p in model.parameters():
                        p -= 0.1 * p.grad
            """
        ),
        in_training_script(
            """
            lbfgs = torch.optim.LBFGS(model.parameters())
            for x, y in loader:
                def closure():
                    lbfgs.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    return loss
                lbfgs.step(closure)
            """
        ),
    )

    present = ("backward", "zero_grad")
    absent = "opt_step"
    at = "backward"
    message = "backward() without an optimizer step: the weights never change"

    def excused(self, script: Script, unit: Node) -> bool:
        # A hand-written update is the step; a closure's step is the call it is passed to.
        closure = isinstance(unit, cst.FunctionDef) and unit.name.value in step_closures(script.ctx)
        return closure or bool(manual_updates(script.ctx))


class StepBeforeBackward(LintRule):
    """In one loop body the optimizer steps before backward() with no zero_grad() between:
    each step applies the previous batch's gradients (or none)."""

    code = "TW104"
    category = "gradient"
    summary = "step before backward"
    operators = ("step_before_backward",)
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                opt.step()  # <-
                loss.backward()
            """
        ),
    )
    valid = (CORRECT_LOOP,)

    def check(self, script: Script) -> Report:
        for sequence in ordered(script, ("backward", "opt_step", "zero_grad")):
            kinds = [kind for kind, _ in sequence]
            if "opt_step" not in kinds or "backward" not in kinds:
                continue
            first_step, first_backward = kinds.index("opt_step"), kinds.index("backward")
            if first_step < first_backward and "zero_grad" not in kinds[first_step:first_backward]:
                yield (
                    sequence[first_step][1],
                    "optimizer step before backward(): it applies stale or no gradients",
                )


class ZeroGradBetweenBackwardAndStep(LintRule):
    """zero_grad() after backward() and before the step that should use the gradients."""

    code = "TW105"
    category = "gradient"
    summary = "zero_grad between backward and step"
    operators = ("zero_grad_after_backward",)
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                opt.zero_grad()  # <-
                opt.step()
            """
        ),
    )
    valid = (
        in_training_script(
            """
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for sequence in ordered(script, ("backward", "opt_step", "zero_grad")):
            last_backward = None
            for index, (kind, call) in enumerate(sequence):
                if kind == "backward":
                    last_backward = index
                elif kind == "zero_grad" and last_backward is not None:
                    rest = [k for k, _ in sequence[index + 1 :]]
                    if "opt_step" in rest and "backward" not in rest[: rest.index("opt_step")]:
                        yield (
                            call,
                            "zero_grad() between backward() and step(): the step sees zero gradients",
                        )


class StepOutsideBackwardLoop(LintRule):
    """backward() runs in a loop but the optimizer step comes after that loop: one update
    per epoch instead of one per batch.

    Gradient accumulation has the same shape, so the rule stays silent when gradients are
    zeroed next to the step (in the step's own block) and never inside the backward loop:
    then the loop sums micro-batch gradients for the one step on purpose."""

    code = "TW106"
    category = "gradient"
    summary = "step outside the backward loop"
    operators = ("step_outside_batch_loop",)
    confidence = "medium"
    invalid = (
        in_training_script(
            """
            def train_epoch():
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                opt.step()  # <-
            """
        ),
    )
    valid = (
        in_training_script(
            """
            def train_epoch():
                for x, y in loader:
                    opt.zero_grad()
                    criterion(model(x), y).backward()
                    opt.step()
            """
        ),
        in_training_script(
            """
            for batch in loader:
                opt.zero_grad()
                for x, y in micro_batches(batch, 4):
                    (criterion(model(x), y) / 4).backward()
                opt.step()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for unit, calls in training_units(script):
            loops = {id(script.scope(b)): script.scope(b) for b in calls["backward"]}
            for loop in loops.values():
                if loop is unit or any(script.ctx.within(loop, s) for s in calls["opt_step"]):
                    continue
                after = [s for s in calls["opt_step"] if script.before(loop, s)]
                if after and not _accumulates(script, loop, after[0], calls["zero_grad"]):
                    yield (
                        after[0],
                        "optimizer step outside the loop that calls backward(): one update per loop",
                    )


def _accumulates(script: Script, loop: Node, step: cst.Call, zero_grads: list[cst.Call]) -> bool:
    """Gradients are zeroed beside the step and never inside ``loop``: accumulation."""
    beside = any(script.scope(z) is script.scope(step) for z in zero_grads)
    return beside and not any(script.ctx.within(loop, z) for z in zero_grads)


class ClipBeforeBackward(_CallBefore):
    """Gradient clipping runs before backward() in the same loop: it clips stale gradients."""

    code = "TW107"
    category = "gradient"
    summary = "clipping before backward"
    operators = ("clip_before_backward",)
    invalid = (
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # <-
                loss.backward()
                opt.step()
            """
        ),
    )
    valid = (
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            """
        ),
    )

    early = "clip"
    late = "backward"
    message = "gradient clipping before backward(): it clips stale gradients"
