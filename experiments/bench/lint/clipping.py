"""Gradient clipping rules: a threshold off by orders of magnitude."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.facts import resolve_number
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Script
from mutator.semantics import callee_name, find_arg, number_value

_THRESHOLD = {"clip_grad_norm_": "max_norm", "clip_grad_norm": "max_norm"}
_THRESHOLD["clip_grad_value_"] = "clip_value"


class ClipThresholdScaled(LintRule):
    """A clipping threshold multiplied by a literal factor of 100 or more or 1/100 or less
    (``max_norm=CLIP * 0.01``: every step clipped to a tiny norm; ``CLIP * 100``: clipping
    never fires), or a ``max_norm`` of 0.01 or less.

    A large literal ``max_norm`` (100) is left alone: some correct scripts clip only as a
    safety net."""

    code = "TW116"
    category = "gradient"
    summary = "clipping threshold off by orders of magnitude"
    operators = ("clip_norm_scaled",)
    confidence = "medium"  # the threshold is a judgement
    max_norm_min = 0.01  # correct scripts clip at 0.1..10; 0.01 clips every step
    invalid = (
        in_training_script(
            """
            CLIP = 1.0
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                nn.utils.clip_grad_norm_(model.parameters(), max_norm=CLIP * 0.01)  # <-
                opt.step()
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                nn.utils.clip_grad_norm_(model.parameters(), 0.01)  # <-
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
                nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.25)
                nn.utils.clip_grad_value_(model.parameters(), clip_value=0.5)
                opt.step()
            """
        ),
        in_training_script(
            """
            GRAD_CLIP = 100.0
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
                opt.step()
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                nn.utils.clip_grad_norm_(model.parameters(), args.clip * accum_steps)
                nn.utils.clip_grad_value_(model.parameters(), CLIP_VALUE * 0.5)
                opt.step()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for call in script.calls_of("clip"):
            keyword = _THRESHOLD.get(callee_name(call) or "")
            arg = find_arg(call, keyword=keyword, position=1) if keyword else None
            if arg is None:
                continue
            expr = arg.value
            if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
                factor = number_value(expr.right) or number_value(expr.left)
                if factor is not None and (factor >= 100 or 0 < factor <= 0.01):
                    yield call, f"{keyword} multiplied by {factor:g}"
                    continue
            value = resolve_number(script, expr)
            if keyword == "max_norm" and value is not None and value <= self.max_norm_min:
                yield call, f"max_norm={value:g} clips every step to a tiny norm"
