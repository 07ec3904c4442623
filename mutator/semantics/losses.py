"""Losses: constructors, functional losses, their calls, inputs and targets."""

from __future__ import annotations

from collections.abc import Collection

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_module, per_node
from mutator.semantics.models import module_constructors, nn_class
from mutator.semantics.names import resolve
from mutator.semantics.scope import assigned_values, values_of
from mutator.semantics.syntax import (
    callee_name,
    dotted_name,
    find_arg,
    last_name,
    positional_args,
)

# -- losses -----------------------------------------------------------------------------------

LOSS_CLASSES = (
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "SmoothL1Loss",
    "HuberLoss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "KLDivLoss",
    "PoissonNLLLoss",
)
# ``torch.nn.functional`` losses and the class each one computes.
FUNCTIONAL_LOSSES = {
    "cross_entropy": "CrossEntropyLoss",
    "nll_loss": "NLLLoss",
    "mse_loss": "MSELoss",
    "l1_loss": "L1Loss",
    "smooth_l1_loss": "SmoothL1Loss",
    "huber_loss": "HuberLoss",
    "binary_cross_entropy": "BCELoss",
    "binary_cross_entropy_with_logits": "BCEWithLogitsLoss",
    "kl_div": "KLDivLoss",
    "poisson_nll_loss": "PoissonNLLLoss",
}
# Every functional loss, also those no operator rewrites.
ALL_FUNCTIONAL_LOSSES = frozenset(
    {*FUNCTIONAL_LOSSES, "cosine_embedding_loss", "ctc_loss", "hinge_embedding_loss"}
    | {"margin_ranking_loss", "multi_margin_loss", "multilabel_margin_loss"}
    | {"multilabel_soft_margin_loss", "gaussian_nll_loss", "soft_margin_loss"}
    | {"triplet_margin_loss"}
)
CLASS_INDEX_LOSSES = frozenset({"CrossEntropyLoss", "NLLLoss"})
# Elementwise losses between two same-shaped tensors: they broadcast mismatched shapes.
REGRESSION_LOSSES = frozenset({"MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss"})
BINARY_LOSSES = frozenset({"BCELoss", "BCEWithLogitsLoss"})
_FUNCTIONAL = {f"torch.nn.functional.{name}" for name in FUNCTIONAL_LOSSES}
# Qualified spellings of the class-index losses, class and functional form.
CLASS_INDEX_LOSS_NAMES = frozenset({f"torch.nn.{name}" for name in CLASS_INDEX_LOSSES}) | frozenset(
    f"torch.nn.functional.{function}"
    for function, cls in FUNCTIONAL_LOSSES.items()
    if cls in CLASS_INDEX_LOSSES
)


@per_node
def loss_constructor_kind(call: cst.CSTNode, ctx: Context) -> str | None:
    """``CrossEntropyLoss`` for ``nn.CrossEntropyLoss(...)`` (any alias), else None."""
    if not isinstance(call, cst.Call):
        return None
    return nn_class(call, ctx, LOSS_CLASSES)


@per_node
def functional_loss_kind(call: cst.CSTNode, ctx: Context) -> str | None:
    """``CrossEntropyLoss`` for ``F.cross_entropy(...)`` (any alias), else None."""
    if not isinstance(call, cst.Call) or not resolve(call.func, ctx).matches(_FUNCTIONAL):
        return None
    if not resolve(call.func, ctx).names and _holds_built_object(call, ctx):
        return None  # ``mse_loss = nn.MSELoss()``: a module named like the function
    for name in resolve(call.func, ctx).names | {last_name(call.func)}:
        kind = FUNCTIONAL_LOSSES.get(name.rsplit(".", 1)[-1])
        if kind is not None:
            return kind
    return None


def _holds_built_object(call: cst.Call, ctx: Context) -> bool:
    """Is the callee a name the script binds to what a call returned (a module instance)?"""
    values = values_of(call.func, ctx, call)
    return bool(values) and all(isinstance(value, cst.Call) for value in values)


