"""Data flow: where a loader's batches go, and whether a value reaches a model.

Both follow a value through LibCST's scope analysis (the accesses of the name it is bound
to), into the script's own functions through their parameters, and answer None as soon
as the value goes somewhere the script does not show (returned, stored, handed to a
library), so a caller only acts on True or False.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_module, per_node
from mutator.semantics.data import bound_target, is_data_loader
from mutator.semantics.models import is_model
from mutator.semantics.roles import drives_training, site_context
from mutator.semantics.scope import enclosing_function, is_parameter
from mutator.semantics.syntax import callee_name, dotted_name, find_arg

# Calls that hand their argument's items on unchanged: ``for i, b in enumerate(loader)``.
_ITEM_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip", "trange", "islice", "cycle"})
_DEPTH = 3


def _is_read(name: cst.Name, ctx: Context) -> bool:
    """A Name that reads a variable: not a target, parameter, attribute or keyword."""
    parent = ctx.parent(name)
    if isinstance(parent, (cst.Attribute)) and parent.attr is name:
        return False
    if isinstance(parent, (cst.Arg, cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias)):
        return isinstance(parent, cst.Arg) and parent.value is name
    while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        parent = ctx.parent(parent)
    return not isinstance(parent, (cst.AssignTarget, cst.For, cst.CompFor, cst.AsName)) or (
        isinstance(parent, (cst.For, cst.CompFor)) and parent.target is not name
    )


@per_module
def _reads_by_name(ctx: Context) -> dict[str, list[cst.Name]]:
    found: dict[str, list[cst.Name]] = {}
    for name in ctx.nodes(cst.Name):
        if _is_read(name, ctx):  # type: ignore[arg-type]
            found.setdefault(name.value, []).append(name)  # type: ignore[attr-defined,arg-type]
    return found


@per_node
def _bound_in(function: cst.FunctionDef, ctx: Context) -> frozenset[str]:
    """Names ``function`` binds itself: its parameters and plain targets."""
    bound = {p.name.value for p in ctx.nodes_within(function.params, cst.Param)}  # type: ignore[attr-defined]
    for name in ctx.nodes_within(function.body, cst.Name):
        if enclosing_function(name, ctx) is function and not _is_read(name, ctx):  # type: ignore[arg-type]
            bound.add(name.value)  # type: ignore[attr-defined]
    return frozenset(bound)


def _reads(name: cst.Name, ctx: Context) -> list[cst.CSTNode] | None:
    """The places that read the variable ``name`` binds: in its own function (or inner
    functions that do not rebind it), or, for a module-level name, wherever no function
    rebinds it. By name, not flow: every read of the name counts (cheaper than LibCST's
    scope analysis, and the analyses here only ask where a value may go)."""
    home = enclosing_function(name, ctx)
    found = []
    for read in _reads_by_name(ctx).get(name.value, []):
        function = enclosing_function(read, ctx)
        while function is not home and function is not None:
            if name.value in _bound_in(function, ctx):
                break  # a local of another function shadows it
            function = enclosing_function(function, ctx)
        if function is home:
            found.append(read)
    return found


def _param_reads(function: cst.FunctionDef, name: str, ctx: Context) -> list[cst.CSTNode] | None:
    params = [p for p in ctx.nodes_within(function.params, cst.Param) if p.name.value == name]  # type: ignore[attr-defined]
    return _reads(params[0].name, ctx) if len(params) == 1 else None  # type: ignore[attr-defined]


def _callee(call: cst.Call, ctx: Context) -> cst.FunctionDef | None:
    """The script's own function ``call`` calls, when its name picks exactly one."""
    name = callee_name(call)
    found = [f for f in ctx.nodes(cst.FunctionDef) if f.name.value == name]  # type: ignore[attr-defined]
    return found[0] if len(found) == 1 and isinstance(call.func, cst.Name) else None  # type: ignore[return-value]


