"""Learning-rate schedules written by hand: the functions, lambdas and classes that compute a
rate from a step count. Their arithmetic (``(step - warmup) / (max_steps - warmup)``) looks
like a standardisation and is none: no input of a model passes through it (issue 29).
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_module, per_node
from mutator.semantics.data import identifier_words
from mutator.semantics.names import resolve
from mutator.semantics.optim import SCHEDULER_MODULE, class_kind, manual_lr_writes
from mutator.semantics.scope import function_uses
from mutator.semantics.syntax import callee_name

# Words of a function name that says it computes a learning rate or its schedule.
_SCHEDULE_WORDS = frozenset({"lr", "schedule", "scheduler", "warmup", "anneal", "annealing"})
_RATE = frozenset({"learning", "rate"})


def _named_for_schedule(name: str) -> bool:
    words = identifier_words(name)
    return bool(words & _SCHEDULE_WORDS) or words >= _RATE


def _scheduler_call(call: cst.CSTNode, ctx: Context) -> bool:
    if not isinstance(call, cst.Call):
        return False
    names = resolve(call.func, ctx, strict=False).names
    if any(name.startswith(SCHEDULER_MODULE) for name in names):
        return True
    return class_kind(call.func, ctx) == "scheduler" or "schedul" in (callee_name(call) or "")


@per_module
def _lr_writers(ctx: Context) -> frozenset[int]:
    """ids of the functions that write a parameter group's rate (``g["lr"] = lr``)."""
    found = set()
    for write in manual_lr_writes(ctx):
        function = ctx.enclosing_function(write)
        if function is not None:
            found.add(id(function))
    return frozenset(found)


@per_node
def _schedule_function(function: cst.FunctionDef, ctx: Context) -> bool:
    if _named_for_schedule(function.name.value) or id(function) in _lr_writers(ctx):
        return True
    owner = ctx.enclosing(function, cst.ClassDef)
    if isinstance(owner, cst.ClassDef) and (
        _named_for_schedule(owner.name.value)
        or any(class_kind(base.value, ctx) == "scheduler" for base in owner.bases)
    ):
        return True
    uses = function_uses(function, ctx) or []
    return any(_scheduler_call(ctx.parent(ctx.parent(use)), ctx) for use in uses)  # type: ignore[arg-type]


def lr_schedule_of(node: cst.CSTNode, ctx: Context) -> str | None:
    """The name of the learning-rate schedule ``node`` is computed in (a function named for
    it, one that writes ``param_groups``' rate, a method of a scheduler class, a function or
    lambda handed to ``LambdaLR``), else None."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.Lambda):
            call = ctx.parent(ctx.parent(ancestor))
            if _scheduler_call(call, ctx):
                return "lambda"
        if isinstance(ancestor, cst.FunctionDef):
            return ancestor.name.value if _schedule_function(ancestor, ctx) else None
    return None
