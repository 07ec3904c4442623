"""Recognisers for the spellings training code uses, shared by the operators. libcst only.

Operators combine these instead of re-deriving "is this ``opt.zero_grad()``?" each time.
Sections, in order: per-module caches; syntax (names, calls, arguments, literals);
building code; names and imports; where a node is; what a name holds; roles from names;
data loaders; optimizers and schedulers; models; losses; gradient mode; moving
statements. Module-wide analyses run once per parsed module (cached with the
``Context``), so an operator's ``match`` stays cheap however many candidates it sees.
"""

from __future__ import annotations

import functools
import re
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import libcst as cst

from mutator.context import Context, dotted_name
from mutator.operator import Replacement

_T = TypeVar("_T")

# -- per-module caches ------------------------------------------------------------------------


def per_module(analysis: Callable[[Context], _T]) -> Callable[[Context], _T]:
    """Run a module-wide ``analysis(ctx)`` once per parsed module; later calls reuse it.

    Results live as long as the ``Context`` (a weak reference), so nothing leaks across
    the many scripts a sweep parses.
    """
    results: weakref.WeakKeyDictionary[Context, Any] = weakref.WeakKeyDictionary()

    @functools.wraps(analysis)
    def cached(ctx: Context) -> _T:
        if ctx not in results:
            results[ctx] = analysis(ctx)
        return results[ctx]

    return cached


def per_node(analysis: Callable[[Any, Context], _T]) -> Callable[[Any, Context], _T]:
    """Memoise ``analysis(node, ctx)``: operators ask the same question of one node often.

    Nodes hash by identity and the table holds them, so an id is never reused while its
    answer is cached; the table goes with the ``Context``.
    """
    tables: weakref.WeakKeyDictionary[Context, dict[Any, Any]] = weakref.WeakKeyDictionary()

    @functools.wraps(analysis)
    def cached(node: Any, ctx: Context) -> _T:
        table = tables.get(ctx)
        if table is None:
            table = tables[ctx] = {}
        if node not in table:
            table[node] = analysis(node, ctx)
        return table[node]

    return cached


# -- syntax: names, calls, arguments, literals ------------------------------------------------


def last_name(expr: cst.BaseExpression) -> str:
    """The last part of a dotted name (``nn.functional.relu`` -> ``relu``), else ``""``."""
    return (dotted_name(expr) or "").rsplit(".", 1)[-1]


def method_name(call: cst.Call) -> str | None:
    """The attribute name of a method call: ``x.y.zero_grad()`` -> ``zero_grad``."""
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return None


def callee_name(call: cst.Call) -> str | None:
    """Last name of the callee: ``F.cross_entropy`` / ``cross_entropy`` -> ``cross_entropy``."""
    return _own_name(call.func)


def _own_name(expr: cst.BaseExpression) -> str | None:
    """The name an expression ends in: ``b`` of ``a().b``, ``x`` of ``x``."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Name):
        return expr.value
    return None


def receiver(call: cst.Call) -> cst.BaseExpression:
    """``x`` of a method call ``x.method(...)`` (the call must be a method call)."""
    assert isinstance(call.func, cst.Attribute)
    return call.func.value


def is_method_call(node: cst.CSTNode, names: str | Iterable[str]) -> bool:
    wanted = {names} if isinstance(names, str) else set(names)
    return isinstance(node, cst.Call) and method_name(node) in wanted


def expression_call(statement: cst.CSTNode) -> cst.Call | None:
    """The call of a one-call statement line such as ``loss.backward()``."""
    if (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.Call)
    ):
        return statement.body[0].value
    return None


def is_call_statement(statement: cst.CSTNode, method: str | Iterable[str]) -> bool:
    call = expression_call(statement)
    return call is not None and is_method_call(call, method)


def method_statement_receiver(statement: cst.CSTNode, method: str) -> cst.BaseExpression | None:
    """``x`` of a statement line ``x.<method>(...)`` (``opt.step()``), else None."""
    call = expression_call(statement)
    if call is None or method_name(call) != method:
        return None
    return receiver(call)


def single_assignment(statement: cst.CSTNode) -> cst.Assign | None:
    """The assignment of a line holding exactly ``target = value``, else None."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    return assign


