"""Model kinds: which classes and values are ``nn.Module``s, which ``nn`` layers a call builds."""

from __future__ import annotations

import re
from collections.abc import Collection

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_node
from mutator.semantics.modules import imported_definition
from mutator.semantics.names import resolve
from mutator.semantics.scope import (
    _enclosing_class,
    assigned_values,
    enclosing_function,
    values_of,
)
from mutator.semantics.syntax import dotted_name, method_name, receiver

# -- models -----------------------------------------------------------------------------------

# Calls that return the module they are called on, so ``Net().to(device)`` is still a Net.
MODULE_PASSTHROUGH = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval", "requires_grad_"}
)
_MODEL_NAME = re.compile(
    r"model|net|module|encoder|decoder|classifier|backbone|generator|discriminator|critic|"
    r"actor|policy|student|teacher|transformer|mlp|cnn|rnn|lstm|gpt|bert|vae",
    re.IGNORECASE,
)
_NOT_MODEL_NAME = re.compile(
    r"trainer|loader|data|optim|sched|criterion|loss|metric|logger|writer|scaler",
    re.IGNORECASE,
)
_MODULE_FACTORIES = ("torch.compile", "timm.create_model")


def unwrap_calls(expr: cst.BaseExpression, methods: Collection[str]) -> cst.BaseExpression:
    """``Net().to(device).float()`` -> ``Net()``: strip chained calls of ``methods``."""
    while isinstance(expr, cst.Call) and method_name(expr) in methods:
        expr = receiver(expr)
    return expr


def without_rebinding(
    expr: cst.BaseExpression, values: list[cst.BaseExpression]
) -> list[cst.BaseExpression]:
    """``values`` (unwrapped) without those that are ``expr`` itself: ``model = model.cuda()``
    rebinds the model the other values build (issue 29); all of them when none is left."""
    own = dotted_name(expr)
    kept = [v for v in values if own is None or dotted_name(v) != own]
    return kept or values


def _class_is_module(name: str, ctx: Context, depth: int) -> bool | None:
    """Does the class ``name`` defined in this module subclass ``nn.Module``?"""
    classes = [c for c in ctx.nodes(cst.ClassDef) if c.name.value == name]  # type: ignore[attr-defined]
    if not classes:
        return None
    for base in classes[0].bases:  # type: ignore[attr-defined]
        resolved = resolve(base.value, ctx, strict=False).names
        if any(q.startswith("torch.nn.") or q.endswith("LightningModule") for q in resolved):
            return True
        base_name = dotted_name(base.value)
        if not resolved and base_name and base_name.endswith("Module"):
            return True  # ``nn`` came from somewhere we cannot see
        if base_name and depth < 4 and _class_is_module(base_name, ctx, depth + 1):
            return True
    return False


@per_node
def is_module_class(cls: cst.ClassDef, ctx: Context) -> bool:
    """Does a class of this script subclass ``nn.Module`` (directly or through its own bases)?"""
    return bool(_class_is_module(cls.name.value, ctx, 0))


def _call_is_module(call: cst.Call, ctx: Context, depth: int) -> bool | None:
    """Is the value of ``call`` a module? None when nothing can be told."""
    resolved = resolve(call.func, ctx, strict=False).names
    for qualified in resolved:
        if qualified.startswith("torch.nn."):
            tail = qualified.rsplit(".", 1)[-1]
            # nn.Linear, nn.Sequential: yes; F.relu, nn.init.*, nn.Parameter, a loss: no.
            return tail[:1].isupper() and not tail.endswith("Loss") and "Parameter" not in tail
        if qualified in _MODULE_FACTORIES or qualified.startswith("torchvision.models."):
            return True
    callee = dotted_name(call.func)
    if callee is not None and "." not in callee:
        local = _class_is_module(callee, ctx, depth)
        if local is not None:
            return local
    # A class of the project's own files (``from model import Seq2Seq``, issue 29); a loss
    # module (``SplitCrossEntropyLoss``) is no model.
    found = imported_definition(call.func, ctx)
    if found is not None and isinstance(found[0], cst.ClassDef):
        named_otherwise = _NOT_MODEL_NAME.search(found[0].name.value)
        return is_module_class(found[0], found[1]) and not named_otherwise
    if any(q.startswith("torch.") for q in resolved):
        return False  # torch.Generator(), torch.optim.Adam(...): resolved, and not a model
    return None


