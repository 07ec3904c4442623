"""A final ``eval()`` that nothing evaluates after (private to the mode package; issue 29:
``model.eval()`` before saving, at the end of a script or of a function whose model is its
own): the mode is never read, so dropping the line changes nothing."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics import dotted_name, loops_around, starts_before

# Uses of a model that run no forward: saving, moving, reading its parameters or mode.
_INERT = frozenset(
    {"state_dict", "parameters", "named_parameters", "buffers", "cpu", "cuda", "to", "train"}
    | {"eval", "modules", "children", "zero_grad", "requires_grad_", "half", "float"}
)
_SAVERS = frozenset({"torch.save", "print", "save", "save_model", "save_checkpoint"})


def _inert(use: cst.CSTNode, ctx: Context) -> bool:
    parent = ctx.parent(use)
    if isinstance(parent, cst.Attribute) and parent.value is use:
        return parent.attr.value in _INERT
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        name = dotted_name(call.func) if isinstance(call, cst.Call) else None  # type: ignore[union-attr]
        return name is not None and (name in _SAVERS or name.rsplit(".", 1)[-1] in _SAVERS)
    return isinstance(parent, cst.AssignTarget)  # rebound: a new model from here on


def _own_model(name: str, function: cst.FunctionDef, ctx: Context) -> bool:
    """Is ``name`` bound in ``function`` and neither a parameter, returned, nor stored?"""
    params = function.params
    if any(p.name.value == name for p in (*params.params, *params.kwonly_params)):
        return False
    for ret in ctx.nodes_within(function, cst.Return):
        value = ret.value  # type: ignore[attr-defined]
        if value is not None and any(n.value == name for n in ctx.nodes_within(value, cst.Name)):  # type: ignore[attr-defined]
            return False
    for target in ctx.nodes_within(function, cst.AssignTarget):
        value = ctx.parent(target).value  # type: ignore[union-attr]
        stored = not isinstance(target.target, cst.Name)  # type: ignore[attr-defined]
        if stored and dotted_name(value) == name:  # ``self.model = model``
            return False
    return any(
        isinstance(t.target, cst.Name) and t.target.value == name  # type: ignore[attr-defined]
        for t in ctx.nodes_within(function, cst.AssignTarget)
    )


def evaluated_nowhere_after(
    statement: cst.CSTNode, model: cst.BaseExpression, ctx: Context
) -> bool:
    """Does nothing forward ``model`` (a plain name) after the ``eval()`` at ``statement``:
    not in a loop, every later use in its scope saves, moves or reads it, and the scope is
    the module or a function that keeps the model to itself?"""
    if not isinstance(model, cst.Name) or loops_around(statement, ctx):
        return False
    function = ctx.enclosing_function(statement)
    if function is not None and not _own_model(model.value, function, ctx):
        return False
    scope_names = (
        ctx.nodes_within(function, cst.Name) if function is not None else ctx.nodes(cst.Name)
    )
    for use in scope_names:
        if use.value != model.value or ctx.within(statement, use):  # type: ignore[attr-defined]
            continue
        # A function (nested, or the module's) may run whenever it is called: every use
        # there counts, before the line or after it; in the scope itself, only later ones.
        later = starts_before(statement, use, ctx)
        elsewhere = ctx.enclosing_function(use) is not function
        if (later or elsewhere) and not _inert(use, ctx):
            return False
    return True


def _sets_eval_first(function: cst.FunctionDef, model: str, ctx: Context) -> bool:
    """Does ``function`` put ``model`` (its code) into eval mode before anything else uses it
    (a library's ``predict`` that sets its own mode)?"""
    from mutations.mode._shared import model_mode_statement, switched_model

    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
    for statement in body:
        call = model_mode_statement(statement, ctx, "eval")
        if call is not None and ctx.code(switched_model(call, ctx)[0]) == model:
            return True
        if any(ctx.code(n) == model for n in ctx.nodes_within(statement, cst.Attribute)):
            return False
        if any(n.value == model for n in ctx.nodes_within(statement, cst.Name)):  # type: ignore[attr-defined]
            return False
    return False


def next_use_sets_eval(statement: cst.CSTNode, model: cst.BaseExpression, ctx: Context) -> bool:
    """Is the next line after the ``eval()`` that does anything with the model a call of the
    script's own function or method that sets eval mode itself first (issue 29: fit()
    libraries whose ``predict`` calls ``self.network.eval()``)?"""
    code = ctx.code(model)
    for following in ctx.following_statements(statement):
        calls = [
            c
            for c in ctx.nodes_within(following, cst.Call)
            if isinstance(c.func, (cst.Name, cst.Attribute))  # type: ignore[attr-defined]
        ]
        own = [
            f
            for c in calls
            for f in ctx.nodes(cst.FunctionDef)
            if f.name.value
            == (c.func.attr.value if isinstance(c.func, cst.Attribute) else c.func.value)  # type: ignore[attr-defined]
        ]
        mentions_model = code in ctx.code(following)
        if len(own) == 1 and _sets_eval_first(own[0], code, ctx):  # type: ignore[arg-type]
            return not any(ctx.code(c.func) == code for c in calls)  # type: ignore[attr-defined]
        if mentions_model or own:
            return False
    return False