def find_arg(
    call: cst.Call, keyword: str | None = None, position: int | None = None
) -> cst.Arg | None:
    """The argument passed by keyword, or else at ``position`` among positional args."""
    if keyword is not None:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg
    if position is not None:
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        if position < len(positional):
            return positional[position]
    return None


def positional_args(call: cst.Call) -> list[cst.Arg]:
    """The arguments passed without a keyword (``*args`` included)."""
    return [arg for arg in call.args if arg.keyword is None]


def has_star_args(call: cst.Call) -> bool:
    """``f(*args)`` / ``f(**kwargs)``: any argument could hide there."""
    return any(arg.star for arg in call.args)


def keyword_string(call: cst.Call, keyword: str) -> str | None:
    """The value of a string keyword argument (``reduction="sum"`` -> ``sum``), else None."""
    arg = find_arg(call, keyword=keyword)
    if arg is None or not isinstance(arg.value, cst.SimpleString):
        return None
    return arg.value.evaluated_value  # type: ignore[return-value]


def is_true(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def number_value(expr: cst.BaseExpression) -> float | None:
    """The value of a numeric literal (``1e-3``, ``-0.5``, ``32``), else None."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = number_value(expr.expression)
        return -inner if inner is not None else None
    return None


# -- building code ----------------------------------------------------------------------------

_NO_SPACE = cst.SimpleWhitespace("")
_SPACE = cst.SimpleWhitespace(" ")
_EMPTY_MODULE = cst.Module(body=[])


def parse_expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def parse_statement(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def code_of(node: cst.CSTNode) -> str:
    """The source of a node, also of one built by a rewrite (no module needed)."""
    return _EMPTY_MODULE.code_for_node(node)


def compact_code(node: cst.CSTNode) -> str:
    """Code without whitespace, so ``i+T`` and ``i + T`` compare equal."""
    return re.sub(r"\s+", "", code_of(node))


def number_literal(value: float, integer: bool | None = None) -> cst.BaseExpression:
    """A literal as a person types it: ``0.1``, ``3e-5``, ``1e-8``, ``512``, ``10.0``, ``-1``.

    ``integer`` (default: ``value`` is an int) renders whole values without a point.
    """
    if integer is None:
        integer = isinstance(value, int)
    magnitude = abs(value)
    if integer and magnitude == int(magnitude):
        literal: cst.BaseExpression = cst.Integer(str(int(magnitude)))
    else:
        text = f"{magnitude:.12g}"
        if "e" in text:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}e{int(exponent)}"
        elif "." not in text:
            text += ".0"
        literal = cst.Float(text)
    if value < 0:
        return cst.UnaryOperation(operator=cst.Minus(), expression=literal)
    return literal


def parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` in parentheses unless it already has them."""
    if expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def as_receiver(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` safe before ``.method()``: parenthesised unless it binds tightly."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        return expr
    return parenthesized(expr)


_TIGHT_OPERATORS = (
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.Power,
    cst.MatrixMultiply,
)


def as_factor(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` safe as an operand of ``*``: parenthesised when it binds looser."""
    loose = isinstance(expr, (cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda)) or (
        isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, _TIGHT_OPERATORS)
    )
    return parenthesized(expr) if loose else expr


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value`` spelled the PEP 8 way (no spaces around ``=``)."""
    equal = cst.AssignEqual(whitespace_before=_NO_SPACE, whitespace_after=_NO_SPACE)
    return cst.Arg(value=value, keyword=cst.Name(name), equal=equal)


def method_call(receiver: cst.BaseExpression, method: str, *args: cst.Arg) -> cst.Call:
    """``receiver.method(args)``, the receiver parenthesised when it needs it."""
    return cst.Call(
        func=cst.Attribute(value=as_receiver(receiver), attr=cst.Name(method)), args=args
    )


def function_call(function: str, *args: cst.Arg) -> cst.Call:
    """``function(args)`` for a dotted function name such as ``torch.sigmoid``."""
    return cst.Call(func=cst.parse_expression(function), args=args)


def closed_args(args: Sequence[cst.Arg]) -> list[cst.Arg]:
    """``args`` with the last one's comma dropped, ready to close a call after filtering."""
    result = list(args)
    if result:
        result[-1] = result[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return result


def with_arg_value(call: cst.Call, arg: cst.Arg, value: cst.BaseExpression) -> cst.Call:
    """``call`` with the value of one of its arguments replaced."""
    return call.with_changes(
        args=[other.with_changes(value=value) if other is arg else other for other in call.args]
    )


def without_arg(call: cst.Call, target: cst.Arg) -> cst.Call:
    """``call`` with one argument removed, keeping commas valid."""
    return call.with_changes(args=closed_args([arg for arg in call.args if arg is not target]))


def without_element(call: cst.Call, target: cst.Arg) -> cst.Call:
    """``call`` without one argument, keeping one-per-line layouts and trailing commas
    (``nn.Sequential(\\n    a,\\n    b,\\n)`` loses the line of ``b``, nothing else)."""
    args = list(call.args)
    index = next(i for i, arg in enumerate(args) if arg is target)
    if index == len(args) - 1 and index > 0:
        args[index - 1] = args[index - 1].with_changes(comma=target.comma)
    del args[index]
    return call.with_changes(args=args)


def without_list_element(holder: cst.List, value: cst.CSTNode) -> cst.List:
    """A list display without the element holding ``value``, keeping its layout."""
    kept = [element for element in holder.elements if element.value is not value]
    if kept and holder.elements[-1].value is value:
        kept[-1] = kept[-1].with_changes(comma=holder.elements[-1].comma)
    return holder.with_changes(elements=kept)


def without_tuple_element(tuple_node: cst.Tuple, index: int) -> cst.BaseExpression:
    """``(a, b, c)`` without element ``index``; a lone survivor stands unparenthesised."""
    elements = [e for i, e in enumerate(tuple_node.elements) if i != index]
    if len(elements) == 1:
        return elements[0].value
    elements[-1] = elements[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return tuple_node.with_changes(elements=elements)


def with_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``keyword=value`` set (replaced if present, appended otherwise)."""
    existing = find_arg(call, keyword=keyword)
    if existing is not None:
        return with_arg_value(call, existing, value)
    args = list(call.args)
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=_SPACE))
    return call.with_changes(args=[*args, keyword_arg(keyword, value)])


# -- names and imports ------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportBinding:
    """One name an import statement binds."""

    local: str  # the name the import binds: ``F``, ``nn``, ``CrossEntropyLoss``
    qualified: str  # what it stands for: ``torch.nn.functional``
    statement: cst.Import | cst.ImportFrom
    at_module_level: bool


@dataclass(frozen=True)
class ImportTable:
    """The absolute imports of a script, in the order the engine indexed them."""

    bindings: tuple[ImportBinding, ...]
    star_modules: tuple[str, ...]  # ``from torch.nn import *`` -> ``torch.nn``
    local_definitions: frozenset[str]  # functions and classes the script defines itself


@per_module
def imports(ctx: Context) -> ImportTable:
    """Every absolute import of the script (any scope): what each local name stands for."""
    bindings: list[ImportBinding] = []
    stars: list[str] = []
    for statement in [*ctx.nodes(cst.Import), *ctx.nodes(cst.ImportFrom)]:
        line = ctx.parent(statement)
        at_top = line is not None and isinstance(ctx.parent(line), cst.Module)
        if isinstance(statement, cst.Import):
            for alias in statement.names:
                full = dotted_name(alias.name) or ""
                if alias.asname is not None:
                    local = alias.asname.name.value  # type: ignore[union-attr]
                    bindings.append(ImportBinding(local, full, statement, at_top))
                else:  # ``import torch.nn`` binds ``torch``
                    head = full.split(".")[0]
                    bindings.append(ImportBinding(head, head, statement, at_top))
            continue
        assert isinstance(statement, cst.ImportFrom)
        module = dotted_name(statement.module) if statement.module is not None else None
        if statement.relative or module is None:
            continue
        if isinstance(statement.names, cst.ImportStar):
            stars.append(module)
            continue
        for alias in statement.names:
            name = dotted_name(alias.name) or ""
            local = alias.asname.name.value if alias.asname is not None else name  # type: ignore[union-attr]
            bindings.append(ImportBinding(local, f"{module}.{name}", statement, at_top))
    defined = frozenset(
        node.name.value  # type: ignore[attr-defined]
        for kind in (cst.FunctionDef, cst.ClassDef)
        for node in ctx.nodes(kind)
    )
    return ImportTable(tuple(bindings), tuple(stars), defined)


@per_node
def resolved_names(expr: cst.BaseExpression, ctx: Context) -> frozenset[str]:
    """What a Name/Attribute chain stands for: the engine's qualified names, else the
    script's own function or class (``<local>.Net``), else a name a ``from m import *``
    may have brought in (``torch.nn.CrossEntropyLoss``)."""
    names = ctx.qualified_names(expr)
    if names:
        return frozenset(names)
    dotted = dotted_name(expr)
    if dotted is None:
        return frozenset()
    table = imports(ctx)
    if dotted.partition(".")[0] in table.local_definitions:
        return frozenset({f"<local>.{dotted}"})
    return frozenset(f"{module}.{dotted}" for module in table.star_modules)


def _tails(names: Iterable[str]) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name in names}


def qualified_or_tail(node: cst.BaseExpression, ctx: Context, names: Iterable[str]) -> bool:
    """Does the callee of a call (or an expression) resolve to one of ``names``? When
    nothing resolves, the bare last name decides (``nn`` or ``F`` handed in from elsewhere,
    a star import)."""
    expr = node.func if isinstance(node, cst.Call) else node
    wanted = set(names)
    resolved = ctx.qualified_names(expr)
    if resolved:
        return bool(resolved & wanted)
    tail = callee_name(node) if isinstance(node, cst.Call) else last_name(expr)
    return bool(tail) and tail in _tails(wanted)


def refers_to(expr: cst.BaseExpression, ctx: Context, wanted: Collection[str]) -> bool:
    """Does ``expr`` name one of ``wanted``? Stricter than ``qualified_or_tail``: the
    script's own look-alike classes and star imports are resolved first, and the last
    name decides only for names nothing explains (never for ``self.<attr>``, a module)."""
    resolved = resolved_names(expr, ctx)
    if resolved:
        return bool(resolved & set(wanted))
    dotted = dotted_name(expr)
    if dotted is None or dotted.startswith("self."):
        return False
    return dotted.rsplit(".", 1)[-1] in _tails(wanted)


def resolves_under(expr: cst.BaseExpression, ctx: Context, prefix: str) -> bool:
    """Does ``expr`` resolve to ``prefix`` or something inside it (``torch.long`` under torch)?"""
    return any(
        name == prefix or name.startswith(prefix + ".") for name in resolved_names(expr, ctx)
    )


def module_alias(ctx: Context, module: str, at: cst.CSTNode | None = None) -> str | None:
    """How this script spells ``module`` at top level (or, given ``at``, also through the
    imports of the function holding ``at``): ``F``, ``nn.functional``, ``torch``."""
    scope = enclosing_function(at, ctx) if at is not None else None
    best: tuple[int, int, str] | None = None
    for binding in imports(ctx).bindings:
        visible = binding.at_module_level or (
            scope is not None and enclosing_function(binding.statement, ctx) is scope
        )
        if not visible:
            continue
        if binding.qualified == module:
            spelling = binding.local
        elif module.startswith(binding.qualified + "."):
            spelling = binding.local + module[len(binding.qualified) :]
        else:
            continue
        # The most specific import wins (``F`` over ``torch.nn.functional``), then the shortest.
        rank = (-len(binding.qualified), len(spelling), spelling)
        if best is None or rank < best:
            best = rank
    return best[2] if best is not None else None


def with_imported_name(
    statement: cst.ImportFrom, name: str, before: str | None = None
) -> cst.ImportFrom:
    """``from m import a`` -> ``from m import a, name``, keeping a one-per-line layout;
    ``before="a"`` puts it in front of the alias binding ``a`` instead (``name, a``)."""
    names = list(statement.names)  # type: ignore[arg-type]
    if before is not None:
        index = next(i for i, alias in enumerate(names) if _alias_binds(alias) == before)
        added = cst.ImportAlias(name=cst.Name(name), comma=cst.Comma(whitespace_after=_SPACE))
        return statement.with_changes(names=[*names[:index], added, *names[index:]])
    last = names[-1]
    if isinstance(last.comma, cst.Comma):  # one name per line: reuse the separator in use
        separator = names[-2].comma if len(names) > 1 else cst.Comma(whitespace_after=_SPACE)
    else:
        separator = cst.Comma(whitespace_after=_SPACE)
    names[-1] = last.with_changes(comma=separator)
    names.append(cst.ImportAlias(name=cst.Name(name), comma=last.comma))
    return statement.with_changes(names=names)


def _alias_binds(alias: cst.ImportAlias) -> str:
    """The name an import alias binds: ``AdamW`` for ``AdamW``, ``W`` for ``AdamW as W``."""
    bound = alias.asname.name if alias.asname else alias.name
    return (dotted_name(bound) if isinstance(bound, (cst.Name, cst.Attribute)) else None) or ""


def _import_from_binding(name: cst.Name, ctx: Context) -> ImportBinding | None:
    for binding in imports(ctx).bindings:
        if binding.local == name.value and isinstance(binding.statement, cst.ImportFrom):
            return binding
    return None


def renamed_callee(
    func: cst.BaseExpression, ctx: Context, new_name: str, new_first: bool = False
) -> tuple[cst.BaseExpression, dict[cst.CSTNode, Replacement]] | None:
    """The callee spelled for ``new_name`` from the same module (``nn.MSELoss`` for
    ``nn.CrossEntropyLoss``, ``MSELoss`` for an imported ``CrossEntropyLoss``), plus the
    import edit a bare name needs (the new name after the old one, or ``new_first``);
    None when the spelling cannot be told."""
    if isinstance(func, cst.Attribute):
        return func.with_changes(attr=cst.Name(new_name)), {}
    if not isinstance(func, cst.Name):
        return None
    table = imports(ctx)
    binding = _import_from_binding(func, ctx)
    if binding is None:
        names = resolved_names(func, ctx)
        star = any(f"{module}.{func.value}" in names for module in table.star_modules)
        return (cst.Name(new_name), {}) if star else None
    module = binding.qualified.rsplit(".", 1)[0]
    for other in table.bindings:
        if other.qualified == f"{module}.{new_name}" and other.at_module_level:
            return cst.Name(other.local), {}
    statement = binding.statement
    assert isinstance(statement, cst.ImportFrom)
    before = func.value if new_first else None
    return cst.Name(new_name), {statement: with_imported_name(statement, new_name, before)}


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
    for call in ctx.nodes(cst.Call):
        if is_method and function.name.value == "__init__":
            calls_it = isinstance(call.func, cst.Name) and call.func.value == owner.name.value  # type: ignore[union-attr, attr-defined]
        elif is_method:
            calls_it = method_name(call) == function.name.value  # type: ignore[arg-type]
        else:
            calls_it = isinstance(call.func, cst.Name) and call.func.value == function.name.value  # type: ignore[attr-defined]
        if not calls_it:
            continue
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
    candidates = [(a.value, a.node) for a in assignments(ctx, key)]
    if key.startswith("self."):
        here_class = ctx.enclosing(at, cst.ClassDef)
        same_class = [(v, n) for v, n in candidates if _enclosing_class(n, ctx) is here_class]
        candidates = same_class or candidates
    else:
        function = enclosing_function(at, ctx)
        local = [(v, n) for v, n in candidates if enclosing_function(n, ctx) is function]
        if local:
            candidates = local
        elif function is not None and is_parameter(function, key):
            candidates = argument_values(function, key, ctx) or candidates
    values = []
    for value, node in candidates:
        if _binding_key(value) is not None:
            values.extend(values_of(value, ctx, node, depth + 1))
        else:
            values.append(value)
    return values


@per_node
def _enclosing_class(node: cst.CSTNode, ctx: Context) -> cst.CSTNode | None:
    return ctx.enclosing(node, cst.ClassDef)


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


@per_node
def split_role_of(node: cst.CSTNode, ctx: Context) -> str | None:
    """train/eval from the expression itself, else from what it is assigned to or passed into."""
    current: cst.CSTNode | None = node
    while current is not None and not isinstance(current, cst.BaseStatement):
        role = split_role(code_of(current))
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


def is_data_loader(node: cst.CSTNode, ctx: Context) -> bool:
    return isinstance(node, cst.Call) and qualified_or_tail(node, ctx, DATA_LOADERS)


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
    named like training data (``train_loader``, ``DataLoader(train_ds)``)."""
    if not is_data_loader(node, ctx):
        return False
    role = loader_role(node, ctx)
    return role != "eval" and (shuffle_true(node) is not None or role == "train")  # type: ignore[arg-type]


# -- optimizers and schedulers ----------------------------------------------------------------

OPTIMIZER_CLASSES = frozenset(
    {"SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop", "Adagrad"}
    | {"Adadelta", "SparseAdam", "LBFGS", "ASGD", "Adafactor"}
)
SCHEDULER_CLASSES = frozenset(
    {"StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "OneCycleLR", "CyclicLR"}
    | {"CosineAnnealingWarmRestarts", "LambdaLR", "MultiplicativeLR", "LinearLR", "ConstantLR"}
    | {"PolynomialLR", "SequentialLR", "ChainedScheduler", "ReduceLROnPlateau", "LRScheduler"}
)
SCHEDULER_MODULE = "torch.optim.lr_scheduler."


@per_node
def optimizer_class(call: cst.CSTNode, ctx: Context) -> str | None:
    """``"Adam"`` for ``optim.Adam(...)``/``torch.optim.Adam(...)``/``Adam(...)``, else None."""
    if not isinstance(call, cst.Call):
        return None
    # The script's own ``class Adam`` is no torch optimizer: it takes none of its arguments.
    resolved = resolved_names(call.func, ctx)
    for qualified in resolved:
        tail = qualified.rsplit(".", 1)[-1]
        if (
            qualified.startswith("torch.optim.")
            and not qualified.startswith(SCHEDULER_MODULE)
            and tail in OPTIMIZER_CLASSES
        ):
            return tail
    tail = callee_name(call)
    if not resolved and tail in OPTIMIZER_CLASSES:
        return tail
    return None


def constructor_kind(call: cst.Call, ctx: Context) -> str | None:
    """``optimizer``, ``scheduler`` or ``scaler`` (GradScaler) for the class a call builds."""
    return class_kind(call.func, ctx)


def class_kind(cls: cst.BaseExpression, ctx: Context) -> str | None:
    """``optimizer``, ``scheduler`` or ``scaler`` for a class name (``optim.Adam``, an
    annotation ``lr_scheduler.LRScheduler``), by what it resolves to, else its name."""
    names = ctx.qualified_names(cls)
    for name in names:
        if name.startswith(SCHEDULER_MODULE):
            return "scheduler"
        if name.rsplit(".", 1)[-1] == "GradScaler":
            return "scaler"
        if name.startswith("torch.optim."):
            return "optimizer"
    tail = _own_name(cls) or ""
    if tail in SCHEDULER_CLASSES:
        return "scheduler"
    if tail in OPTIMIZER_CLASSES or tail == "Optimizer":
        return "optimizer"
    if tail == "GradScaler":
        return "scaler"
    # A scheduler from another library (``get_cosine_schedule_with_warmup``, timm's ``*LR``).
    if "schedul" in tail.lower() or (not names and tail.endswith("LR")):
        return "scheduler"
    return None


def _kind_by_name(name: str) -> str | None:
    lowered = name.lower()
    if "sched" in lowered:
        return "scheduler"
    if "scaler" in lowered:
        return "scaler"
    if "optim" in lowered or lowered == "opt" or lowered.startswith("opt_"):
        return "optimizer"
    if lowered.endswith("_opt"):
        return "optimizer"
    return None


def _annotation_kind(name: str, ctx: Context) -> str | None:
    for param in ctx.nodes(cst.Param):
        if param.name.value == name and param.annotation is not None:  # type: ignore[attr-defined]
            kind = class_kind(param.annotation.annotation, ctx)  # type: ignore[attr-defined]
            if kind is not None:
                return kind
    return None


@per_node
def receiver_kind(expr: cst.BaseExpression, ctx: Context) -> str | None:
    """Is this object an ``optimizer``, a ``scheduler`` or a (GradScaler) ``scaler``?

    What it was constructed from decides first (``torch.optim.X``, ``lr_scheduler.X``),
    then a parameter annotation, then its name (``sched`` before ``opt``, so
    ``optim_scheduler`` is a scheduler).
    """
    while isinstance(expr, cst.Subscript):  # self.optimizers[0]
        expr = expr.value
    dotted = dotted_name(expr)
    if dotted is None:
        return None
    for value in assigned_values(ctx, dotted):
        if isinstance(value, cst.Call):
            kind = constructor_kind(value, ctx)
            if kind is not None:
                return kind
    if "." not in dotted:
        kind = _annotation_kind(dotted, ctx)
        if kind is not None:
            return kind
    return _kind_by_name(dotted.rsplit(".", 1)[-1])


def is_optimizer_step(statement: cst.CSTNode, ctx: Context) -> bool:
    """``optimizer.step()`` / ``self.opt.step(closure)`` / ``scaler.step(optimizer)``."""
    call = expression_call(statement)
    if call is None or method_name(call) != "step":
        return False
    kind = receiver_kind(receiver(call), ctx)
    if kind == "optimizer":
        return True
    if kind == "scaler":
        first = find_arg(call, position=0)
        return first is not None and receiver_kind(first.value, ctx) == "optimizer"
    return False


def is_scheduler_step(statement: cst.CSTNode, ctx: Context) -> bool:
    """``scheduler.step()`` (or ``scheduler.step(val_loss)``) of an LR scheduler."""
    stepped = method_statement_receiver(statement, "step")
    return stepped is not None and receiver_kind(stepped, ctx) == "scheduler"


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


def _class_is_module(name: str, ctx: Context, depth: int) -> bool | None:
    """Does the class ``name`` defined in this module subclass ``nn.Module``?"""
    classes = [c for c in ctx.nodes(cst.ClassDef) if c.name.value == name]  # type: ignore[attr-defined]
    if not classes:
        return None
    for base in classes[0].bases:  # type: ignore[attr-defined]
        resolved = ctx.qualified_names(base.value)
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
    resolved = ctx.qualified_names(call.func)
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
            resolved = ctx.qualified_names(param.annotation.annotation)  # type: ignore[attr-defined]
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
    name = dotted_name(unwrap_calls(expr, MODULE_PASSTHROUGH))
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return bool(_MODEL_NAME.search(last)) and not _NOT_MODEL_NAME.search(last)


def nn_class(call: cst.BaseExpression, ctx: Context, classes: Collection[str]) -> str | None:
    """Which of ``classes`` (torch.nn class names) the call constructs, if any."""
    if not isinstance(call, cst.Call):
        return None
    wanted = {
        f"{module}.{name}"
        for name in classes
        for module in ("torch.nn", "torch.nn.modules", "torch.nn.modules.loss")
    }
    if not refers_to(call.func, ctx, wanted):
        return None
    dotted = dotted_name(call.func) or ""
    for name in resolved_names(call.func, ctx) | {dotted}:
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
    return [
        value
        for value in values_of(func, ctx, at)
        if isinstance(value, cst.Call) and nn_class(value, ctx, classes)
    ]


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


@per_node
def loss_constructor_kind(call: cst.CSTNode, ctx: Context) -> str | None:
    """``CrossEntropyLoss`` for ``nn.CrossEntropyLoss(...)`` (any alias), else None."""
    if not isinstance(call, cst.Call):
        return None
    return nn_class(call, ctx, LOSS_CLASSES)


@per_node
def functional_loss_kind(call: cst.CSTNode, ctx: Context) -> str | None:
    """``CrossEntropyLoss`` for ``F.cross_entropy(...)`` (any alias), else None."""
    if not isinstance(call, cst.Call) or not refers_to(call.func, ctx, _FUNCTIONAL):
        return None
    for name in resolved_names(call.func, ctx) | {last_name(call.func)}:
        kind = FUNCTIONAL_LOSSES.get(name.rsplit(".", 1)[-1])
        if kind is not None:
            return kind
    return None


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
        if positional and refers_to(func, ctx, _LOG_SOFTMAX_FUNCTIONS):
            return "function", positional[0].value
        return None
    assert isinstance(func, cst.Attribute)
    owner = resolved_names(func.value, ctx)
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
    resolved = ctx.qualified_names(call.func)
    for name in resolved:
        module, _, function = name.rpartition(".")
        if module == "torch.nn.functional" and function in ALL_FUNCTIONAL_LOSSES:
            return True
    dotted = dotted_name(call.func)
    if dotted is not None:
        for value in assigned_values(ctx, dotted):
            if not isinstance(value, cst.Call):
                continue
            constructors = {*ctx.qualified_names(value.func), callee_name(value) or ""}
            if any(name.endswith("Loss") for name in constructors):
                return True
        last = dotted.rsplit(".", 1)[-1].lower()
        if "criterion" in last or "loss" in last:
            return True
    return not resolved and tail in ALL_FUNCTIONAL_LOSSES


# -- gradient mode ----------------------------------------------------------------------------

_NO_GRAD = frozenset(
    {"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
)
_INFERENCE_MODE = frozenset({"torch.inference_mode", "torch.autograd.grad_mode.inference_mode"})
_SET_GRAD_ENABLED = frozenset(
    {
        "torch.set_grad_enabled",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.grad_mode.set_grad_enabled",
    }
)


def disables_grad(expr: cst.BaseExpression, ctx: Context) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``
    (and, for decorators, the uncalled ``torch.no_grad``)."""
    if not isinstance(expr, cst.Call):
        return qualified_or_tail(expr, ctx, _NO_GRAD | _INFERENCE_MODE)
    if qualified_or_tail(expr.func, ctx, _NO_GRAD):
        return not expr.args
    if qualified_or_tail(expr.func, ctx, _INFERENCE_MODE):
        return not expr.args or is_true(expr.args[0].value)
    if qualified_or_tail(expr.func, ctx, _SET_GRAD_ENABLED):
        return len(expr.args) == 1 and is_false(expr.args[0].value)
    return False


def in_no_grad(node: cst.CSTNode, ctx: Context) -> bool:
    """Inside ``with torch.no_grad():`` or a function decorated ``@torch.no_grad()``."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.With):
            switches = [item.item for item in ancestor.items]
        elif isinstance(ancestor, cst.FunctionDef):
            switches = [decorator.decorator for decorator in ancestor.decorators]
        else:
            continue
        if any(disables_grad(switch, ctx) for switch in switches):
            return True
    return False


# -- moving statements ------------------------------------------------------------------------


def move_before(statement: cst.CSTNode, anchor: cst.CSTNode) -> dict[cst.CSTNode, Replacement]:
    """Edits that move ``statement`` directly above ``anchor`` (same block).

    The moved line takes over the anchor's leading comments/blank lines so that a comment
    heading the group stays on top.
    """
    assert isinstance(statement, cst.SimpleStatementLine)
    return {statement: cst.RemoveFromParent(), **insert_before(anchor, statement)}


def move_after(statement: cst.CSTNode, anchor: cst.CSTNode) -> dict[cst.CSTNode, Replacement]:
    """Edits that move ``statement`` right below ``anchor`` (its blank lines stay behind)."""
    assert isinstance(statement, cst.SimpleStatementLine)
    moved = statement.with_changes(leading_lines=())
    return {statement: cst.RemoveFromParent(), anchor: cst.FlattenSentinel([anchor, moved])}


def insert_before(
    anchor: cst.CSTNode, statement: cst.CSTNode, anchor_becomes: cst.CSTNode | None = None
) -> dict[cst.CSTNode, Replacement]:
    """The edit that puts ``statement`` above ``anchor``, taking over its leading lines
    (``anchor_becomes``, when given, stands in place of the anchor)."""
    assert isinstance(anchor, cst.BaseStatement) and isinstance(statement, cst.BaseStatement)
    moved = statement.with_changes(leading_lines=anchor.leading_lines)
    kept = anchor_becomes if anchor_becomes is not None else anchor
    return {anchor: cst.FlattenSentinel([moved, kept.with_changes(leading_lines=())])}


def dedented_body(block_owner: cst.With) -> list[cst.BaseStatement]:
    """The statements of a ``with`` block, ready to stand in its place one level out."""
    body = block_owner.body
    if isinstance(body, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=body.body, leading_lines=block_owner.leading_lines)]
    statements = list(body.body)
    first = statements[0]
    statements[0] = first.with_changes(
        leading_lines=[*block_owner.leading_lines, *first.leading_lines]
    )
    return statements
