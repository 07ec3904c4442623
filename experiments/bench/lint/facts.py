"""Analyses that several lint rules share: training units, ordered calls, value shapes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import libcst as cst

from experiments.bench.lint.script import Node, Scope, Script
from mutator.semantics import (
    bound_names,
    callee_name,
    dotted_name,
    find_arg,
    is_true,
    method_name,
    number_value,
)

PROBABILITY_CALLS = {"softmax", "sigmoid"}
PREDICTION_NAMES = {"logits", "out", "output", "outputs", "pred", "preds", "prediction", "y_hat"}
MODEL_NAMES = {"model", "net", "module"}  # receivers that run a forward


def training_units(script: Script) -> Iterator[tuple[Scope, dict[str, list[cst.Call]]]]:
    """Each function (and the module) that calls backward() or an optimizer step itself."""
    for unit in [script.ctx.module, *script.ctx.nodes(cst.FunctionDef)]:
        calls = {
            kind: script.direct_calls(kind, unit)
            for kind in ("zero_grad", "backward", "opt_step", "clip")
        }
        if calls["backward"] or calls["opt_step"]:
            yield unit, calls


def ordered(script: Script, kinds: tuple[str, ...]) -> Iterator[list[tuple[str, cst.Call]]]:
    """Per scope, the calls of ``kinds`` in document order."""
    grouped: dict[int, list[tuple[str, cst.Call]]] = {}
    for call in script.calls:
        kind = script.kind(call)
        if kind in kinds:
            grouped.setdefault(id(script.scope(call)), []).append((kind or "", call))
    yield from grouped.values()


def first_of(sequence: list[tuple[str, cst.Call]], first: str, then: str) -> cst.Call | None:
    """The first ``first`` call when it comes before the first ``then`` call of a scope."""
    kinds = [kind for kind, _ in sequence]
    if first in kinds and then in kinds and kinds.index(first) < kinds.index(then):
        return sequence[kinds.index(first)][1]
    return None


def strip_casts(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``y.float().unsqueeze(1)`` -> ``y``: shape and dtype calls keep the tensor's meaning."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value
        in {"float", "long", "unsqueeze", "squeeze", "view", "reshape", "to", "double"}
    ):
        expr = expr.func.value
    return expr


def probability_call(expr: cst.BaseExpression) -> str | None:
    """``softmax``/``sigmoid`` when ``expr`` turns logits into probabilities."""
    if isinstance(expr, cst.Call):
        tail = callee_name(expr)
        if tail in PROBABILITY_CALLS:
            return tail
        if tail in {"squeeze", "view", "reshape", "float"} and isinstance(expr.func, cst.Attribute):
            return probability_call(expr.func.value)
    return None


def backwarded_names(script: Script) -> set[str]:
    """Plain names ``backward()`` is called on (``loss`` of ``loss.backward()``)."""
    names = set()
    for call in script.calls_of("backward"):
        if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name):
            names.add(call.func.value.value)
    return names


def assigned_name(script: Script, node: Node) -> str | None:
    """``x`` when ``node`` sits in a statement ``x = ...``."""
    statement = script.ctx.statement_of(node)
    if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign):
        return dotted_name(statement.body[0].targets[0].target)
    return None


def training_loss_calls(script: Script) -> Iterator[tuple[cst.Call, str]]:
    """Loss calls whose value is assigned to a name that backward() is called on."""
    backwarded = backwarded_names(script)
    for call, kind in script.loss_calls():
        if assigned_name(script, call) in backwarded:
            yield call, kind


def uses_bare(expr: cst.BaseExpression, names: set[str]) -> bool:
    """Is ``expr`` one of ``names`` or a sum/product built straight from them?"""
    if isinstance(expr, cst.Name):
        return expr.value in names
    if isinstance(expr, cst.BinaryOperation):
        return uses_bare(expr.left, names) or uses_bare(expr.right, names)
    return False


def target_names(target: cst.BaseExpression) -> list[str]:
    """Plain names a ``for`` target binds (``x, y`` of ``for x, y in loader``)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in target_names(element.value)]
    return []


def model_call(expr: cst.BaseExpression) -> bool:
    """``model(...)`` / ``self.net(...)``: a forward of something named like a model."""
    return isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").rsplit(".", 1)[-1] in {
        "model",
        "net",
    }


def source_after(script: Script, node: Node) -> str:
    line = script.position(node)[0]
    return "\n".join(script.file.source.splitlines()[line:])


def resolve_number(script: Script, expr: cst.BaseExpression, depth: int = 0) -> float | None:
    """A literal, a name assigned once (``lr = LR`` with ``LR = 0.1`` at module level), or
    an argparse ``default`` of ``args.x``."""
    value = number_value(expr)
    if value is not None or depth > 4:  # the depth stops ``a = b; b = a``
        return value
    name = dotted_name(expr)
    if name is None:
        return None
    if name.startswith("args."):  # argparse default of --lr / --learning-rate
        option = "--" + name.split(".", 1)[1].replace("_", "-")
        for call in script.calls:
            if method_name(call) == "add_argument" and call.args:
                flag = call.args[0].value
                if isinstance(flag, cst.SimpleString) and flag.evaluated_value == option:
                    default = find_arg(call, keyword="default")
                    return resolve_number(script, default.value, depth + 1) if default else None
        return None
    values = script.assignments.get(name, [])
    if len(values) == 1:
        return resolve_number(script, values[0][1], depth + 1)
    return None


def in_any(script: Script, roots: Iterable[Node], node: Node) -> bool:
    return any(script.ctx.within(root, node) for root in roots)


def reaches(script: Script, calls: Iterable[cst.Call], kinds: set[str]) -> bool:
    """Does one of ``calls`` make a call of ``kinds``, itself or through a local function?"""
    for call in calls:
        if script.kind(call) in kinds:
            return True
        if any(kinds & script.effects(function) for function in script.local_callees(call)):
            return True
    return False


def binds(assign: cst.Assign) -> set[str]:
    """Dotted names an assignment binds (``out, hidden = ...`` binds both)."""
    return {name for target in assign.targets for name in bound_names(target.target)}


def retains_graph(call: cst.Call) -> bool:
    """``backward(retain_graph=True)``."""
    retain = find_arg(call, keyword="retain_graph")
    return retain is not None and is_true(retain.value)
