"""What a model's layers imply: the keywords a module's ``forward`` takes and how many
parameter tensors it holds (whether it reads the train/eval mode: ``mutator.semantics.mode``).

Every answer reads the layers the script builds (``nn.Sequential(...)``, its own
``nn.Module`` classes and the helpers they call) and is None when the script does not say:
a model imported from elsewhere, layers built in a loop, a class it cannot see.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from mutator.context import Context
from mutator.semantics.losses import LOSS_CLASSES
from mutator.semantics.models import (
    MODULE_PASSTHROUGH,
    class_named,
    nn_class,
    unwrap_calls,
    without_rebinding,
)
from mutator.semantics.names import resolve
from mutator.semantics.scope import values_of
from mutator.semantics.syntax import find_arg, is_false

# Loss modules whose ``forward`` is not ``(input, target)``.
_LOSS_FORWARD = {
    "CTCLoss": ("log_probs", "targets", "input_lengths", "target_lengths"),
    "MarginRankingLoss": ("input1", "input2", "target"),
    "CosineEmbeddingLoss": ("input1", "input2", "target"),
    "TripletMarginLoss": ("anchor", "positive", "negative"),
    "TripletMarginWithDistanceLoss": ("anchor", "positive", "negative"),
    "GaussianNLLLoss": ("input", "target", "var"),
    "PoissonNLLLoss": ("log_input", "target"),
}
# Layers with no parameter tensor among the mode-dependent ones.
_DROPOUTS = ("Dropout", "AlphaDropout", "FeatureAlphaDropout")


def _module_values(expr: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> list | None:
    """The constructor calls ``expr`` may hold (``model``, ``self.net``, ``Net().to(d)``),
    or None when some value is not a call the script makes."""
    values = [expr] if isinstance(expr, cst.Call) else values_of(expr, ctx, at)
    calls = without_rebinding(expr, [unwrap_calls(value, MODULE_PASSTHROUGH) for value in values])
    if not calls or not all(isinstance(call, cst.Call) for call in calls):
        return None
    return calls


def _local_class(call: cst.Call, ctx: Context) -> cst.ClassDef | None:
    names = resolve(call.func, ctx).names
    if len(names) != 1 or not next(iter(names)).startswith("<local>."):
        return None
    return class_named(ctx, next(iter(names)).removeprefix("<local>."))


def agree(verdicts: list[bool | None]) -> bool | None:
    """All True, all False, or None (unknown or mixed)."""
    if not verdicts or None in verdicts or len(set(verdicts)) > 1:
        return None
    return verdicts[0]


# -- forward keywords ----------------------------------------------------------------------


def class_methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}


def _takes(function: cst.FunctionDef, keyword: str) -> bool:
    params = function.params
    if isinstance(params.star_kwarg, cst.Param):
        return True
    return any(p.name.value == keyword for p in (*params.params, *params.kwonly_params))


def _built_takes(call: cst.Call, keyword: str, ctx: Context) -> bool | None:
    loss = nn_class(call, ctx, LOSS_CLASSES)
    if loss is not None:
        return keyword in _LOSS_FORWARD.get(loss, ("input", "target"))
    cls = _local_class(call, ctx)
    forward = class_methods(cls).get("forward") if cls is not None else None
    return None if forward is None else _takes(forward, keyword)


def forward_accepts(
    func: cst.BaseExpression, keyword: str, ctx: Context, at: cst.CSTNode
) -> bool | None:
    """Can the module that ``func`` holds (``criterion``, ``self.loss_fn``) be called with
    ``keyword=``? None when ``func`` is no module the script builds, or nothing tells."""
    calls = _module_values(func, ctx, at)
    if calls is None:
        return None
    return agree([_built_takes(call, keyword, ctx) for call in calls])


# -- layers of a container -------------------------------------------------------------------


def layer_args(call: cst.Call) -> Iterator[cst.BaseExpression]:
    """The layers a container call is given: ``Sequential(a, b)``, ``ModuleList([a, b])``."""
    for arg in call.args:
        if arg.star:
            yield arg  # type: ignore[misc]  # ``*layers``: unknown, handled by the caller
        elif isinstance(arg.value, (cst.List, cst.Tuple)):
            yield from (element.value for element in arg.value.elements)
        elif isinstance(arg.value, cst.Dict):
            yield from (e.value for e in arg.value.elements if isinstance(e, cst.DictElement))
        else:
            yield arg.value


# -- parameter tensors ---------------------------------------------------------------------

# torch.nn layers with a weight and, unless ``bias=False``, a bias.
_WEIGHT_AND_BIAS = ("Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d")
_WEIGHT_AND_BIAS += ("ConvTranspose2d", "ConvTranspose3d")
# ... with an affine weight and bias unless switched off.
_AFFINE = {"BatchNorm1d": "affine", "BatchNorm2d": "affine", "BatchNorm3d": "affine"}
_AFFINE |= {"LayerNorm": "elementwise_affine", "GroupNorm": "affine"}
_WEIGHT_ONLY = ("Embedding",)


def _nn_tensors(call: cst.Call, tail: str, ctx: Context, depth: int) -> int | None:
    if tail in _WEIGHT_AND_BIAS:
        bias = find_arg(call, "bias")
        return 1 if bias is not None and is_false(bias.value) else 2
    if tail in _AFFINE:
        switch = find_arg(call, _AFFINE[tail])
        return 0 if switch is not None and is_false(switch.value) else 2
    if tail in _WEIGHT_ONLY:
        return 1
    if tail == "Sequential":
        counts = [
            _call_tensors(layer, ctx, depth + 1) if isinstance(layer, cst.Call) else None
            for layer in layer_args(call)
        ]
        return None if None in counts else sum(counts)  # type: ignore[arg-type]
    if tail.startswith(_DROPOUTS) or tail in _PARAMETERLESS:
        return 0
    return None


_PARAMETERLESS = frozenset(
    {"ReLU", "LeakyReLU", "ReLU6", "ELU", "SELU", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid"}
    | {"Softplus", "Softmax", "LogSoftmax", "Flatten", "Unflatten", "Identity", "Hardtanh"}
    | {"MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d"}
    | {"AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "Upsample"}
)


def _call_tensors(call: cst.Call, ctx: Context, depth: int) -> int | None:
    if depth > 6:
        return None
    names = resolve(call.func, ctx).names
    name = next(iter(names)) if len(names) == 1 else ""
    if name.startswith("torch.nn.") and name.count(".") == 2:
        return _nn_tensors(call, name.rsplit(".", 1)[-1], ctx, depth)
    cls = _local_class(call, ctx)
    return _class_tensors(cls, ctx, depth + 1) if cls is not None else None


def _class_tensors(cls: cst.ClassDef, ctx: Context, depth: int) -> int | None:
    """Parameter tensors of a script's module class whose ``__init__`` assigns each layer
    once (``self.fc = nn.Linear(...)``); None for loops, helpers or other bases."""
    init = class_methods(cls).get("__init__")
    if init is None or any(
        not any(n.startswith("torch.nn.") for n in resolve(b.value, ctx).names) for b in cls.bases
    ):
        return None
    if ctx.nodes_within(init, cst.For) or ctx.nodes_within(init, cst.ListComp):
        return None
    total = 0
    for statement in init.body.body:
        line = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
        if isinstance(line, cst.Expr) and isinstance(line.value, cst.Call):
            continue  # ``super().__init__()``
        if not isinstance(line, cst.Assign):
            return None
        count = _value_tensors(line.value, ctx, depth)
        if count is None:
            return None
        total += count
    return total


def _value_tensors(value: cst.BaseExpression, ctx: Context, depth: int) -> int | None:
    """Parameter tensors an ``__init__`` assignment adds: a layer's, a ``nn.Parameter``'s
    one, none for a number or a plain tensor; None for anything handed in."""
    if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)):
        return 0
    if not isinstance(value, cst.Call):
        return None
    names = resolve(value.func, ctx).names
    if names == {"torch.nn.Parameter"}:
        return 1
    if names and all(n.startswith("torch.") and not n.startswith("torch.nn.") for n in names):
        return 0  # ``torch.zeros(...)``: a plain tensor attribute
    return _call_tensors(value, ctx, depth)


def parameter_tensors(model: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> int | None:
    """How many parameter tensors ``model.parameters()`` yields, when the script says."""
    calls = _module_values(model, ctx, at)
    if calls is None:
        return None
    counts = {_call_tensors(call, ctx, 0) for call in calls}
    return counts.pop() if len(counts) == 1 else None


def one_weight_layer(call: cst.Call, ctx: Context, kinds: tuple[str, ...]) -> bool:
    """Does ``call`` build one layer of ``kinds`` (``nn.Linear``), alone or as the only layer
    with parameters of a script's module class (a logistic regression's class of one
    ``nn.Linear``; issue 29)?"""
    names = resolve(call.func, ctx).names
    name = next(iter(names)) if len(names) == 1 else ""
    if name.startswith("torch.nn.") and name.count(".") == 2:
        return name.rsplit(".", 1)[-1] in kinds
    cls = _local_class(call, ctx)
    init = class_methods(cls).get("__init__") if cls is not None else None
    if init is None or _class_tensors(cls, ctx, 1) is None:  # type: ignore[arg-type]
        return False
    weighted = [
        line.value
        for statement in init.body.body
        for line in (statement.body[:1] if isinstance(statement, cst.SimpleStatementLine) else ())
        if isinstance(line, cst.Assign) and _value_tensors(line.value, ctx, 1)
    ]
    return (
        len(weighted) == 1
        and isinstance(weighted[0], cst.Call)
        and one_weight_layer(weighted[0], ctx, kinds)
    )
