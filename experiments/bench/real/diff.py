"""Statement-level diffs of Python sources, compared as normalised AST (issue 32).

A source is flattened into *entries*: every statement in document order, a compound
statement as its header alone (``for x in y:``, ``with torch.no_grad():``), each with its
nesting depth, a normalised ``ast.dump`` and the lines it occupies. ``pass`` is dropped (a
mutant that removes the only statement of a block leaves one). Normalisation folds constant
arithmetic (``0.01 * 100`` is ``1.0``) and sorts keyword arguments, and ``ast`` already
ignores comments and layout, so a rewrite counts as the fault's code when it says the same
thing, however it is written.

``diff(a, b)`` aligns two entry lists in two passes: first by a *key* (the statement's
kind, depth and what it assigns or calls, or a compound statement's whole header), then,
inside runs of equal keys, statement by statement. The result is a list of ``Edit``s, each
replacing ``a[i1:i2]`` by some entries of ``b``. Two keyed passes keep unrelated changes of
one hunk apart: a loss line edited next to an inserted ``zero_grad()`` gives two edits, not
one. ``Edit``s compare by position in ``a`` and the normalised entries they put there, so
the diff of the fixed file against a mutant can be compared with the diff of the fixed file
against the faulty one.
"""

from __future__ import annotations

import ast
import copy
import difflib
from dataclasses import dataclass

_BODIES = ("body", "orelse", "finalbody", "handlers")


@dataclass(frozen=True)
class Entry:
    depth: int
    key: str
    dump: str
    first: int  # first line of the statement (of the header, for a compound statement)
    last: int

    @property
    def code(self) -> tuple[int, str]:
        return (self.depth, self.dump)


@dataclass(frozen=True)
class Edit:
    """``a[i1:i2]`` replaced by ``new`` (entries of ``b``, as (depth, dump) pairs)."""

    i1: int
    i2: int
    new: tuple[tuple[int, str], ...]
    # Lines of ``b`` this edit spans; for a pure removal from ``a``, the lines around the gap.
    b_lines: tuple[int, int] = (0, 0)
    # Lines of ``a`` this edit spans, or around the gap for a pure insertion into ``a``.
    a_lines: tuple[int, int] = (0, 0)

    @property
    def identity(self) -> tuple[int, int, tuple[tuple[int, str], ...]]:
        return (self.i1, self.i2, self.new)

    def touches_b(self, lines: set[int]) -> bool:
        return any(self.b_lines[0] <= line <= self.b_lines[1] for line in lines)

    def touches_a(self, lines: set[int]) -> bool:
        return any(self.a_lines[0] <= line <= self.a_lines[1] for line in lines)


class _Normalise(ast.NodeTransformer):
    """Constant folding and keyword order: two spellings of one statement dump alike."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if _number(node.left) and _number(node.right):
            try:
                # Two numeric literals and one operator: nothing else reaches eval.
                value = eval(
                    compile(ast.Expression(body=node), "<fold>", "eval"), {"__builtins__": {}}
                )
            except Exception:  # 1 / 0 stays as it is written
                return node
            return ast.copy_location(ast.Constant(value=value), node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, (ast.USub, ast.UAdd)) and _number(node.operand):
            value = -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
            return ast.copy_location(ast.Constant(value=value), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        node.keywords.sort(key=lambda keyword: keyword.arg or "")
        return node


def _number(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float, complex))
        and not isinstance(node.value, bool)
    )


def _dump(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _header(node: ast.stmt) -> ast.stmt:
    shell = copy.copy(node)
    for name in _BODIES:
        if hasattr(shell, name):
            setattr(shell, name, [])
    return shell


def _key(node: ast.stmt, depth: int, dump: str) -> str:
    kind = type(node).__name__
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return f"{depth}:{kind}:{'|'.join(_dump(t) for t in targets)}"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return f"{depth}:Call:{_dump(node.value.func)}"
    if any(hasattr(node, name) for name in _BODIES):
        return f"{depth}:{dump}"
    return f"{depth}:{kind}"


def flatten(source: str) -> list[Entry]:
    """Every statement of ``source`` (compound ones as headers), normalised; SyntaxError
    propagates."""
    tree = _Normalise().visit(ast.parse(source))
    entries: list[Entry] = []

    def walk(statements: list, depth: int) -> None:
        for node in statements:
            if isinstance(node, ast.Pass):
                continue
            if isinstance(node, ast.ExceptHandler):
                header = _header(node)
                dump = _dump(header)
                entries.append(Entry(depth, f"{depth}:{dump}", dump, node.lineno, node.lineno))
                walk(node.body, depth + 1)
                continue
            compound = any(hasattr(node, name) for name in _BODIES)
            dump = _dump(_header(node) if compound else node)
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            last = node.lineno if compound else (node.end_lineno or node.lineno)
            entries.append(Entry(depth, _key(node, depth, dump), dump, first, last))
            if compound:
                walk(node.body, depth + 1)
                for name in ("handlers", "orelse", "finalbody"):
                    block = getattr(node, name, None)
                    if block:
                        if name != "handlers":
                            marker = f"{depth}:{name}"
                            entries.append(Entry(depth, marker, marker, block[0].lineno, 0))
                        walk(block, depth + 1)

    walk(tree.body, 0)
    return entries


def _span(entries: list[Entry], start: int, stop: int) -> tuple[int, int]:
    """Lines of ``entries[start:stop]``; for an empty range, from the statement before the
    gap to the statement after it (a fault pinned on a blank line next to a missing
    statement still touches it)."""
    if stop > start:
        chosen = entries[start:stop]
        return (min(e.first for e in chosen), max(max(e.first, e.last) for e in chosen))
    before = entries[start - 1].first if start > 0 else 1
    after = entries[start].first if start < len(entries) else 10**9
    return (before, after)


def diff(a: list[Entry], b: list[Entry]) -> list[Edit]:
    """The edits that turn ``a`` into ``b`` (module docstring)."""
    edits: list[Edit] = []
    matcher = difflib.SequenceMatcher(None, [e.key for e in a], [e.key for e in b], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                left, right = a[i1 + offset], b[j1 + offset]
                if left.dump != right.dump:
                    edits.append(
                        Edit(
                            i1 + offset,
                            i1 + offset + 1,
                            (right.code,),
                            _span(b, j1 + offset, j1 + offset + 1),
                            _span(a, i1 + offset, i1 + offset + 1),
                        )
                    )
            continue
        edits.append(
            Edit(
                i1,
                i2,
                tuple(e.code for e in b[j1:j2]),
                _span(b, j1, j2),
                _span(a, i1, i2),
            )
        )
    return edits


def identities(edits: list[Edit]) -> frozenset:
    return frozenset(edit.identity for edit in edits)
