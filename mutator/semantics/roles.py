"""The static context of a node: which part of a training script it belongs to.

``site_context(node, ctx)`` is one of ``CONTEXTS``:

- ``train``: the training step and what drives it (the function that calls backward or
  steps an optimizer, the loop that calls such a function, the model's own methods);
- ``eval``: evaluation (a ``no_grad`` block that updates no parameter, a function named
  like ``evaluate``/``test`` or run only under ``no_grad``);
- ``setup``: building data, model and optimizer (module level and driver functions outside
  the training loop, ``build_*``/``load_*`` helpers);
- ``export``: model export (``torch.onnx.export``, ``torch.jit.trace``...);
- ``plot``: plotting and drawing (matplotlib, image grids, a function named ``plot``/``draw``);
- ``unknown``: nothing says which.

Operators use it to skip code the default training run does not execute for their role
(a slice inside a plotting helper is no training data; an evaluation-only criterion is no
training loss), and the site lists show it next to every site.
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_node
from mutator.semantics.data import identifier_words
from mutator.semantics.grad_mode import in_no_grad
from mutator.semantics.losses import criterion_calls, loss_constructor_kind
from mutator.semantics.models import is_model
from mutator.semantics.names import resolve
from mutator.semantics.optim import is_optimizer_step, manual_updates, reads_grad, step_closures
from mutator.semantics.scope import functions_by_name
from mutator.semantics.syntax import callee_name, method_name

CONTEXTS = ("train", "eval", "setup", "export", "plot", "unknown")
# Where a bug of the training loss or step can be: not evaluation, plotting or export.
TRAINING_CONTEXTS = frozenset({"train", "setup", "unknown"})

_EXPORT_CALLS = frozenset(
    {"torch.onnx.export", "torch.jit.trace", "torch.jit.script", "torch.jit.save"}
    | {"torch.export.export", "torch.onnx.dynamo_export"}
)
_PLOT_MODULES = ("matplotlib", "seaborn", "plotly", "PIL", "imageio")
_PLOT_CALLS = frozenset({"torchvision.utils.save_image", "torchvision.utils.make_grid"})
_EXPORT_WORDS = frozenset({"export", "onnx", "torchscript", "jit"})
_PLOT_WORDS = frozenset({"plot", "draw", "visualize", "visualise", "show", "render", "figure"})
_PLOT_WORDS |= frozenset({"imshow", "grid", "comparison", "samples"})
_EVAL_NAME_WORDS = frozenset({"evaluate", "evaluation", "validate", "validation", "val", "test"})
_EVAL_NAME_WORDS |= frozenset({"valid"})
_EVAL_NAME_WORDS |= frozenset({"eval", "predict", "inference", "infer", "accuracy", "score"})
_TRAIN_NAME_WORDS = frozenset({"train", "training", "fit"})
_SETUP_NAME_WORDS = frozenset({"build", "make", "create", "load", "get", "setup", "prepare"})
_SETUP_NAME_WORDS |= frozenset(
    {"init", "configure", "parse", "batchify", "tokenize", "dataset", "loader"}
)


def _own_calls(function: cst.FunctionDef, ctx: Context) -> list[cst.Call]:
    """Calls written in ``function`` itself, not in functions nested inside it."""
    return [
        call
        for call in ctx.nodes_within(function, cst.Call)
        if ctx.enclosing_function(call) is function
    ]


def _is_backward(call: cst.Call) -> bool:
    return method_name(call) == "backward"


def _updates_parameters(function: cst.FunctionDef, ctx: Context) -> bool:
    """Does ``function`` (or a closure it defines and hands to ``step``) run a training
    step: backward, an optimizer step, or a hand-written update from gradients?"""
    for call in ctx.nodes_within(function, cst.Call):
        if _is_backward(call) or is_optimizer_step(call, ctx):  # type: ignore[arg-type]
            return True
    return any(ctx.within(function, update) for update in manual_updates(ctx))


def _calls_under(function: cst.FunctionDef, ctx: Context, wanted, modules=()) -> bool:
    for call in _own_calls(function, ctx):
        names = resolve(call.func, ctx, strict=False).names  # type: ignore[attr-defined]
        if names & wanted or any(n.split(".", 1)[0] in modules for n in names):
            return True
    return False


def _called_functions(node: cst.CSTNode, ctx: Context) -> list[cst.FunctionDef]:
    """The script's own functions/methods called inside ``node`` (by their last name)."""
    by_name = functions_by_name(ctx)
    found = []
    for call in ctx.nodes_within(node, cst.Call):
        if _mode_switch(call, ctx):  # type: ignore[arg-type]
            continue
        name = callee_name(call)  # type: ignore[arg-type]
        found.extend(by_name.get(name or "", []))
    return found


