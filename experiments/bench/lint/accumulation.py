"""Gradient accumulation: micro-batch losses summed instead of averaged."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Node, Script
from mutator.semantics import dotted_name, identifier_words


def _accumulation_divisor(script: Script, step: cst.Call) -> str | None:
    """``accum_steps`` when ``step`` sits under ``if (i + 1) % accum_steps == 0``."""
    for ancestor in script.ctx.ancestors(step):
        if isinstance(ancestor, cst.FunctionDef):
            return None
        if not isinstance(ancestor, cst.If):
            continue
        for operation in script.ctx.nodes_within(ancestor.test, cst.BinaryOperation):
            if isinstance(operation.operator, cst.Modulo):
                name = dotted_name(operation.right)
                words = identifier_words(name or "")
                if name and words & {"accum", "accumulation", "accumulate"}:
                    return name
    return None


def _divides_by(script: Script, name: str) -> bool:
    """Is a value in the file divided by ``name`` (or its last part: ``accum_steps`` for
    ``args.accum_steps``)? A count of batches (``len(loader) / accum_steps``, the number
    of optimizer steps for a schedule) scales no gradient and does not count."""
    last = name.rsplit(".", 1)[-1]
    for operation in script.ctx.nodes(cst.BinaryOperation):
        if not isinstance(operation.operator, cst.Divide):
            continue
        divisor = script.ctx.code(operation.right)
        if last in divisor and "len(" not in script.ctx.code(operation.left):
            return True
    return any(
        isinstance(augmented.operator, cst.DivideAssign)
        and last in script.ctx.code(augmented.value)
        for augmented in script.ctx.nodes(cst.AugAssign)
    )


class UnscaledAccumulation(LintRule):
    """The optimizer steps every ``accum_steps`` micro-batches (``if (i + 1) % accum_steps
    == 0``) but nothing in the file divides by ``accum_steps``: the summed gradient is
    ``accum_steps`` times the mean one. Reported at the backward().

    Silent when the step is gated by a counter that does not name accumulation (logging
    or evaluation intervals), when anything is divided by it (the loss, or the learning
    rate instead), and when the loop divides anything at all (a loss normalised by the
    tokens of the whole accumulation window)."""

    code = "TW120"
    category = "gradient"
    summary = "accumulated loss not divided"
    operators = ("unscaled_grad_accumulation",)
    confidence = "medium"
    invalid = (
        in_training_script(
            """
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()  # <-
                if (i + 1) % accum_steps == 0:
                    opt.step()
                    opt.zero_grad()
            """
        ),
    )
    valid = (
        in_training_script(
            """
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y) / args.gradient_accumulation_steps
                loss.backward()
                if (i + 1) % args.gradient_accumulation_steps == 0:
                    opt.step()
                    opt.zero_grad()
            """
        ),
        in_training_script(
            """
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss /= accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    opt.step()
                    opt.zero_grad()
            """
        ),
        in_training_script(
            """
            for i, (x, y) in enumerate(loader):
                loss = loss_fn(model(x), y, reduction="sum") / tokens_per_window
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    opt.step()
                    opt.zero_grad()
            """
        ),
        in_training_script(
            """
            for i, (x, y) in enumerate(loader):
                opt.zero_grad()
                criterion(model(x), y).backward()
                opt.step()
                if (i + 1) % log_interval == 0:
                    print(i)
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for step in script.calls_of("opt_step"):
            divisor = _accumulation_divisor(script, step)
            if divisor is None or _divides_by(script, divisor):
                continue
            backwards = _backwards_of_loop(script, step)
            if backwards and not _divides_in_loop(script, step):
                yield backwards[0], f"gradients of {divisor} micro-batches are summed, not averaged"


def _divides_in_loop(script: Script, step: cst.Call) -> bool:
    """Any division in the loop around the step: the loss may be normalised another way
    (by the tokens of the whole accumulation window, ``loss_sum / n_tokens``)."""
    loop = script.ctx.enclosing(step, (cst.For, cst.While))
    if loop is None:
        return False
    divisions = [
        op
        for op in script.ctx.nodes_within(loop, cst.BinaryOperation)
        if isinstance(op.operator, cst.Divide)
    ]
    augmented = [
        a
        for a in script.ctx.nodes_within(loop, cst.AugAssign)
        if isinstance(a.operator, cst.DivideAssign)
    ]
    return bool(divisions or augmented)


def _backwards_of_loop(script: Script, step: cst.Call) -> list[cst.Call]:
    """The backward() calls of the loop around the gated step."""
    loop: Node | None = script.ctx.enclosing(step, (cst.For, cst.While))
    return script.calls_of("backward", loop) if loop is not None else []