def _parameter_for(call: cst.Call, arg: cst.Arg, function: cst.FunctionDef) -> str | None:
    if arg.keyword is not None:
        return arg.keyword.value if is_parameter(function, arg.keyword.value) else None
    if arg.star:
        return None
    index = [a for a in call.args if a.keyword is None].index(arg)
    params = [*function.params.posonly_params, *function.params.params]
    return params[index].name.value if index < len(params) else None


def _outer(node: cst.CSTNode, ctx: Context) -> tuple[cst.CSTNode, cst.CSTNode | None]:
    """Climb out of item wrappers (``enumerate(loader)``): the expression and its parent."""
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            if isinstance(call, cst.Call) and callee_name(call) in _ITEM_WRAPPERS:
                node = call
                continue
        return node, parent


def _iteration_feeds(reads: list[cst.CSTNode], ctx: Context, depth: int) -> Iterator[bool | None]:
    """Per read of a loader: True (a training loop iterates it), False (a loop that does
    not train, or ``len(loader)``/``loader.dataset``), None (anything else)."""
    for read in reads:
        node, parent = _outer(read, ctx)
        if isinstance(parent, cst.For) and parent.iter is node:
            yield _loop_trains(parent, ctx)
        elif isinstance(parent, cst.Attribute) and parent.value is node:
            yield False  # ``loader.dataset``, ``loader.sampler.set_epoch``: no batches
        elif isinstance(parent, cst.Arg) and isinstance(call := ctx.parent(parent), cst.Call):
            if callee_name(call) == "len":
                yield False
                continue
            function = _callee(call, ctx)
            name = _parameter_for(call, parent, function) if function is not None else None
            if name is None or depth >= _DEPTH:
                yield None
                continue
            inner = _param_reads(function, name, ctx)  # type: ignore[arg-type]
            yield None if not inner else _combine(_iteration_feeds(inner, ctx, depth + 1))
        else:
            yield None


def _loop_trains(loop: cst.For, ctx: Context) -> bool | None:
    """True for a loop that runs training steps, False for an evaluation loop, None for one
    that hands its batches on (a generator, a prefetching helper)."""
    if drives_training(loop, ctx):
        return True
    return False if site_context(loop, ctx) == "eval" else None


def _combine(verdicts: Iterator[bool | None]) -> bool | None:
    found = list(verdicts)
    if True in found:
        return True
    return None if None in found or not found else False


@per_node
def loader_feeds_training(loader: cst.Call, ctx: Context) -> bool | None:
    """Do the batches of this DataLoader reach the loss that is backwarded? False when
    every read of it is a loop that does not train (an evaluation loop) or no read at all
    in an evaluation function; None when they go where the script does not show."""
    node, parent = _outer(loader, ctx)
    if isinstance(parent, cst.For) and parent.iter is node:
        return _loop_trains(parent, ctx)
    target = bound_target(loader, ctx)
    verdict = None
    if isinstance(target, cst.Name):
        reads = _reads(target, ctx)
        if reads:
            verdict = _combine(_iteration_feeds(reads, ctx, 0))
    if verdict is None and site_context(loader, ctx) == "eval":
        return False  # built for an evaluation function: not the training loader
    return verdict


def loaders_of(node: cst.CSTNode, ctx: Context) -> list[cst.Call]:
    """The DataLoader calls an edited node configures: the call itself, or those that
    unpack the dict literal holding a ``"key": value`` entry (``**train_kwargs``)."""
    if isinstance(node, cst.Call):
        return [node] if is_data_loader(node, ctx) else []
    holder = ctx.parent(node) if isinstance(node, cst.DictElement) else None
    target = bound_target(holder, ctx) if isinstance(holder, cst.Dict) else None
    name = dotted_name(target) if target is not None else None
    if name is None:
        return []
    return [
        call  # type: ignore[misc]
        for call in ctx.nodes(cst.Call)
        if is_data_loader(call, ctx)
        and any(a.star == "**" and dotted_name(a.value) == name for a in call.args)  # type: ignore[attr-defined]
    ]