def loss_site_kind(node: cst.CSTNode, ctx: Context, kinds: Collection[str]) -> str | None:
    """The kind of a loss *constructor or functional call* among ``kinds`` (the places a
    loss is configured), else None."""
    kind = loss_constructor_kind(node, ctx) or functional_loss_kind(node, ctx)
    return kind if kind in kinds else None


@per_node
def loss_call_kind(call: cst.CSTNode, ctx: Context) -> str | None:
    """Which loss a call computes: ``F.cross_entropy(a, b)``, ``criterion(a, b)`` where
    ``criterion`` holds ``nn.CrossEntropyLoss()``, or ``nn.MSELoss()(a, b)``."""
    if not isinstance(call, cst.Call) or not call.args:
        return None
    functional = functional_loss_kind(call, ctx)
    if functional is not None:
        return functional
    kinds = {
        loss_constructor_kind(constructor, ctx)
        for constructor in module_constructors(call.func, ctx, call, LOSS_CLASSES)
    }
    return kinds.pop() if len(kinds) == 1 else None


@per_module
def loss_calls(ctx: Context) -> list[tuple[cst.Call, str]]:
    """Every loss computation in the module with its loss class name."""
    found = []
    for call in ctx.nodes(cst.Call):
        kind = loss_call_kind(call, ctx)
        if kind is not None:
            found.append((call, kind))
    return found


def uses_loss(ctx: Context, kinds: Collection[str]) -> bool:
    return any(kind in kinds for _, kind in loss_calls(ctx))


def criterion_calls(constructor: cst.Call, ctx: Context) -> list[cst.Call]:
    """The calls that compute the loss this constructor builds."""
    return [
        call
        for call, _ in loss_calls(ctx)
        if any(
            value is constructor
            for value in module_constructors(call.func, ctx, call, LOSS_CLASSES)
        )
    ]


def loss_input(call: cst.Call) -> cst.Arg | None:
    return find_arg(call, keyword="input", position=0)


def loss_target(call: cst.Call) -> cst.Arg | None:
    return find_arg(call, keyword="target", position=1)


# Tensor methods that only view or re-type a tensor: safe to evaluate twice.
_VIEW_METHODS = frozenset(
    {"view", "reshape", "flatten", "squeeze", "unsqueeze", "permute", "transpose", "contiguous"}
    | {"size", "float", "long", "t", "detach"}
)