def _mode_switch(call: cst.Call, ctx: Context) -> bool:
    """``model.train()`` / ``model.train(False)`` / ``x.train(mode=True)``: nn.Module's mode
    switch, no call of the script's own ``train`` (issue 29: a trainer's ``train`` method
    made every ``model.train(True)`` in it look like a training step)."""
    if method_name(call) != "train" or len(call.args) > 1:
        return False
    if call.args:
        arg = call.args[0]
        keyword = arg.keyword.value if arg.keyword is not None else "mode"
        return (
            keyword == "mode"
            and isinstance(arg.value, cst.Name)
            and arg.value.value in ("True", "False")
        )
    return is_model(call.func.value, ctx)  # type: ignore[attr-defined]


def _is_model_method(function: cst.FunctionDef, ctx: Context) -> bool:
    owner = ctx.enclosing(function, cst.ClassDef)
    if owner is None:
        return False
    bases = {callee_name(cst.Call(func=base.value)) for base in owner.bases}  # type: ignore[attr-defined]
    return "Module" in bases or function.name.value == "forward"


@per_node
def function_role(function: cst.FunctionDef, ctx: Context) -> str:
    """The role of a whole function, from what it calls and what it is called."""
    words = identifier_words(function.name.value)
    if _calls_under(function, ctx, _EXPORT_CALLS) or words & _EXPORT_WORDS:
        return "export"
    # A training step that also logs an image grid (a trainer class's epoch) still trains.
    if _updates_parameters(function, ctx) or function.name.value in step_closures(ctx):
        return "train"
    evaluates = words & _EVAL_NAME_WORDS or (function.decorators and in_no_grad(function.body, ctx))
    if words & _PLOT_WORDS or (
        not evaluates and _calls_under(function, ctx, _PLOT_CALLS, _PLOT_MODULES)
    ):
        return "plot"
    if words & _TRAIN_NAME_WORDS:
        return "train"
    if evaluates:
        return "eval"
    if words & _SETUP_NAME_WORDS or function.name.value == "__init__":
        return "setup"
    if _is_model_method(function, ctx):
        return "train"  # the model's computation runs in the training step
    if any(drives_training(loop, ctx) for loop in _loops_in(function, ctx)) or any(
        _direct_role(called, ctx) == "train" for called in _called_functions(function, ctx)
    ):
        return "train"  # ``main``: it calls the training step
    return _callers_role(function, ctx)


def _callers_role(function: cst.FunctionDef, ctx: Context) -> str:
    """A helper's role is its callers' when they all agree (``dice_loss`` called from the
    training step is train); one level deep, so recursion cannot loop."""
    roles = set()
    for call in ctx.nodes(cst.Call):
        if callee_name(call) != function.name.value:  # type: ignore[arg-type]
            continue
        caller = ctx.enclosing_function(call)
        if caller is None or caller is function:
            return "unknown"
        roles.add(_direct_role(caller, ctx))
    return roles.pop() if len(roles) == 1 else "unknown"


def _direct_role(function: cst.FunctionDef, ctx: Context) -> str:
    words = identifier_words(function.name.value)
    if _updates_parameters(function, ctx) or words & _TRAIN_NAME_WORDS:
        return "train"
    if words & _EVAL_NAME_WORDS or (function.decorators and in_no_grad(function.body, ctx)):
        return "eval"
    return "unknown"


