"""Small, reusable recognisers for the spellings training code uses. libcst only.

Operators combine these instead of re-deriving "is this `opt.zero_grad()`?" each time.
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst

from mutator.context import Context


def dotted_name(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None (calls, subscripts...)."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted_name(expr.value)
        return f"{base}.{expr.attr.value}" if base is not None else None
    return None


def method_name(call: cst.Call) -> str | None:
    """The attribute name of a method call: ``x.y.zero_grad()`` -> ``zero_grad``."""
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    return None


def callee_name(call: cst.Call) -> str | None:
    """Last name of the callee: ``F.cross_entropy`` / ``cross_entropy`` -> ``cross_entropy``."""
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    if isinstance(call.func, cst.Name):
        return call.func.value
    return None


def is_method_call(node: cst.CSTNode, names: str | Iterable[str]) -> bool:
    wanted = {names} if isinstance(names, str) else set(names)
    return isinstance(node, cst.Call) and method_name(node) in wanted


def calls_qualified(call: cst.Call, ctx: Context, names: Iterable[str]) -> bool:
    """Does the callee resolve (through imports and aliases) to one of ``names``?"""
    wanted = set(names)
    return bool(ctx.qualified_names(call.func) & wanted)


def qualified_or_tail(call: cst.Call, ctx: Context, names: Iterable[str]) -> bool:
    """Like ``calls_qualified``; falls back to the bare tail name when nothing resolves.

    Scripts often receive ``nn`` or ``F`` from elsewhere (a star import, a parameter),
    where qualified names cannot resolve; a tail match is then the best evidence.
    """
    wanted = set(names)
    resolved = ctx.qualified_names(call.func)
    if resolved:
        return bool(resolved & wanted)
    tail = callee_name(call)
    return tail is not None and tail in {name.rsplit(".", 1)[-1] for name in wanted}


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


def without_arg(call: cst.Call, target: cst.Arg) -> cst.Call:
    """``call`` with one argument removed, keeping commas valid."""
    args = [arg for arg in call.args if arg is not target]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def with_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``keyword=value`` set (replaced if present, appended otherwise)."""
    existing = find_arg(call, keyword=keyword)
    if existing is not None:
        return call.with_changes(
            args=[arg.with_changes(value=value) if arg is existing else arg for arg in call.args]
        )
    args = list(call.args)
    if args:
        args[-1] = args[-1].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    return call.with_changes(args=[*args, new_arg])


def number_value(expr: cst.BaseExpression) -> float | None:
    """The value of a numeric literal (``1e-3``, ``-0.5``, ``32``), else None."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = number_value(expr.expression)
        return -inner if inner is not None else None
    return None


def parse_expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def parse_statement(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)
