"""The data pipeline: train/eval roles from names, DataLoaders and their roles."""

from __future__ import annotations

import re

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_module, per_node
from mutator.semantics.edits import code_of
from mutator.semantics.modules import imported_definition
from mutator.semantics.names import resolve
from mutator.semantics.scope import assigned_values, functions_by_name
from mutator.semantics.syntax import callee_name, find_arg, is_true

# -- roles from names -------------------------------------------------------------------------

# Words that mark a name as validation/test data (``X_val``, ``test_loader``, ``evaluate``).
EVAL_WORDS = frozenset(
    {"val", "valid", "validation", "validate", "test", "testing", "eval", "evaluate"}
    | {"evaluation", "dev", "holdout", "te", "va", "tst"}
)
TRAIN_WORDS = frozenset({"train", "training", "tr"})
# A held-out part inside a name, for renaming it (``val_loader`` -> ``train_loader``).
HELD_OUT = re.compile(r"validation|valid|val|testing|test|eval|dev", re.IGNORECASE)


def identifier_words(text: str) -> set[str]:
    """Lower-case words of identifiers: ``X_val`` -> {x, val}; ``valLoader`` -> {val, loader}."""
    return {word.lower() for word in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", text)}


# Words that name labels or targets (``y_train``, ``batch_labels``, ``gt``).
LABEL_WORDS = frozenset(
    {"y", "yb", "ys", "label", "labels", "target", "targets", "tgt", "tgts", "gt", "truth"}
    | {"classes"}
)


def is_label_name(text: str) -> bool:
    """Do the words of ``text`` name labels (``y_val``, ``trainLabels``, ``tgt``)?"""
    return bool(identifier_words(text) & LABEL_WORDS)


def split_role(text: str) -> str | None:
    """``"train"``, ``"eval"``, or None when the words of ``text`` say neither (or both)."""
    words = identifier_words(text)
    is_eval, is_train = bool(words & EVAL_WORDS), bool(words & TRAIN_WORDS)
    if is_eval == is_train:
        return None
    return "eval" if is_eval else "train"


def bound_target(node: cst.CSTNode, ctx: Context) -> cst.BaseExpression | None:
    """The assignment target receiving ``node``'s value, also through tuple unpacking."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1:
        return parent.targets[0].target
    if isinstance(parent, cst.Element):
        values = ctx.parent(parent)
        assign = ctx.parent(values) if values is not None else None
        if (
            isinstance(values, cst.Tuple)
            and isinstance(assign, cst.Assign)
            and assign.value is values
            and len(assign.targets) == 1
        ):
            targets = assign.targets[0].target
            if isinstance(targets, (cst.Tuple, cst.List)) and len(targets.elements) == len(
                values.elements
            ):
                index = next(i for i, e in enumerate(values.elements) if e is parent)
                return targets.elements[index].value
    return None


# What a value passes through on its way to the name it is stored in.
_CARRIERS = (cst.Call, cst.Attribute, cst.Arg, cst.Element, cst.List, cst.Tuple, cst.ListComp)
_CARRIERS += (cst.GeneratorExp, cst.Subscript, cst.SubscriptElement, cst.Index)
_CARRIERS += (cst.BinaryOperation,)


def receiving_name(node: cst.CSTNode, ctx: Context) -> str | None:
    """The name a value ends up bound to, through the calls and containers around it
    (``y = torch.stack([data[i + 1:i + 1 + T] for i in ix]).to(device)``: ``y``); None
    when it goes elsewhere first (a ``zip(...)`` of pairs, a loss call, a return)."""
    child, parent = node, ctx.parent(node)
    while True:
        target = bound_target(child, ctx)  # ``y = v`` or ``x, y = u, v``
        if target is not None:
            return code_of(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if not isinstance(parent, _CARRIERS):
            return None
        if (
            isinstance(parent, cst.Call)
            and parent.func is not child
            and callee_name(parent) == "zip"
        ):
            return None  # consecutive pairs (``zip(dims[:-1], dims[1:])``), not targets
        child, parent = parent, ctx.parent(parent)


def _slice_bound(node: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """("head", K) for ``X[:K]``, ("tail", K) for ``X[K:]``."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return None
    part = node.slice[0].slice
    if not isinstance(part, cst.Slice) or part.step is not None:
        return None
    if part.lower is None and part.upper is not None:
        return "head", part.upper
    if part.lower is not None and part.upper is None:
        return "tail", part.lower
    return None


def _slice_role(node: cst.CSTNode) -> str | None:
    """The split a slice takes, from its size's name: ``X[:n_train]`` and ``X[n_val:]`` are
    training data, ``X[n_train:]`` held out. For a call, the slices it is given agree."""
    if isinstance(node, cst.Call):
        roles = {_slice_role(arg.value) for arg in node.args} - {None}
        return roles.pop() if len(roles) == 1 else None
    bound = _slice_bound(node)
    if bound is None:
        return None
    side, size = bound
    named = split_role(code_of(size))
    if named is None:
        return None
    flipped = {"train": "eval", "eval": "train"}
    return named if side == "head" else flipped[named]


def _text_without_slices(node: cst.CSTNode) -> str:
    """The code of ``node`` with slice bounds left out: ``n_train`` in ``X[n_train:]`` is a
    size, not the split's name."""
    if isinstance(node, cst.Subscript) and _slice_bound(node) is not None:
        return _text_without_slices(node.value)
    if isinstance(node, cst.Call):
        return " ".join(
            [code_of(node.func), *(_text_without_slices(arg.value) for arg in node.args)]
        )
    return code_of(node)


@per_node
def split_role_of(node: cst.CSTNode, ctx: Context) -> str | None:
    """train/eval from the expression itself, else from what it is assigned to or passed into."""
    current: cst.CSTNode | None = node
    while current is not None and not isinstance(current, cst.BaseStatement):
        role = _slice_role(current) or split_role(_text_without_slices(current))
        if role is not None:
            return role
        target = bound_target(current, ctx)
        if target is not None:
            return split_role(code_of(target))
        parent = ctx.parent(current)
        # Only climb out of an argument list: ``DataLoader(TensorDataset(x, y))``.
        if isinstance(parent, cst.Arg):
            current = ctx.parent(parent)
        else:
            return None
    return None


# -- data loaders -----------------------------------------------------------------------------

DATA_LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
# PyTorch Geometric's loaders take the same (dataset, batch_size, shuffle) (issue 29).
DATA_LOADERS += ("torch_geometric.loader.DataLoader", "torch_geometric.data.DataLoader")


def is_data_loader(node: cst.CSTNode, ctx: Context) -> bool:
    return isinstance(node, cst.Call) and resolve(node, ctx, strict=False).matches(DATA_LOADERS)


def shuffle_true(loader: cst.Call) -> cst.Arg | None:
    """The ``shuffle=True`` argument of a DataLoader call, else None."""
    arg = find_arg(loader, keyword="shuffle", position=2)
    return arg if arg is not None and is_true(arg.value) else None


def loader_role(loader: cst.CSTNode, ctx: Context) -> str | None:
    """train/eval of a DataLoader: the name it is bound to decides first (``val_loader =
    DataLoader(train_ds)`` is a validation loader, already leaking), then its arguments."""
    target = bound_target(loader, ctx)
    role = split_role(code_of(target)) if target is not None else None
    return role or split_role_of(loader, ctx)


def is_training_loader(node: cst.CSTNode, ctx: Context) -> bool:
    """A DataLoader over training data: not named like held-out data, and shuffled or
    named like training data (``train_loader``, ``DataLoader(train_ds)``). Also a call of
    the script's own helper that builds the loader (``make_loader(train_set, shuffle=True)``)."""
    if not is_data_loader(node, ctx):
        shuffled = forwarded_loader_argument(node, "shuffle", ctx)
        role = loader_role(node, ctx)
        if shuffled is None and forwarded_loader_argument(node, "batch_size", ctx) is None:
            return False
        return role != "eval" and (role == "train" or (shuffled and is_true(shuffled.value)))  # type: ignore[return-value]
    role = loader_role(node, ctx)
    shuffled = shuffle_true(node) is not None or _unpacked_shuffle(node, ctx)  # type: ignore[arg-type]
    return role != "eval" and (shuffled or role == "train")


def _unpacked_shuffle(loader: cst.Call, ctx: Context) -> bool:
    """``DataLoader(ds, **{"shuffle": True, ...})`` or ``**kwargs`` bound to such a dict."""
    return any(
        isinstance(e, cst.DictElement)
        and isinstance(e.key, cst.SimpleString)
        and e.key.evaluated_value == "shuffle"
        and is_true(e.value)
        for kwargs in _unpacked_dicts(loader, ctx)
        for e in kwargs.elements
    )


def _unpacked_dicts(loader: cst.Call, ctx: Context) -> list[cst.Dict]:
    """The dict literals a call unpacks with ``**``: inline, or a name bound once to one."""
    found = []
    for arg in loader.args:
        if arg.star != "**":
            continue
        if isinstance(arg.value, cst.Dict):
            found.append(arg.value)
        elif isinstance(arg.value, cst.Name):
            values = assigned_values(ctx, arg.value.value)
            if len(values) == 1 and isinstance(values[0], cst.Dict):
                found.append(values[0])
    return found


@per_module
def _training_loader_kwargs(ctx: Context) -> list[cst.Dict]:
    """Dict literals handed to a training DataLoader as ``**train_kwargs`` or ``**{...}``."""
    found = []
    for call in ctx.nodes(cst.Call):
        if is_data_loader(call, ctx) and is_training_loader(call, ctx):
            found.extend(_unpacked_dicts(call, ctx))  # type: ignore[arg-type]
    return found


def training_loader_setting(ctx: Context, key: str) -> list[cst.DictElement]:
    """The ``"key": value`` entries of kwargs dicts a training DataLoader unpacks
    (``train_kwargs = {"batch_size": 64, "shuffle": True}``)."""
    entries = []
    for kwargs in _training_loader_kwargs(ctx):
        for element in kwargs.elements:
            if (
                isinstance(element, cst.DictElement)
                and isinstance(element.key, cst.SimpleString)
                and element.key.evaluated_value == key
            ):
                entries.append(element)
    return entries


# -- loaders built by the script's own helpers ----------------------------------------------


def _local_function(call: cst.Call, ctx: Context) -> cst.FunctionDef | None:
    if not isinstance(call.func, cst.Name):
        return None
    found = functions_by_name(ctx).get(call.func.value, [])
    return found[0] if len(found) == 1 else None


def forwarded_loader_argument(call: cst.CSTNode, key: str, ctx: Context) -> cst.Arg | None:
    """The argument of a call of the script's own helper (``make_loader(train_set, 32,
    shuffle=True)``) that becomes ``key`` of the DataLoader the helper builds
    (``DataLoader(ds, batch_size=batch_size, shuffle=shuffle)``): one level into the
    project's own functions (issue 29). None when the helper builds no such loader or the
    call leaves the parameter at its default."""
    if not isinstance(call, cst.Call) or is_data_loader(call, ctx):
        return None
    helper, where = _local_function(call, ctx), ctx
    if (
        helper is None
    ):  # a helper of the project's other files (``from data_loader import get_loader``)
        found = imported_definition(call.func, ctx)
        if found is None or not isinstance(found[0], cst.FunctionDef):
            return None
        helper, where = found  # type: ignore[assignment]
    params = [*helper.params.posonly_params, *helper.params.params]
    names = [p.name.value for p in params]
    for loader in where.nodes_within(helper, cst.Call):
        if not is_data_loader(loader, where):
            continue
        given = find_arg(loader, keyword=key, position=1 if key == "batch_size" else 2)  # type: ignore[arg-type]
        if given is None or not isinstance(given.value, cst.Name) or given.value.value not in names:
            continue
        param = given.value.value
        index = names.index(param)
        if isinstance(where.parent(helper), cst.IndentedBlock) and isinstance(
            where.parent(where.parent(helper)), cst.ClassDef
        ):
            return None  # a method: ``self`` shifts the positions
        return find_arg(call, keyword=param, position=index)
    return None