def is_pure(expr: cst.BaseExpression) -> bool:
    """Cheap and side-effect free, so repeating it (``logits.size(-1)``) is harmless."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.SimpleString)):
        return True
    if isinstance(expr, cst.Attribute):
        return is_pure(expr.value)
    if isinstance(expr, cst.UnaryOperation):
        return is_pure(expr.expression)
    if isinstance(expr, cst.Subscript):
        return is_pure(expr.value) and all(_is_pure_index(e.slice) for e in expr.slice)
    if isinstance(expr, cst.Call):
        return (
            isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _VIEW_METHODS
            and is_pure(expr.func.value)
            and all(is_pure(arg.value) for arg in expr.args)
        )
    return False


def _is_pure_index(part: cst.BaseSlice) -> bool:
    if isinstance(part, cst.Index):
        return is_pure(part.value)
    return all(bound is None or is_pure(bound) for bound in (part.lower, part.upper, part.step))


_LOG_SOFTMAX_FUNCTIONS = {"torch.nn.functional.log_softmax", "torch.log_softmax"}


def log_softmax_input(call: cst.CSTNode, ctx: Context) -> tuple[str, cst.BaseExpression] | None:
    """(form, input) for a log-softmax call: ``function`` (``F.log_softmax(x, dim=1)``,
    ``torch.log_softmax(x, 1)``), ``method`` (``x.log_softmax(dim=1)``) or ``module`` (a
    call of something holding ``nn.LogSoftmax()``)."""
    if not isinstance(call, cst.Call):
        return None
    func = call.func
    tail = last_name(func) if not isinstance(func, cst.Call) else ""
    positional = positional_args(call)
    if positional and module_constructors(func, ctx, call, ("LogSoftmax",)):
        return "module", positional[0].value
    if tail != "log_softmax":
        return None
    if isinstance(func, cst.Name):
        if positional and resolve(func, ctx).matches(_LOG_SOFTMAX_FUNCTIONS):
            return "function", positional[0].value
        return None
    assert isinstance(func, cst.Attribute)
    owner = resolve(func.value, ctx).names
    # An unresolvable receiver (``F`` handed in) is a module when a tensor is passed in:
    # the tensor method ``x.log_softmax(1)`` only takes the dim.
    passes_tensor = bool(positional) and not isinstance(
        positional[0].value, (cst.Integer, cst.UnaryOperation)
    )
    if owner & {"torch", "torch.nn.functional"} or (not owner and passes_tensor):
        return ("function", positional[0].value) if positional else None
    return "method", func.value


def looks_like_loss_call(call: cst.Call, ctx: Context) -> bool:
    """Does the call compute some loss? ``F.cross_entropy(...)``, a criterion built from any
    ``*Loss`` class, or a callee named like one (``criterion``, ``self.loss_fn``).

    Looser than ``loss_call_kind``: gradient-flow bugs need a loss, not which one.
    """
    tail = callee_name(call)
    if tail is None or tail[:1].isupper():
        return False  # ``nn.CrossEntropyLoss()`` builds a criterion; it computes no loss
    resolved = resolve(call.func, ctx, strict=False).names
    for name in resolved:
        module, _, function = name.rpartition(".")
        if module == "torch.nn.functional" and function in ALL_FUNCTIONAL_LOSSES:
            return True
    dotted = dotted_name(call.func)
    if dotted is not None:
        for value in assigned_values(ctx, dotted):
            if not isinstance(value, cst.Call):
                continue
            constructors = {*resolve(value.func, ctx, strict=False).names, callee_name(value) or ""}
            if any(name.endswith("Loss") for name in constructors):
                return True
        last = dotted.rsplit(".", 1)[-1].lower()
        if "criterion" in last or "loss" in last:
            return True
    return not resolved and tail in ALL_FUNCTIONAL_LOSSES


@per_module
def has_class_index_loss(ctx: Context) -> bool:
    """Does the script build or call a class-index loss anywhere (its labels are then
    class indices)?"""
    return any(
        resolve(call, ctx, strict=False).matches(CLASS_INDEX_LOSS_NAMES)
        for call in ctx.nodes(cst.Call)
    )


# Losses that apply softmax / sigmoid themselves and so expect raw logits (loss class names
# as ``patterns.loss_call_kind`` returns them, for the class and the functional form).
LOGITS_LOSSES = frozenset({"CrossEntropyLoss", "BCEWithLogitsLoss"})


def forward_returns_log_probs(cls: cst.ClassDef, ctx: Context) -> bool | None:
    """Does the class's ``forward`` end in log-softmax (``return F.log_softmax(x, 1)``, a
    ``nn.LogSoftmax`` module, or a name assigned from one)? None when it has no ``forward``
    or returns nothing we can read."""
    forwards = [
        f
        for f in ctx.nodes_within(cls, cst.FunctionDef)
        if f.name.value == "forward" and ctx.enclosing(f, cst.ClassDef) is cls  # type: ignore[attr-defined]
    ]
    if len(forwards) != 1:
        return None
    returns = [r.value for r in ctx.nodes_within(forwards[0], cst.Return) if r.value is not None]  # type: ignore[attr-defined]
    if not returns:
        return None
    for value in returns:
        values = [value]
        if isinstance(value, cst.Name):
            values = [
                a.value  # type: ignore[attr-defined]
                for a in ctx.nodes_within(forwards[0], cst.Assign)
                if any(dotted_name(t.target) == value.value for t in a.targets)  # type: ignore[attr-defined]
            ] or values
        if not any(log_softmax_input(v, ctx) is not None for v in values):
            return False
    return True
