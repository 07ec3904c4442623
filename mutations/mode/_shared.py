"""Analyses the mode operators share (private to this package)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import NonSite
from mutator.semantics import (
    callee_name,
    code_of,
    drives_training,
    expression_call,
    find_arg,
    is_false,
    is_model,
    is_true,
    loops_around,
    method_name,
    mode_dependent,
    receiver,
)
from mutator.semantics.scope import function_uses, functions_by_name

# -- train/eval mode calls -----------------------------------------------------------------


def mode_set(call: cst.Call) -> str | None:
    """Mode set by ``m.train()``/``m.train(True)`` ("train") or ``m.eval()``/``m.train(False)``."""
    method = method_name(call)
    if method == "eval" and not call.args:
        return "eval"
    if method != "train" or len(call.args) > 1:
        return None
    if not call.args:
        return "train"
    arg = call.args[0]
    if arg.keyword is not None and arg.keyword.value != "mode":
        return None
    if is_true(arg.value):
        return "train"
    if is_false(arg.value):
        return "eval"
    return None


def forwarded_switch(call: cst.Call, ctx: Context) -> tuple[str, cst.Call, cst.Arg] | None:
    """(mode, the switch inside, the argument that sets it) for a call of the script's own
    function or method that switches a model with its parameter: a library's
    ``self._set_training_mode(False)`` whose body runs ``self.network.train(training)``
    (framework-style code, issue 29); one level deep."""
    name = callee_name(call)
    functions = functions_by_name(ctx).get(name or "", [])
    if len(functions) != 1:
        return None
    function = functions[0]
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    method = isinstance(ctx.parent(ctx.parent(function)), cst.ClassDef)
    if method != isinstance(call.func, cst.Attribute):
        return None  # ``obj.f(...)`` of a plain function, or a method called bare
    for inner in ctx.nodes_within(function, cst.Call):
        value = inner.args[0].value if len(inner.args) == 1 else None  # type: ignore[attr-defined]
        if method_name(inner) != "train" or not isinstance(value, cst.Name):  # type: ignore[arg-type]
            continue
        if value.value not in params or not is_model(receiver(inner), ctx):  # type: ignore[arg-type]
            continue
        index = params.index(value.value) - (1 if method else 0)
        arg = find_arg(call, keyword=value.value, position=index)
        if arg is None:
            return None
        mode = "train" if is_true(arg.value) else "eval" if is_false(arg.value) else None
        return (mode, inner, arg) if mode is not None else None  # type: ignore[return-value]
    return None


def switched_model(call: cst.Call, ctx: Context) -> tuple[cst.BaseExpression, cst.Call]:
    """The model a mode call switches, and the call that switches it (the switch inside a
    forwarding helper)."""
    forwarded = forwarded_switch(call, ctx) if mode_set(call) is None else None
    inner = forwarded[1] if forwarded is not None else call
    return receiver(inner), inner


def model_mode_statement(node: cst.CSTNode, ctx: Context, mode: str) -> cst.Call | None:
    """The call of a statement line that puts a model into ``mode`` (itself, or through the
    script's own helper: ``forwarded_switch``), else None."""
    call = expression_call(node)
    if call is None:
        return None
    if mode_set(call) is None and isinstance(call.func, (cst.Name, cst.Attribute)):
        forwarded = forwarded_switch(call, ctx)
        return call if forwarded is not None and forwarded[0] == mode else None
    if mode_set(call) != mode:
        return None
    return call if is_model(receiver(call), ctx) else None


def mode_blind(call: cst.Call, ctx: Context) -> NonSite | None:
    """A non-site when the model the mode call switches has no layer that reads the mode
    (no dropout, batch norm, ``self.training``): train and eval compute the same thing."""
    model, at = switched_model(call, ctx)
    if model is None or mode_dependent(model, ctx, at) is not False:
        return None
    return NonSite(
        f"equivalent: `{code_of(model)}` has no dropout, batch norm or other layer that "
        "reads the train/eval mode"
    )


# -- a train() that another train() always follows -----------------------------------------


def _retrained_next(use: cst.CSTNode, ctx: Context, model: str | None = None) -> bool:
    """Is ``use`` (a helper's call) in a training loop that trains nothing after it and
    switches a model (``model``, by its code, when given) to train mode at the top of every
    iteration, before its first step?"""
    loops = loops_around(use, ctx)
    if not loops or not isinstance(loops[0].body, cst.IndentedBlock):
        return False
    loop, body = loops[0], loops[0].body.body
    top = next((s for s in body if ctx.within(s, use)), None)
    if top is None or drives_training(top, ctx) or not drives_training(loop, ctx):
        return False
    if any(drives_training(s, ctx) for s in body[body.index(top) + 1 :]):
        return False
    for statement in body:
        switch = model_mode_statement(statement, ctx, "train")
        if switch is not None and (model is None or _model_code(switch, ctx) == model):
            return True
        if drives_training(statement, ctx):
            return False
    return False


def _model_code(call: cst.Call, ctx: Context) -> str:
    return code_of(switched_model(call, ctx)[0])


def _trains_after_loop(loop: cst.CSTNode, ctx: Context) -> bool:
    """Does anything after ``loop`` in its function (or module) train?"""
    current: cst.CSTNode | None = loop
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if isinstance(current, cst.BaseStatement) and any(
            drives_training(s, ctx) for s in ctx.following_statements(current)
        ):
            return True
        current = ctx.parent(current)
    return False


def overwritten_next_iteration(statement: cst.CSTNode, call: cst.Call, ctx: Context) -> bool:
    """Is the mode ``statement`` sets (a switch of a model by ``call``) gone before the next
    training step: it sits in a training loop that trains nothing after it in the
    iteration, the loop switches the same model to train mode at the top of every
    iteration before its first step, and nothing trains after the loop (issue 29: a
    trainer's ``model.train(mode=True)`` after its evaluation, with every epoch opening on
    ``model.train(True)``)."""
    loops = [
        loop
        for loop in loops_around(statement, ctx)
        if ctx.enclosing_function(loop) is ctx.enclosing_function(statement)
    ]
    if not loops or not _retrained_next(statement, ctx, _model_code(call, ctx)):
        return False
    return not _trains_after_loop(loops[0], ctx)


def train_mode_restored_later(statement: cst.CSTNode, ctx: Context) -> bool:
    """Is ``statement`` (``model.train()``) the last line of a helper (sampling, evaluation)
    whose every call sits in a training loop that calls ``model.train()`` again at the top
    of the next iteration, before any training step? Then whatever mode the line leaves
    the model in is gone before it matters (issue 22: LLMs-from-scratch's
    ``generate_and_print_sample``)."""
    function = ctx.enclosing_function(statement)
    if function is None or not isinstance(function.body, cst.IndentedBlock):
        return False
    rest = list(function.body.body)
    if statement not in rest or any(
        not isinstance(s, cst.SimpleStatementLine) or drives_training(s, ctx)
        for s in rest[rest.index(statement) + 1 :]
    ):
        return False
    uses = function_uses(function, ctx)
    if not uses:
        return False
    calls = [ctx.parent(use) for use in uses]
    if not all(isinstance(c, cst.Call) and c.func is use for c, use in zip(calls, uses)):
        return False  # handed on as a callback: called from where this cannot see
    return all(_retrained_next(call, ctx) for call in calls)  # type: ignore[arg-type]
