"""Building code and edits that keep the script's layout (spacing, comments, blank lines)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from mutator.operator import Edits
from mutator.semantics.syntax import dotted_name, find_arg

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


# -- moving statements ------------------------------------------------------------------------


def move_before(statement: cst.CSTNode, anchor: cst.CSTNode) -> Edits:
    """Edits that move ``statement`` directly above ``anchor`` (same block).

    The moved line takes over the anchor's leading comments/blank lines so that a comment
    heading the group stays on top.
    """
    assert isinstance(statement, cst.BaseStatement)  # a line, or a whole for/with block
    return {statement: cst.RemoveFromParent(), **insert_before(anchor, statement)}


def move_after(statement: cst.CSTNode, anchor: cst.CSTNode) -> Edits:
    """Edits that move ``statement`` right below ``anchor`` (its blank lines stay behind)."""
    assert isinstance(statement, cst.BaseStatement)
    moved = statement.with_changes(leading_lines=())
    return {statement: cst.RemoveFromParent(), anchor: cst.FlattenSentinel([anchor, moved])}


def insert_before(
    anchor: cst.CSTNode, statement: cst.CSTNode, anchor_becomes: cst.CSTNode | None = None
) -> Edits:
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
