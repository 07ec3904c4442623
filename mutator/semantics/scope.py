"""Where a node is (function, loops, neighbours) and what a name holds (assignments, arguments)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_module, per_node
from mutator.semantics.syntax import dotted_name, find_arg, method_name, number_value

# -- where a node is --------------------------------------------------------------------------


def start_of(node: cst.CSTNode, ctx: Context) -> tuple[int, int]:
    where = ctx.position(node).start
    return (where.line, where.column)


def starts_before(first: cst.CSTNode, second: cst.CSTNode, ctx: Context) -> bool:
    return start_of(first, ctx) < start_of(second, ctx)


@per_node
def enclosing_function(node: cst.CSTNode, ctx: Context) -> cst.FunctionDef | None:
    """``ctx.enclosing_function``, remembered: operators ask it of the same nodes often."""
    return ctx.enclosing_function(node)


def same_scope(first: cst.CSTNode, second: cst.CSTNode, ctx: Context) -> bool:
    """Are both nodes in the same function (or both at module level)?"""
    return enclosing_function(first, ctx) is enclosing_function(second, ctx)


def nodes_in_scope_of(node: cst.CSTNode, ctx: Context, kind: type[cst.CSTNode]) -> list:
    """Nodes of ``kind`` in the function holding ``node`` (or at module level), not in
    functions nested inside it."""
    function = enclosing_function(node, ctx)
    candidates = ctx.nodes(kind) if function is None else ctx.nodes_within(function, kind)
    return [n for n in candidates if enclosing_function(n, ctx) is function]


def inside_nested_scope(node: cst.CSTNode, statement: cst.CSTNode, ctx: Context) -> bool:
    """Is ``node`` inside a comprehension or lambda within ``statement``?"""
    nested = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.Lambda)
    for ancestor in ctx.ancestors(node):
        if ancestor is statement:
            return False
        if isinstance(ancestor, nested):
            return True
    return False


def loops_around(node: cst.CSTNode, ctx: Context) -> list[cst.CSTNode]:
    return [a for a in ctx.ancestors(node) if isinstance(a, (cst.For, cst.While))]


def is_parameter(function: cst.FunctionDef, name: str) -> bool:
    """Does ``function`` take a parameter called ``name`` (positional or keyword-only)?"""
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return any(param.name.value == name for param in every)


def fresh_name(ctx: Context, near: cst.CSTNode, candidates: Iterable[str]) -> str | None:
    """The first candidate that no name in the enclosing function (or module) uses yet."""
    scope = ctx.enclosing_function(near) or ctx.module
    used = {name.value for name in ctx.nodes_within(scope, cst.Name)}
    return next((name for name in candidates if name not in used), None)


def identifiers_in(expr: cst.CSTNode, ctx: Context) -> set[str]:
    """Every bare identifier inside ``expr`` (attribute names included)."""
    return {name.value for name in ctx.nodes_within(expr, cst.Name)}  # type: ignore[attr-defined]


def dotted_names_in(expr: cst.CSTNode, ctx: Context) -> set[str]:
    """Identifiers and dotted names (``self.hidden``) inside ``expr``."""
    found = identifiers_in(expr, ctx)
    for attribute in ctx.nodes_within(expr, cst.Attribute):
        dotted = dotted_name(attribute)  # type: ignore[arg-type]
        if dotted is not None:
            found.add(dotted)
    return found


def variables_read(expr: cst.CSTNode, ctx: Context) -> list[str]:
    """Variable names ``expr`` reads, in order (the ``b`` of ``a.b`` is no variable)."""
    names = []
    for name in ctx.nodes_within(expr, cst.Name):
        parent = ctx.parent(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            continue
        names.append(name.value)  # type: ignore[attr-defined]
    return names


def mentions(root: cst.CSTNode, name: str, ctx: Context) -> bool:
    """Does ``root`` use the (dotted) ``name``?"""
    kind = cst.Attribute if "." in name else cst.Name
    return any(dotted_name(node) == name for node in ctx.nodes_within(root, kind))  # type: ignore[arg-type]


# -- what a name holds ------------------------------------------------------------------------


@per_module
def names_read(ctx: Context) -> frozenset[str]:
    """Every plain name the module reads somewhere (not only binds)."""
    return frozenset(
        name.value  # type: ignore[attr-defined]
        for name in ctx.nodes(cst.Name)
        if not isinstance(ctx.parent(name), cst.AssignTarget)
    )


def bound_names(target: cst.BaseExpression) -> Iterator[str]:
    """Dotted names bound by an assignment target (``a``, ``self.a``, ``a, (b, *c)``)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from bound_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from bound_names(target.value)
    else:
        name = dotted_name(target)
        if name is not None:
            yield name


