"""Does a model act differently in train and eval mode (dropout, batch norm, recurrent
dropout, anything reading ``self.training``)?

The answer reads the layers the model is built with: ``nn.Sequential(...)``, the script's
own ``nn.Module`` classes and the helpers they call, and (issue 29) the classes and
helpers of the project's other files that the script imports (``from modules import
UNet``), with the arguments of that construction (a ``Dropout`` built with a probability
that is 0 on every path reads no mode). A model handed to a module-level function by a
sibling script (``engine.train(model=model)`` in ``train.py``) is read there. False only
when every layer is known and none reads the mode; None when the code does not say: a
model from a package, a hub or a file, a class built by name.
"""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics.constants import UNBOUND, Bindings, bind, value
from mutator.semantics.layers import agree, class_methods, layer_args
from mutator.semantics.models import (
    MODULE_PASSTHROUGH,
    class_named,
    unwrap_calls,
    without_rebinding,
)
from mutator.semantics.modules import callers_elsewhere, imported_definition, top_definition
from mutator.semantics.names import resolve
from mutator.semantics.scope import (
    _positional_index,
    argument_values,
    enclosing_function,
    is_parameter,
    values_of,
)
from mutator.semantics.syntax import dotted_name, find_arg, is_false

# torch.nn classes that behave differently in train and eval mode (prefixes of their names).
_MODE_LAYERS = ("BatchNorm", "LazyBatchNorm", "SyncBatchNorm", "Transformer")
_DROPOUT = ("Dropout", "AlphaDropout", "FeatureAlphaDropout")
# ... and those that do only with an argument: recurrent dropout, tracked instance statistics.
_RECURRENT = ("RNN", "LSTM", "GRU", "MultiheadAttention")
_CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")
# Calls that return the model they are given, wrapped.
_WRAPPERS = frozenset({"DataParallel", "DistributedDataParallel", "compile"})
# ... or a copy of it (an EMA model: ``copy.deepcopy(model).eval()``).
_COPIES = frozenset({"copy.deepcopy", "copy.copy"})
# torch calls that return a model whose layers the script does not show.
_LOADED = ("torch.hub.", "torch.load", "torch.jit.load")
# PyTorch Geometric convolutions with no dropout or normalisation inside (issue 22: the
# link-prediction example's two GCNConv layers): message passing reads no mode.
_PYG_MODE_FREE = frozenset(
    {"GCNConv", "SAGEConv", "GraphConv", "ChebConv", "SGConv", "TAGConv", "LGConv"}
)
_MAX_DEPTH = 8
Origin = tuple[cst.Call, Context]


def _either(verdicts: list[bool | None]) -> bool | None:
    """True if any part reads the mode, else None if any is unknown, else False."""
    return True if True in verdicts else (None if None in verdicts else False)


def _nonzero(arg: cst.Arg | None, ctx: Context, env: Bindings) -> bool:
    """Is the probability ``arg`` passes anything but 0 on some path (unknown included)?"""
    return arg is None or value(arg.value, ctx, env) != 0


def _nn_mode(call: cst.Call, tail: str, ctx: Context, depth: int, env: Bindings) -> bool | None:
    if tail.startswith(_DROPOUT):
        return _nonzero(find_arg(call, "p", 0), ctx, env)  # p defaults to 0.5
    if tail.startswith(_MODE_LAYERS):
        return True
    if tail in _RECURRENT:
        dropout = find_arg(call, "dropout")
        return dropout is not None and _nonzero(dropout, ctx, env)
    if tail.startswith("InstanceNorm"):
        tracked = find_arg(call, "track_running_stats")
        return tracked is not None and not is_false(tracked.value)
    if tail in _CONTAINERS:
        verdicts: list[bool | None] = []
        for layer in layer_args(call):
            if isinstance(layer, cst.Arg):  # ``*layers``
                elements = _starred(layer.value, ctx, call)
                verdicts += (
                    [None]
                    if elements is None
                    else [
                        _call_mode(e, ctx, depth + 1, env) if isinstance(e, cst.Call) else None
                        for e in elements
                    ]
                )
            elif isinstance(layer, cst.Call):
                verdicts.append(_call_mode(layer, ctx, depth + 1, env))
            elif isinstance(layer, (cst.GeneratorExp, cst.ListComp)) and isinstance(
                layer.elt, cst.Call
            ):  # ``ModuleList(Block(config) for _ in range(n))``: copies of one layer
                verdicts.append(_call_mode(layer.elt, ctx, depth + 1, env))
            else:
                verdicts.append(None)  # a layer built elsewhere
        return _either(verdicts)
    return False


