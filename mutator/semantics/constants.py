"""What an expression holds when the code says it with constants: the dropout probability a
model class is built with, through its constructor's parameters and a config dict
(``nn.Dropout(dropout)`` with ``dropout: float = 0.``; ``nn.Dropout(cfg["drop_rate"])`` with
``GPTModel({"drop_rate": 0.0, ...})``; issue 29).

``value`` returns a number, string, bool or None the code spells, a ``Mapping`` for a dict
of such, or ``UNKNOWN``. Several possible values that differ are ``UNKNOWN``: an analysis
asking "is this 0?" gets yes only when every path says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_module
from mutator.semantics.names import resolve
from mutator.semantics.scope import assignments, enclosing_function, is_parameter, values_of
from mutator.semantics.syntax import dotted_name, find_arg, has_star_args, number_value


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


@dataclass(frozen=True)
class Mapping:
    """A dict whose keys are strings the code spells."""

    items: frozenset[tuple[str, object]]

    def get(self, key: object) -> Value:
        return dict(self.items).get(key, UNKNOWN)  # type: ignore[arg-type]


Value = float | int | str | bool | None | Mapping | _Unknown


@dataclass(frozen=True)
class Bindings:
    """What the parameters of ``function`` hold for one call of it (a class's ``__init__``
    for one construction)."""

    function: cst.FunctionDef | None
    values: tuple[tuple[str, Value], ...] = ()

    def lookup(self, name: str) -> Value:
        return dict(self.values).get(name, UNKNOWN)


UNBOUND = Bindings(None)
_MAX_DEPTH = 8


def combine(values: list[Value]) -> Value:
    """One value for several possible ones: equal ones, or dicts merged key by key."""
    if not values or any(v is UNKNOWN for v in values):
        return UNKNOWN
    first = values[0]
    if all(isinstance(v, Mapping) for v in values):
        tables = [dict(v.items) for v in values]  # type: ignore[union-attr]
        keys = set().union(*tables)
        return Mapping(
            frozenset(
                (
                    key,
                    combine([t[key] for t in tables]) if all(key in t for t in tables) else UNKNOWN,
                )
                for key in keys
            )
        )
    return first if all(type(v) is type(first) and v == first for v in values) else UNKNOWN


def bind(
    function: cst.FunctionDef,
    call: cst.Call,
    caller: Context,
    caller_env: Bindings,
    callee: Context,
    method: bool,
) -> Bindings:
    """The parameters of ``function`` for ``call``: the argument passed (read in the
    caller), else the default (read where the function is), else UNKNOWN."""
    params = function.params
    positional = [*params.posonly_params, *params.params][1 if method else 0 :]
    star = has_star_args(call)
    found: list[tuple[str, Value]] = []
    for index, param in [*enumerate(positional), *((None, p) for p in params.kwonly_params)]:
        arg = find_arg(call, keyword=param.name.value, position=index)
        if arg is not None:
            held = value(arg.value, caller, caller_env)
        elif star or param.default is None:
            held = UNKNOWN
        else:
            held = value(param.default, callee, UNBOUND)
        found.append((param.name.value, held))
    return Bindings(function, tuple(found))


def value(expr: cst.BaseExpression, ctx: Context, env: Bindings, depth: int = 0) -> Value:
    """What ``expr`` holds (see the module docstring)."""
    if depth > _MAX_DEPTH:
        return UNKNOWN
    number = number_value(expr)
    if number is not None:
        return number
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value  # type: ignore[return-value]
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, cst.Dict):
        return _dict_display(expr, ctx, env, depth)
    if isinstance(expr, cst.Call) and resolve(expr.func, ctx).names == {"builtins.dict"}:
        if expr.args and all(a.keyword is not None and not a.star for a in expr.args):
            return Mapping(
                frozenset((a.keyword.value, value(a.value, ctx, env, depth + 1)) for a in expr.args)  # type: ignore[union-attr]
            )
        return UNKNOWN
    if isinstance(expr, cst.Subscript):
        return _subscript(expr, ctx, env, depth)
    if isinstance(expr, cst.Name):
        return _name(expr, ctx, env, depth)
    if isinstance(expr, cst.Attribute) and dotted_name(expr.value) == "self":
        return _self_attribute(expr, ctx, env, depth)
    return UNKNOWN


def _dict_display(expr: cst.Dict, ctx: Context, env: Bindings, depth: int) -> Value:
    items = []
    for element in expr.elements:
        if not isinstance(element, cst.DictElement):
            return UNKNOWN  # ``**other``
        key = value(element.key, ctx, env, depth + 1)
        if not isinstance(key, str):
            return UNKNOWN
        items.append((key, value(element.value, ctx, env, depth + 1)))
    return Mapping(frozenset(items))


def _subscript(expr: cst.Subscript, ctx: Context, env: Bindings, depth: int) -> Value:
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return UNKNOWN
    table = value(expr.value, ctx, env, depth + 1)
    key = value(expr.slice[0].slice.value, ctx, env, depth + 1)
    if not isinstance(table, Mapping) or not isinstance(key, str):
        return UNKNOWN
    return table.get(key)


def _name(expr: cst.Name, ctx: Context, env: Bindings, depth: int) -> Value:
    function = enclosing_function(expr, ctx)
    if function is not None and function is env.function:
        if is_parameter(function, expr.value):
            return env.lookup(expr.value)
    elif function is not None and is_parameter(function, expr.value):
        return UNKNOWN  # a parameter of a call this reading does not follow
    held = values_of(expr, ctx, expr)
    if not held:
        return UNKNOWN
    if _rebinds_globals(ctx) and _module_level(ctx, expr):
        return UNKNOWN  # nanoGPT's ``globals()[key] = literal_eval(val)`` from argv
    inside = env.function is not None and function is env.function
    found = combine([value(v, ctx, env if inside else UNBOUND, depth + 1) for v in held])
    return _with_updates(found, expr.value, ctx, depth) if isinstance(found, Mapping) else found


@per_module
def _rebinds_globals(ctx: Context) -> bool:
    """Does the module write its globals by name at run time (``globals()[key] = value``,
    ``globals().update(...)``, ``exec(...)`` of a configurator)? Then a module-level
    constant is only its default."""
    for call in ctx.nodes(cst.Call):
        names = resolve(call.func, ctx).names  # type: ignore[attr-defined]
        if names == {"builtins.exec"}:
            return True
        if names == {"builtins.globals"}:
            parent = ctx.parent(call)
            if isinstance(parent, cst.Subscript) or (
                isinstance(parent, cst.Attribute) and parent.attr.value == "update"
            ):
                return True
    return False


def _module_level(ctx: Context, expr: cst.Name) -> list[cst.CSTNode]:
    """The module-level statements that assign ``expr``'s name."""
    return [
        a.node
        for a in assignments(ctx, expr.value)
        if enclosing_function(a.node, ctx) is None and ctx.enclosing(a.node, cst.ClassDef) is None
    ]


