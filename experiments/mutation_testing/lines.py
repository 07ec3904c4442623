"""Which test executed which line of the mutated files, recorded once in the baseline.

The recorder compiles each mutated file with a probe before every statement
(``__trainwreck_lines_<n>__[k] = 1``, one byte store, ~30 ns per execution), and the
import hook of the harness serves that code to every import of the file. No tracer is
involved: ``sys.settrace`` has one slot, and pytest-cov, coverage.py started by the
project, a profiler or hypothesis' explain phase take it over (pytest-cov's tracer did, on
two public projects: the baseline recorded nothing and every mutant was ``unreached``).
coverage.py's own per-test contexts would need coverage active and its SQLite data read
back, and attribute a module fixture's lines to the first test that set it up; the probes
cost less than either and do not depend on what the project runs.

At each context boundary (a test starts or ends, a wide fixture is set up) the bytes set
since the last boundary are credited to the context that was current, then cleared.
Lines run outside a test (importing a test module, session teardown) land in the
context ``COLLECT``; lines run while a fixture of a wider scope than a function is set
up land in ``fixture:<name>``, because every test that uses that fixture depends on them,
not only the first one, which happened to set it up.

What the probes cannot see, the baseline reports instead of a silent empty record
(``Watch``): a mutated file that the tests never loaded through the hook (imported from
another copy, an installed one), or read as a file (``runpy``, ``exec(open(...))``,
``spec_from_file_location``), whose lines then ran unprobed.
"""

from __future__ import annotations

import ast
import builtins
import os
from collections.abc import Iterable, Mapping
from types import CodeType

COLLECT = "<collect>"
FIXTURE = "fixture:"
PROBE_PREFIX = "__trainwreck_lines_"


class LineRecorder:
    """Lines of ``files`` (real paths) executed per context; see the module docstring."""

    def __init__(self, files: Iterable[str]) -> None:
        self.files = sorted({os.path.realpath(path) for path in files})
        self.hits: dict[str, dict[str, set[int]]] = {}
        self._flags: dict[str, bytearray] = {}
        self._lines: dict[str, list[int]] = {}
        self._stack: list[str] = [COLLECT]

    def instrument(self, path: str, source: str, filename: str | None = None) -> CodeType:
        """``source`` (the file at ``path``) compiled, as ``filename`` (default: ``path``),
        with a probe before each statement."""
        real = os.path.realpath(path)
        number = self.files.index(real)
        name = f"{PROBE_PREFIX}{number}__"
        tree = ast.parse(source, filename or path)
        lines: list[int] = []
        _insert_probes(tree, name, lines)
        flags = bytearray(len(lines))
        setattr(builtins, name, flags)
        self._flags[real], self._lines[real] = flags, lines
        return compile(tree, filename or path, "exec")

    def enter(self, context: str) -> None:
        self._flush()
        self._stack.append(context)

    def leave(self) -> None:
        self._flush()
        if len(self._stack) > 1:
            self._stack.pop()

    @property
    def context(self) -> str:
        return self._stack[-1]

    def _flush(self) -> None:
        for path, flags in self._flags.items():
            if flags.find(1) < 0:
                continue
            lines = self._lines[path]
            sink = self.hits.setdefault(self._stack[-1], {}).setdefault(path, set())
            sink.update(lines[k] for k, hit in enumerate(flags) if hit)
            flags[:] = bytes(len(flags))

    def as_json(self) -> dict[str, dict[str, list[int]]]:
        self._flush()
        return {
            context: {path: sorted(lines) for path, lines in files.items() if lines}
            for context, files in self.hits.items()
        }


def _insert_probes(tree: ast.Module, name: str, lines: list[int]) -> None:
    """A probe before each statement of every block, keeping every line number; never
    before a docstring (it must stay one: ``argparse`` reads ``__doc__``) or a
    ``from __future__`` import (which must come first)."""
    for block in _blocks(tree):
        placed: list[ast.stmt] = []
        for index, statement in enumerate(block):
            if not _must_lead(statement, index, placed):
                placed.append(_probe(name, len(lines), statement))
                lines.append(statement.lineno)
            placed.append(statement)
        block[:] = placed


def _must_lead(statement: ast.stmt, index: int, placed: list[ast.stmt]) -> bool:
    if index != len(placed):  # a probe already went in: what follows is no docstring
        return False
    docstring = (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )
    future = isinstance(statement, ast.ImportFrom) and statement.module == "__future__"
    return (docstring and index == 0) or future


def _probe(name: str, number: int, anchor: ast.stmt) -> ast.stmt:
    target = ast.Subscript(
        value=ast.Name(id=name, ctx=ast.Load()), slice=ast.Constant(value=number), ctx=ast.Store()
    )
    probe = ast.Assign(targets=[target], value=ast.Constant(value=1))
    for node in ast.walk(probe):
        node.lineno = node.end_lineno = anchor.lineno
        node.col_offset = node.end_col_offset = anchor.col_offset
    return probe


def _blocks(tree: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list of the tree (bodies, else and finally blocks, handlers, cases)."""
    found = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                found.append(block)
    return found


def spans(source: str, lines: Iterable[int]) -> list[range]:
    """For each changed line, the lines whose execution means it ran (or, for a
    ``def``/``class`` header, that what it defines ran): the innermost statement holding
    it, the body of a function or class whose header or decorator it is. A line in no
    statement maps to ``range(0)``: nothing proves it ran, so every test is chosen."""
    tree = ast.parse(source)
    statements = [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]
    found = []
    for line in lines:
        holding = [
            node for node in statements if _first(node) <= line <= (node.end_lineno or node.lineno)
        ]
        if not holding:
            found.append(range(0))
            continue
        inner = min(holding, key=lambda node: (node.end_lineno or node.lineno) - _first(node))
        if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            body_start = inner.body[0].lineno
            if line < body_start:  # header or decorator: the definition's body
                found.append(range(body_start, (inner.end_lineno or body_start) + 1))
                continue
        found.append(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return found


def _first(node: ast.stmt) -> int:
    """A statement's first line, its decorators included."""
    decorators = getattr(node, "decorator_list", None) or ()
    return min([node.lineno, *(decorator.lineno for decorator in decorators)])


def contexts_running(
    hits: Mapping[str, Mapping[str, Iterable[int]]], path: str, wanted: list[range]
) -> set[str]:
    """The contexts that executed a line of any of ``wanted`` in ``path`` (a mutant with
    two changed places runs when either does)."""
    found = set()
    for context, files in hits.items():
        executed = files.get(path)
        if executed and any(line in span for span in wanted for line in executed):
            found.add(context)
    return found