def values_bound_by(assign: cst.Assign, name: str) -> list[cst.BaseExpression]:
    """What ``assign`` binds to the plain name ``name``, also through tuple unpacking
    (``x, y = a, b`` binds ``b`` to ``y``)."""
    values = []
    for target in assign.targets:
        bound = target.target
        if isinstance(bound, cst.Name) and bound.value == name:
            values.append(assign.value)
        elif isinstance(bound, (cst.Tuple, cst.List)) and isinstance(assign.value, cst.Tuple):
            for element, value in zip(bound.elements, assign.value.elements):
                if isinstance(element.value, cst.Name) and element.value.value == name:
                    values.append(value.value)
    return values


@dataclass(frozen=True)
class Assignment:
    """One value bound to a dotted name by ``=`` or an annotated assignment."""

    value: cst.BaseExpression
    node: cst.Assign | cst.AnnAssign
    annotated: bool


@per_module
def _assignments_by_name(ctx: Context) -> dict[str, list[Assignment]]:
    found: dict[str, list[Assignment]] = {}
    for node in ctx.nodes(cst.Assign):
        seen = set()
        for target in node.targets:  # type: ignore[attr-defined]
            name = dotted_name(target.target)
            if name is not None and name not in seen:
                seen.add(name)
                found.setdefault(name, []).append(Assignment(node.value, node, False))  # type: ignore[arg-type]
    for node in ctx.nodes(cst.AnnAssign):
        name = dotted_name(node.target)  # type: ignore[attr-defined]
        if name is not None and node.value is not None:  # type: ignore[attr-defined]
            found.setdefault(name, []).append(Assignment(node.value, node, True))  # type: ignore[arg-type]
    return found


def assignments(ctx: Context, name: str) -> list[Assignment]:
    """Every ``name = ...`` / ``name: T = ...`` in the module (``name`` may be dotted)."""
    return _assignments_by_name(ctx).get(name, [])


def assigned_values(ctx: Context, name: str) -> list[cst.BaseExpression]:
    """Values ever assigned to ``name`` (``opt``, ``self.optimizer``) in the module."""
    return [assignment.value for assignment in assignments(ctx, name)]


@per_module
def _unpacked_values_by_name(ctx: Context) -> dict[str, list[cst.BaseExpression]]:
    found: dict[str, list[cst.BaseExpression]] = {}
    for assign in ctx.nodes(cst.Assign):
        value = assign.value  # type: ignore[attr-defined]
        for target in assign.targets:  # type: ignore[attr-defined]
            bound = target.target
            if isinstance(bound, cst.Name):
                found.setdefault(bound.value, []).append(value)
            elif isinstance(bound, (cst.Tuple, cst.List)) and isinstance(value, cst.Tuple):
                for element, part in zip(bound.elements, value.elements):
                    if isinstance(element.value, cst.Name):
                        found.setdefault(element.value.value, []).append(part.value)
    return found


def unpacked_values(ctx: Context, name: str) -> list[cst.BaseExpression]:
    """Values ``=`` binds to the plain name ``name`` anywhere, tuple unpacking included."""
    return _unpacked_values_by_name(ctx).get(name, [])


def _binding_key(expr: cst.BaseExpression) -> str | None:
    """Names whose values ``values_of`` follows: plain names and ``self.<attr>``."""
    if isinstance(expr, cst.Name):
        return expr.value
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == "self"
    ):
        return f"self.{expr.attr.value}"
    return None


def _positional_index(function: cst.FunctionDef, name: str) -> int | None:
    positional = [*function.params.posonly_params, *function.params.params]
    return next((i for i, param in enumerate(positional) if param.name.value == name), None)


@per_module
def _calls_by_callee(ctx: Context) -> dict[tuple[bool, str], list[cst.Call]]:
    """Calls by ``(False, f)`` for ``f(...)`` and ``(True, m)`` for ``x.m(...)``, in
    document order: asking every call per function made this quadratic in the file."""
    index: dict[tuple[bool, str], list[cst.Call]] = {}
    for call in ctx.nodes(cst.Call):
        if isinstance(call.func, cst.Name):
            index.setdefault((False, call.func.value), []).append(call)
        elif (method := method_name(call)) is not None:
            index.setdefault((True, method), []).append(call)
    return index


def argument_values(
    function: cst.FunctionDef, name: str, ctx: Context
) -> list[tuple[cst.BaseExpression, cst.CSTNode]]:
    """(value, call) for what callers in this module pass for parameter ``name``."""
    if not is_parameter(function, name):
        return []
    index = _positional_index(function, name)
    owner = ctx.parent(ctx.parent(function))  # FunctionDef -> IndentedBlock -> ClassDef
    is_method = isinstance(owner, cst.ClassDef)
    if is_method and index is not None:
        index -= 1  # ``self`` is bound, callers do not pass it
    found = []
    if is_method and function.name.value == "__init__":
        callers = (False, owner.name.value)  # type: ignore[union-attr]
    else:
        callers = (is_method, function.name.value)
    for call in _calls_by_callee(ctx).get(callers, []):
        arg = find_arg(call, keyword=name, position=index)  # type: ignore[arg-type]
        if arg is not None:
            found.append((arg.value, call))
    return found