def _annotation_is_module(name: str, use: cst.CSTNode, ctx: Context) -> bool:
    """``def f(model: nn.Module)``: the parameter's annotation says so."""
    function = enclosing_function(use, ctx)
    if function is None:
        return False
    for param in ctx.nodes_within(function.params, cst.Param):
        if param.name.value == name and param.annotation is not None:  # type: ignore[attr-defined]
            resolved = resolve(param.annotation.annotation, ctx, strict=False).names  # type: ignore[attr-defined]
            if any(q.startswith("torch.nn.") for q in resolved):
                return True
    return False


def _value_is_module(expr: cst.BaseExpression, ctx: Context, depth: int = 0) -> bool | None:
    """True/False when assignments, imports or class bases tell; None when they do not."""
    if depth > 3:
        return None
    expr = unwrap_calls(expr, MODULE_PASSTHROUGH)
    if isinstance(expr, cst.Call):
        return _call_is_module(expr, ctx, depth)
    name = dotted_name(expr)
    if name is None:
        return None
    if name == "self":
        owner = _enclosing_class(expr, ctx)
        if not isinstance(owner, cst.ClassDef):
            return None
        return bool(_class_is_module(owner.name.value, ctx, depth))
    verdicts = [
        _value_is_module(value, ctx, depth + 1)
        for value in assigned_values(ctx, name)
        if value is not expr
    ]
    if True in verdicts:
        return True
    if verdicts and all(verdict is False for verdict in verdicts):
        return False
    if "." not in name and _annotation_is_module(name, expr, ctx):
        return True
    return None


@per_node
def is_model(expr: cst.BaseExpression, ctx: Context) -> bool:
    """Is ``expr`` (a receiver such as ``model``, ``self.net``, ``Net()``) a model?

    Assignments and class bases decide first; the name decides when they cannot
    (a function parameter, a model built by a helper imported from elsewhere).
    """
    verdict = _value_is_module(expr, ctx)
    if verdict is not None:
        return verdict
    built = unwrap_calls(expr, MODULE_PASSTHROUGH)
    # ``EncoderCNN(...)`` imported from the project's own model.py: the class name tells;
    # ``kwargs["model"]`` (a framework's ``fit(**kwargs)``, issue 29): the key does.
    name = dotted_name(built.func if isinstance(built, cst.Call) else built) or _string_key(built)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return bool(_MODEL_NAME.search(last)) and not _NOT_MODEL_NAME.search(last)


def _string_key(expr: cst.BaseExpression) -> str | None:
    """``"model"`` of ``kwargs["model"]``."""
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1:
        return None
    index = expr.slice[0].slice
    if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
        value = index.value.evaluated_value
        return value if isinstance(value, str) else None
    return None


def nn_class(call: cst.BaseExpression, ctx: Context, classes: Collection[str]) -> str | None:
    """Which of ``classes`` (torch.nn class names) the call constructs, if any."""
    if not isinstance(call, cst.Call):
        return None
    wanted = {
        f"{module}.{name}"
        for name in classes
        for module in ("torch.nn", "torch.nn.modules", "torch.nn.modules.loss")
    }
    if not resolve(call.func, ctx).matches(wanted):
        return None
    dotted = dotted_name(call.func) or ""
    for name in resolve(call.func, ctx).names | {dotted}:
        tail = name.rsplit(".", 1)[-1]
        if tail in classes:
            return tail
    return None


def module_constructors(
    func: cst.BaseExpression, ctx: Context, at: cst.CSTNode, classes: Collection[str]
) -> list[cst.Call]:
    """The ``nn.<Class>(...)`` constructors among ``classes`` that ``func`` (a called name,
    ``self.<attr>`` or an inline constructor) may hold."""
    if isinstance(func, cst.Call):
        return [func] if nn_class(func, ctx, classes) else []
    # ``nn.CrossEntropyLoss().to(device)`` / ``.cuda()`` is still the loss it builds (issue 29).
    values = (unwrap_calls(value, MODULE_PASSTHROUGH) for value in values_of(func, ctx, at))
    return [
        value for value in values if isinstance(value, cst.Call) and nn_class(value, ctx, classes)
    ]


def class_named(ctx: Context, name: str) -> cst.ClassDef | None:
    """The module-level-or-nested ``class <name>`` this module defines, if exactly one."""
    found = [c for c in ctx.nodes(cst.ClassDef) if c.name.value == name]  # type: ignore[attr-defined]
    return found[0] if len(found) == 1 else None  # type: ignore[return-value]