def _with_updates(table: Mapping, name: str, ctx: Context, depth: int) -> Value:
    """A dict name's value after the module's ``name.update(...)`` and ``name[k] = v``:
    a key they may set holds either value."""
    items = dict(table.items)
    for call in ctx.nodes(cst.Call):
        func = call.func  # type: ignore[attr-defined]
        if not (isinstance(func, cst.Attribute) and dotted_name(func.value) == name):
            continue
        if func.attr.value in ("pop", "get", "keys", "items", "values", "copy"):
            continue
        if func.attr.value != "update" or len(call.args) != 1:  # type: ignore[attr-defined]
            return UNKNOWN
        update = value(call.args[0].value, ctx, UNBOUND, depth + 1)  # type: ignore[attr-defined]
        if not isinstance(update, Mapping):
            return UNKNOWN
        for key, held in update.items:
            items[key] = combine([items[key], held]) if key in items else held
    for target in ctx.nodes(cst.AssignTarget):
        bound = target.target  # type: ignore[attr-defined]
        if isinstance(bound, cst.Subscript) and dotted_name(bound.value) == name:
            return UNKNOWN  # ``cfg[key] = ...``: any key may change
    return Mapping(frozenset(items.items()))


def _self_attribute(expr: cst.Attribute, ctx: Context, env: Bindings, depth: int) -> Value:
    """``self.p`` from the class's own ``self.p = ...`` lines (read with ``env`` where they
    are in its function)."""
    owner = ctx.enclosing(expr, cst.ClassDef)
    name = dotted_name(expr)
    bound = [
        a for a in assignments(ctx, name or "") if ctx.enclosing(a.node, cst.ClassDef) is owner
    ]
    if owner is None or not bound:
        return UNKNOWN
    return combine([value(a.value, ctx, env, depth + 1) for a in bound])