def _starred(expr: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> list | None:
    """The elements ``*expr`` spreads: a comprehension's element, a list display, or a
    local list built from displays and ``append``/``extend``/``+=`` in the same function
    (``layers.extend([nn.Linear(a, b), nn.ReLU()])``); None when something else adds."""
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return [expr.elt]
    if isinstance(expr, (cst.List, cst.Tuple)):
        return [e.value for e in expr.elements]
    if not isinstance(expr, cst.Name):
        return None
    function = enclosing_function(at, ctx)
    if function is not None and is_parameter(function, expr.value):
        return None
    found: list = []
    for held in values_of(expr, ctx, at):
        spread = (
            _starred(held, ctx, held)
            if isinstance(held, (cst.List, cst.Tuple, cst.ListComp))
            else None
        )
        if spread is None:
            return None
        found += spread
    scope = function if function is not None else ctx.module
    for call in ctx.nodes_within(scope, cst.Call):
        func = call.func  # type: ignore[attr-defined]
        if not (isinstance(func, cst.Attribute) and dotted_name(func.value) == expr.value):
            continue
        if func.attr.value in ("append", "insert") and call.args:  # type: ignore[attr-defined]
            found.append(call.args[-1].value)  # type: ignore[attr-defined]
        elif func.attr.value == "extend" and len(call.args) == 1:  # type: ignore[attr-defined]
            spread = _starred(call.args[0].value, ctx, call)  # type: ignore[attr-defined]
            if spread is None:
                return None
            found += spread
    for augmented in ctx.nodes_within(scope, cst.AugAssign):
        if dotted_name(augmented.target) == expr.value:  # type: ignore[attr-defined]
            spread = _starred(augmented.value, ctx, augmented)  # type: ignore[attr-defined]
            if spread is None:
                return None
            found += spread
    return found or None


def _built_by_name(func: cst.BaseExpression) -> bool:
    """Is the callee looked up at run time (``models.__dict__[args.arch]``, ``MODELS[name]``,
    ``getattr(models, name)``)? What it builds is unknown: only a run can tell (issue 29:
    BatchNorm ResNets read as mode-free). ``self.layers[i]`` is a layer the class builds."""
    if isinstance(func, cst.Call):
        return True
    if not isinstance(func, cst.Subscript):
        return False
    root = func.value
    while isinstance(root, (cst.Attribute, cst.Subscript, cst.Call)):
        root = root.func if isinstance(root, cst.Call) else root.value
    return not (isinstance(root, cst.Name) and root.value == "self")


def _wrapped_mode(call: cst.Call, ctx: Context, depth: int, env: Bindings) -> bool | None:
    """The mode of the model a wrapper (``DataParallel(model)``, ``torch.compile(model)``)
    or a copy (``copy.deepcopy(model)``) is given."""
    inner = find_arg(call, "module", 0) or find_arg(call, "model", 0) or find_arg(call, "x", 0)
    if inner is None:
        return None
    if isinstance(inner.value, cst.Call):
        return _call_mode(inner.value, ctx, depth + 1, env)
    origins = _origins(inner.value, ctx, call)
    if origins is None:
        return None
    verdicts = [_call_mode(c, where, depth + 1, UNBOUND) for c, where in origins if c is not call]
    return True if True in verdicts else agree(verdicts)


def _defined_mode(
    node: cst.ClassDef | cst.FunctionDef,
    where: Context,
    call: cst.Call,
    ctx: Context,
    depth: int,
    env: Bindings,
) -> bool | None:
    """A class or helper function (of this file or another) called by ``call``, read with
    the arguments ``call`` passes."""
    if isinstance(node, cst.ClassDef):
        init = class_methods(node).get("__init__")
        inner = bind(init, call, ctx, env, where, True) if init is not None else UNBOUND
        return _class_mode(node, where, depth + 1, inner)
    return _body_mode(node, where, depth + 1, bind(node, call, ctx, env, where, False))


def _call_mode(call: cst.Call, ctx: Context, depth: int, env: Bindings) -> bool | None:
    """Does what ``call`` builds (or runs, inside a model) depend on train/eval mode?"""
    if depth > _MAX_DEPTH or _built_by_name(call.func):
        return None
    names = resolve(call.func, ctx).names
    if not names:
        return False  # a method of a tensor or of ``self``: the layers are built elsewhere
    name = next(iter(names)) if len(names) == 1 else None
    if name is None:
        return None
    if (name.rsplit(".", 1)[-1] in _WRAPPERS and name.startswith("torch.")) or name in _COPIES:
        return _wrapped_mode(call, ctx, depth, env)
    if name.startswith(_LOADED):
        return None  # a whole model from a file or a hub: its layers are not in the script
    if name.startswith("torch.nn.") and not name.startswith("torch.nn.functional."):
        tail = name.rsplit(".", 1)[-1]
        return _nn_mode(call, tail, ctx, depth, env) if tail[:1].isupper() else False
    if name.startswith("torch_geometric.nn.") and name.rsplit(".", 1)[-1] in _PYG_MODE_FREE:
        return False
    if name.startswith(("torch.", "builtins.", "math.", "numpy.")):
        return False  # F.dropout follows ``training=self.training`` (read below), or is on
    if name.startswith("<local>."):
        local = name.removeprefix("<local>.").split(".")[0]
        cls = class_named(ctx, local)
        if cls is not None:
            return _defined_mode(cls, ctx, call, ctx, depth, env)
        # A bare name calls the module's function, not a method of the same name.
        top = top_definition(ctx, local)
        functions = (
            [top]
            if isinstance(top, cst.FunctionDef)
            else [
                f
                for f in ctx.nodes(cst.FunctionDef)
                if f.name.value == local  # type: ignore[attr-defined]
            ]
        )
        if len(functions) == 1:
            return _defined_mode(functions[0], ctx, call, ctx, depth, env)  # type: ignore[arg-type]
        return None
    found = imported_definition(call.func, ctx)
    if found is not None:
        return _defined_mode(found[0], found[1], call, ctx, depth, env)
    return None  # a class or helper of a package


def _body_mode(root: cst.CSTNode, ctx: Context, depth: int, env: Bindings) -> bool | None:
    if any(a.attr.value == "training" for a in ctx.nodes_within(root, cst.Attribute)):  # type: ignore[attr-defined]
        return True  # ``F.dropout(x, training=self.training)``, ``if self.training:``
    return _either([_call_mode(call, ctx, depth, env) for call in ctx.nodes_within(root, cst.Call)])  # type: ignore[arg-type]


def _base_mode(base: cst.Arg, ctx: Context, depth: int) -> bool | None:
    names = resolve(base.value, ctx).names
    if any(n.startswith("torch.nn.") for n in names):
        return False
    local = class_named(ctx, next(iter(names)).removeprefix("<local>.")) if names else None
    if local is not None:
        return _class_mode(local, ctx, depth + 1, UNBOUND)
    found = imported_definition(base.value, ctx)
    if found is not None and isinstance(found[0], cst.ClassDef):
        return _class_mode(found[0], found[1], depth + 1, UNBOUND)
    return None


def _class_mode(cls: cst.ClassDef, ctx: Context, depth: int, env: Bindings) -> bool | None:
    table = ctx.memo.setdefault(_class_mode, {})
    key = (cls, env)
    if key not in table:
        table[key] = None  # a class that builds itself (recursion) says nothing
        verdicts = [_base_mode(base, ctx, depth) for base in cls.bases]
        verdicts.append(_body_mode(cls, ctx, depth, env))
        table[key] = _either(verdicts)
    return table[key]


def _passed_elsewhere(
    expr: cst.BaseExpression, ctx: Context, at: cst.CSTNode, depth: int = 0
) -> list:
    """What the callers in the project's other files pass for a parameter that no call in
    this file binds (``model`` of ``train_step``, reached from ``engine.train(model=...)``
    in a sibling ``train.py``): (value, its file) pairs, followed through this file's own
    calls that hand the parameter on."""
    function = enclosing_function(at, ctx)
    if depth > 3 or not isinstance(expr, cst.Name) or function is None:
        return []
    if not is_parameter(function, expr.value):
        return []
    passed = argument_values(function, expr.value, ctx)
    if passed:
        return [
            found
            for held, call in passed
            if isinstance(held, cst.Name)
            for found in _passed_elsewhere(held, ctx, call, depth + 1)
        ]
    found = []
    index = _positional_index(function, expr.value)
    for call, other in callers_elsewhere(function, ctx):
        arg = find_arg(call, keyword=expr.value, position=index)
        if arg is None:
            return []
        held = [arg.value] if isinstance(arg.value, cst.Call) else values_of(arg.value, other, call)
        found += [(value_, other) for value_ in held]
    return found


def _origins(model: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> list[Origin] | None:
    """The constructor calls ``model`` may hold (``model``, ``self.net``, ``Net().to(d)``)
    with the file each is in, or None when some value is not a call the code makes."""
    if isinstance(model, cst.Call):
        pairs = [(model, ctx)]
    else:
        pairs = [(held, ctx) for held in values_of(model, ctx, at)] or _passed_elsewhere(
            model, ctx, at
        )
    calls = [(unwrap_calls(held, MODULE_PASSTHROUGH), where) for held, where in pairs]
    here = without_rebinding(model, [call for call, where in calls if where is ctx])
    calls = [(c, w) for c, w in calls if w is not ctx or any(c is h for h in here)]
    if not calls or not all(isinstance(call, cst.Call) for call, _ in calls):
        return None
    return calls  # type: ignore[return-value]


def _replaced_parts(model: cst.BaseExpression, ctx: Context) -> list[cst.BaseExpression]:
    """Layers the code puts into the model afterwards (``model.fc = nn.Sequential(...)``)."""
    name = dotted_name(model)
    if name is None:
        return []
    return [
        assign.value  # type: ignore[attr-defined]
        for assign in ctx.nodes(cst.Assign)
        for target in assign.targets  # type: ignore[attr-defined]
        if (dotted_name(target.target) or "").startswith(name + ".")
    ]


def _patched(call: cst.Call, ctx: Context) -> bool:
    """Is ``call`` inside a ``with`` of the project's own context manager? It may swap the
    layers the construction builds (lit-llama's ``with lora(dropout=...)``: every Linear
    becomes a LoRA layer with dropout)."""
    for block in ctx.ancestors(call):
        if not isinstance(block, cst.With):
            continue
        for item in block.items:
            manager = item.item
            if not isinstance(manager, cst.Call):
                continue
            names = resolve(manager.func, ctx).names
            local = any(n.startswith("<local>.") for n in names)
            if local or imported_definition(manager.func, ctx) is not None:
                return True
    return False


def mode_dependent(model: cst.BaseExpression, ctx: Context, at: cst.CSTNode) -> bool | None:
    """Does the model ``model`` holds act differently in train and eval mode? False only
    when every layer it builds is known and none does; None when the code does not say."""
    origins = _origins(model, ctx, at)
    if origins is None or any(_patched(call, where) for call, where in origins):
        return None
    verdicts = [_call_mode(call, where, 0, UNBOUND) for call, where in origins]
    for part in _replaced_parts(model, ctx):
        verdicts.append(_call_mode(part, ctx, 0, UNBOUND) if isinstance(part, cst.Call) else None)
    return True if True in verdicts else agree(verdicts)
