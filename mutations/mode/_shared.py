"""Analyses the mode operators share (private to this package)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import NonSite
from mutator.semantics import (
    code_of,
    expression_call,
    is_false,
    is_model,
    is_true,
    method_name,
    mode_dependent,
    receiver,
)

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


def model_mode_statement(node: cst.CSTNode, ctx: Context, mode: str) -> cst.Call | None:
    """The call of a statement line that puts a model into ``mode``, else None."""
    call = expression_call(node)
    if call is None or mode_set(call) != mode:
        return None
    return call if is_model(receiver(call), ctx) else None


def mode_blind(call: cst.Call, ctx: Context) -> NonSite | None:
    """A non-site when the model the mode call switches has no layer that reads the mode
    (no dropout, batch norm, ``self.training``): train and eval compute the same thing."""
    model = receiver(call)
    if model is None or mode_dependent(model, ctx, call) is not False:
        return None
    return NonSite(
        f"equivalent: `{code_of(model)}` has no dropout, batch norm or other layer that "
        "reads the train/eval mode"
    )
