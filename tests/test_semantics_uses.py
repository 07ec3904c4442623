"""Where a script uses its own functions and what a setting always holds (mutator.semantics:
scope.function_uses / always_number, grad_mode.only_used_without_grad, loops.runs_last;
issue 22)."""

from __future__ import annotations

import libcst as cst

from mutator import SourceFile
from mutator.semantics.grad_mode import only_used_without_grad
from mutator.semantics.loops import runs_last
from mutator.semantics.scope import always_number, function_uses

SAMPLER = """
import torch

class Diffusion:
    def __init__(self, model, accum=1, steps=4):
        self.model = model
        self.accum = accum
        self.steps = steps

    @torch.no_grad()
    def p_sample(self, x):
        return self.model(x)

    @torch.no_grad()
    def sample(self, x):
        pick = self.p_sample
        return pick(x)

    def loss(self, x):
        return self.model(x).mean() / self.accum

    def plot(self, x):
        return self.sample(x)


def train(d, x):
    with torch.no_grad():
        d.sample(x)

Diffusion(net, steps=8).loss(x)
"""


def _function(source: SourceFile, name: str) -> cst.FunctionDef:
    (found,) = [f for f in source.context.nodes(cst.FunctionDef) if f.name.value == name]
    return found  # type: ignore[return-value]


def test_uses_are_calls_and_references_outside_the_function():
    source = SourceFile(SAMPLER)
    ctx = source.context
    uses = function_uses(_function(source, "p_sample"), ctx)
    assert [ctx.code(u) for u in uses] == ["self.p_sample"]  # the reference handed to ``pick``
    assert [ctx.code(u) for u in function_uses(_function(source, "sample"), ctx)] == [
        "self.sample",
        "d.sample",
    ]
    assert function_uses(_function(source, "train"), ctx) == []


def test_a_name_defined_twice_has_no_known_uses():
    source = SourceFile("def f():\n    pass\ndef f():\n    pass\nf()\n")
    (first, _) = source.context.nodes(cst.FunctionDef)
    assert function_uses(first, source.context) is None  # type: ignore[arg-type]


def test_a_decorator_matters_where_one_use_runs_with_gradients_on():
    source = SourceFile(SAMPLER)
    ctx = source.context
    assert only_used_without_grad(_function(source, "p_sample"), ctx)  # from decorated sample()
    assert not only_used_without_grad(_function(source, "sample"), ctx)  # plot() is not decorated
    assert not only_used_without_grad(_function(source, "train"), ctx)  # never used


def _divisor(source: SourceFile) -> cst.BaseExpression:
    (division,) = source.context.nodes(cst.BinaryOperation)
    return division.right  # type: ignore[attr-defined]


def test_a_parameter_default_no_caller_overrides_is_what_the_attribute_holds():
    source = SourceFile(SAMPLER)
    assert always_number(_divisor(source), source.context, 1)
    passed = SourceFile(SAMPLER.replace("Diffusion(net, steps=8)", "Diffusion(net, accum=4)"))
    assert not always_number(_divisor(passed), passed.context, 1)
    assert not always_number(cst.parse_expression("self.unknown"), source.context, 1)


def test_a_literal_setting_anywhere_in_the_file_counts():
    source = SourceFile("accum = 1\nloss = raw / accum\n")
    assert always_number(_divisor(source), source.context, 1)
    twice = SourceFile("accum = 1\nif big:\n    accum = 8\nloss = raw / accum\n")
    assert not always_number(_divisor(twice), twice.context, 1)


def _statement(source: SourceFile, code: str) -> cst.CSTNode:
    ctx = source.context
    (found,) = [s for s in ctx.nodes(cst.SimpleStatementLine) if ctx.code(s).strip() == code]
    return found


def test_runs_last_is_the_final_statement_outside_loops_and_functions():
    script = "if __name__ == '__main__':\n    model = main()\n    model.load_state_dict(sd)\n"
    source = SourceFile(script)
    assert runs_last(_statement(source, "model.load_state_dict(sd)"), source.context)
    assert not runs_last(_statement(source, "model = main()"), source.context)
    followed = SourceFile(script + "evaluate(model)\n")
    assert not runs_last(_statement(followed, "model.load_state_dict(sd)"), followed.context)
    looped = SourceFile("for path in paths:\n    model.load_state_dict(sd)\n")
    assert not runs_last(_statement(looped, "model.load_state_dict(sd)"), looped.context)