def values_of(
    expr: cst.BaseExpression, ctx: Context, at: cst.CSTNode, depth: int = 0
) -> list[cst.BaseExpression]:
    """What a name or ``self.<attr>`` may hold at ``at``: the values assigned to it, followed
    through function parameters and plain renames (``self.criterion = criterion``)."""
    key = _binding_key(expr)
    if key is None or depth > 4:
        return []
    everywhere = assignments(ctx, key)
    if key.startswith("self."):  # the class's own assignments, else every one
        owner: cst.CSTNode | None = ctx.enclosing(at, cst.ClassDef)
    else:  # the function's own assignments, else what callers pass, else every one
        owner = enclosing_function(at, ctx)
    chosen = _assignments_by_owner(ctx).get((key, owner), everywhere)
    candidates = [(a.value, a.node) for a in chosen]
    by_parameter = chosen is everywhere and not key.startswith("self.") and owner is not None
    if by_parameter and is_parameter(owner, key):  # type: ignore[arg-type]
        candidates = argument_values(owner, key, ctx) or candidates  # type: ignore[arg-type]
    values = []
    for value, node in candidates:
        if _binding_key(value) is not None:
            values.extend(values_of(value, ctx, node, depth + 1))
        else:
            values.append(value)
    return values


@per_module
def _assignments_by_owner(ctx: Context) -> dict[tuple[str, cst.CSTNode | None], list[Assignment]]:
    """``assignments`` by name and owner: the enclosing class for ``self.`` names, the
    enclosing function for others. ``values_of`` filtered a name's every assignment per
    question, which made site finding quadratic in the file."""
    index: dict[tuple[str, cst.CSTNode | None], list[Assignment]] = {}
    for name, found in _assignments_by_name(ctx).items():
        owner_of = _enclosing_class if name.startswith("self.") else enclosing_function
        for assignment in found:
            index.setdefault((name, owner_of(assignment.node, ctx)), []).append(assignment)
    return index


@per_node
def _enclosing_class(node: cst.CSTNode, ctx: Context) -> cst.CSTNode | None:
    return ctx.enclosing(node, cst.ClassDef)


# -- where the script refers to its own function ------------------------------------------------


@per_module
def functions_by_name(ctx: Context) -> dict[str, list[cst.FunctionDef]]:
    """The script's functions and methods by name (several where a name is reused)."""
    found: dict[str, list[cst.FunctionDef]] = {}
    for function in ctx.nodes(cst.FunctionDef):
        found.setdefault(function.name.value, []).append(function)  # type: ignore[attr-defined]
    return found


def function_uses(function: cst.FunctionDef, ctx: Context) -> list[cst.CSTNode] | None:
    """The Name/Attribute nodes outside ``function`` that refer to it (``f(...)``,
    ``self.f(...)``, ``sample_fn = self.f``), or None when the script defines several
    functions or methods of that name (a use could mean any of them)."""
    name = function.name.value
    if sum(f.name.value == name for f in ctx.nodes(cst.FunctionDef)) != 1:  # type: ignore[attr-defined]
        return None
    uses = [a for a in ctx.nodes(cst.Attribute) if a.attr.value == name]  # type: ignore[attr-defined]
    for node in ctx.nodes(cst.Name):
        parent = ctx.parent(node)
        attribute = isinstance(parent, cst.Attribute) and parent.attr is node  # counted above
        if node.value == name and node is not function.name and not attribute:  # type: ignore[attr-defined]
            uses.append(node)
    return [use for use in uses if not ctx.within(function, use)]


def parameter_default(name: cst.Name, ctx: Context) -> cst.BaseExpression | None:
    """The default of parameter ``name`` of the function around it, when no caller in this
    file passes a value (a trainer's ``gradient_accumulate_every = 1``)."""
    function = enclosing_function(name, ctx)
    if function is None or argument_values(function, name.value, ctx):
        return None
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return next((p.default for p in every if p.name.value == name.value), None)


def always_number(expr: cst.BaseExpression, ctx: Context, number: float) -> bool:
    """Does a name or ``self.<attr>`` hold ``number`` wherever this file sets it: literal
    assignments, or a parameter whose default it is and that no caller here overrides?
    False when nothing sets it here."""
    key = dotted_name(expr)
    bound = assignments(ctx, key) if key else []
    values: list[cst.BaseExpression | None] = []
    for assignment in bound:
        value = assignment.value
        if isinstance(value, cst.Name):
            values.extend(values_of(value, ctx, assignment.node) or [parameter_default(value, ctx)])
        else:
            values.append(value)
    if isinstance(expr, cst.Name) and not bound:
        values.append(parameter_default(expr, ctx))
    return bool(values) and all(v is not None and number_value(v) == number for v in values)
