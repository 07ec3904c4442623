"""Syntax questions: names, calls, arguments and literals of one node. No context needed."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst


# -- syntax: names, calls, arguments, literals ------------------------------------------------
def dotted_name(expr: cst.CSTNode) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None (calls, subscripts...)."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted_name(expr.value)
        return f"{base}.{expr.attr.value}" if base is not None else None
    return None


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
        # A negative position (``self`` of a method called as a plain function) names no
        # argument: it would read the last one, or fail on a call with none.
        if 0 <= position < len(positional):
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