# -- values that reach a model ---------------------------------------------------------------


def _model_reads(call: cst.Call, ctx: Context) -> bool:
    """Is ``call`` a forward of a model (``model(x)``, ``self.net(x)``, ``policy(state)``)?"""
    return not isinstance(call.func, cst.Call) and is_model(call.func, ctx)


def _flows_into_model(read: cst.CSTNode, ctx: Context, seen: set[int]) -> bool | None:
    """Does the value read at ``read`` reach a model call? Follows ``=``, arithmetic, ``for``
    targets, lists it is appended to and the script's functions; None where it leaves what
    the script shows."""
    if id(read) in seen or len(seen) > 200:
        return False if id(read) in seen else None
    seen.add(id(read))
    node = read
    while True:
        parent = ctx.parent(node)
        if parent is None or isinstance(parent, cst.BaseStatement):
            return False
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            if not isinstance(call, cst.Call):
                return None
            if _model_reads(call, ctx) or _dataset_input(call, parent, ctx):
                return True
            if _collects(call):  # ``losses.append(-log_prob * R)``: follow the list
                reads = _reads(call.func.value, ctx)  # type: ignore[attr-defined]
                if reads is None:
                    return None
                return _combine(iter([_flows_into_model(r, ctx, seen) for r in reads]))
            function = _callee(call, ctx)
            if function is None:
                node = call  # a library function of the value: follow its result
                continue
            name = _parameter_for(call, parent, function)
            inner = _param_reads(function, name, ctx) if name is not None else None
            if inner is None:
                return None
            return _combine(iter([_flows_into_model(r, ctx, seen) for r in inner]))
        if isinstance(parent, (cst.Return, cst.Yield)):
            return None
        if isinstance(parent, (cst.Assign, cst.For, cst.AugAssign, cst.AnnAssign)):
            if getattr(parent, "target", None) is node:
                return False  # the name being (re)bound, not read
            return _into_targets(parent, ctx, seen)
        if isinstance(parent, cst.AssignTarget):
            return False
        node = parent


def _collects(call: cst.Call) -> bool:
    return (
        isinstance(call.func, cst.Attribute)
        and isinstance(call.func.value, cst.Name)
        and call.func.attr.value in ("append", "extend", "insert")
    )


def _dataset_input(call: cst.Call, arg: cst.Arg, ctx: Context) -> bool:
    """The first tensor of a dataset or loader: the inputs the model is fed."""
    name = callee_name(call) or ""
    return (name.endswith("Dataset") or is_data_loader(call, ctx)) and find_arg(call, "", 0) is arg


def _into_targets(statement: cst.CSTNode, ctx: Context, seen: set[int]) -> bool | None:
    targets: list[cst.BaseExpression] = []
    if isinstance(statement, cst.Assign):
        targets = [t.target for t in statement.targets]
    elif isinstance(statement, (cst.For, cst.AugAssign, cst.AnnAssign)):
        targets = [statement.target]
    names = [n for t in targets for n in _target_names(t)]
    if not names or any(not isinstance(n, cst.Name) for n in names):
        return None  # ``self.x = ...``, ``buf[i] = ...``: stored where the script may read it
    verdicts = []
    for name in names:
        reads = _reads(name, ctx)  # type: ignore[arg-type]
        if reads is None:
            return None
        verdicts += [_flows_into_model(r, ctx, seen) for r in reads]
    return _combine(iter(verdicts))


def _target_names(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    return [target]


def reaches_model(value: cst.CSTNode, ctx: Context) -> bool | None:
    """Does the value computed at ``value`` (an expression) reach a model's forward, or the
    inputs of a dataset? False for a normalised return or target that only the loss reads."""
    return _flows_into_model(value, ctx, set())