def _loops_in(function: cst.FunctionDef, ctx: Context) -> list[cst.CSTNode]:
    loops = [*ctx.nodes_within(function, cst.For), *ctx.nodes_within(function, cst.While)]
    return [loop for loop in loops if ctx.enclosing_function(loop) is function]


@per_node
def drives_training(loop: cst.CSTNode, ctx: Context) -> bool:
    """Does the loop run training steps, itself or through the script's own functions?"""
    for call in ctx.nodes_within(loop, cst.Call):
        if _is_backward(call) or is_optimizer_step(call, ctx):  # type: ignore[arg-type]
            return True
    if any(ctx.within(loop, update) for update in manual_updates(ctx)):
        return True
    return any(
        _updates_parameters(called, ctx) or identifier_words(called.name.value) & _TRAIN_NAME_WORDS
        for called in _called_functions(loop, ctx)
    )


def _eval_block(node: cst.CSTNode, ctx: Context) -> bool:
    """Is ``node`` inside a ``no_grad`` block that does not update parameters by hand?"""
    if not in_no_grad(node, ctx):
        return False
    block = ctx.enclosing(node, cst.With)
    return block is None or not any(
        reads_grad(update) and ctx.within(block, update) for update in manual_updates(ctx)
    )


@per_node
def site_context(node: cst.CSTNode, ctx: Context) -> str:
    """The context (one of ``CONTEXTS``) of the code at ``node``."""
    function = ctx.enclosing_function(node)
    role = function_role(function, ctx) if function is not None else None
    if role in ("export", "plot"):
        return role
    if _is_grad_block(node, ctx):
        wrapped = {function_role(f, ctx) for f in _called_functions(node, ctx)}
        if len(wrapped) == 1 and wrapped <= {"plot", "export"}:
            return wrapped.pop()  # ``with no_grad(): save_grid(...)``: the helper's role
    if _eval_block(node.body if _is_grad_block(node, ctx) else node, ctx):  # type: ignore[attr-defined]
        return "eval"
    if _eval_only_criterion(node, ctx):
        return "eval"
    if role is not None and role != "train":
        return role
    if role == "train" and (function is None or not _is_driver(function, ctx)):
        return "train"
    # Module level or a driver (``main``): the training loop is train, the rest is setup.
    for loop in (a for a in ctx.ancestors(node) if isinstance(a, (cst.For, cst.While))):
        if drives_training(loop, ctx):
            return "train"
        if any(function_role(f, ctx) == "eval" for f in _called_functions(loop, ctx)):
            return "eval"
    return "setup"


def _eval_only_criterion(node: cst.CSTNode, ctx: Context) -> bool:
    """A loss constructor whose criterion is only ever called in evaluation."""
    if loss_constructor_kind(node, ctx) is None:
        return False
    uses = criterion_calls(node, ctx)  # type: ignore[arg-type]
    return bool(uses) and all(site_context(use, ctx) == "eval" for use in uses)


def after_training_loop(node: cst.CSTNode, ctx: Context) -> bool:
    """Does a loop that runs training steps come before ``node`` in a block around it (the
    reload of the best weights for testing, not a resume)?"""
    statement = ctx.statement_of(node)
    while statement is not None:
        for earlier in ctx.preceding_statements(statement):
            if isinstance(earlier, (cst.For, cst.While)) and drives_training(earlier, ctx):
                return True
        statement = ctx.enclosing(statement, cst.BaseCompoundStatement)
    return False


def _is_grad_block(node: cst.CSTNode, ctx: Context) -> bool:
    """A ``with torch.no_grad():`` statement belongs to the code it wraps."""
    return isinstance(node, cst.With) and in_no_grad(node.body, ctx)


def _is_driver(function: cst.FunctionDef, ctx: Context) -> bool:
    """A function that is ``train`` only because its loop calls the training step."""
    return (
        not _updates_parameters(function, ctx)
        and function.name.value not in step_closures(ctx)
        and not identifier_words(function.name.value) & _TRAIN_NAME_WORDS
        and not _is_model_method(function, ctx)
    )
