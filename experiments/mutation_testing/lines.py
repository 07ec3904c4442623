"""Which test executed which line of the mutated files, recorded once in the baseline.

Python 3.12+ has ``sys.monitoring``, whose per-location ``DISABLE`` makes each line cost
one event per test; this project supports 3.10 and 3.11 too, so the recorder is a
``sys.settrace`` function: the global tracer answers each Python call with a line tracer
only for frames of the mutated files (one dict lookup per call elsewhere), so the cost
is a call event per Python call plus a set insertion per line of those files, in the
baseline only. coverage.py's dynamic contexts would do the same in C, at the price of a
dependency and an SQLite file to read back; the baseline is one run, so the plain tracer
earns its place (``benchmarks/bench_mutation_testing.py`` measures what it costs).

Lines run outside a test (importing a test module, session teardown) land in the
context ``COLLECT``; lines run while a fixture of a wider scope than a function is set
up land in ``fixture:<name>``, because every test that uses that fixture depends on them,
not only the first one, which happened to set it up.
"""

from __future__ import annotations

import ast
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from types import FrameType
from typing import Any

COLLECT = "<collect>"
FIXTURE = "fixture:"


class LineRecorder:
    """Lines of ``files`` (real paths) executed per context; see the module docstring."""

    def __init__(self, files: Iterable[str]) -> None:
        self.files = {os.path.realpath(path) for path in files}
        self.hits: dict[str, dict[str, set[int]]] = {}
        self._names: dict[str, str | None] = {}  # co_filename -> its real path if recorded
        self._stack: list[str] = []
        self._sink: dict[str, set[int]] = {}
        self.enter(COLLECT)

    def enter(self, context: str) -> None:
        self._stack.append(context)
        self._sink = self.hits.setdefault(context, {})

    def leave(self) -> None:
        if len(self._stack) > 1:
            self._stack.pop()
        self._sink = self.hits.setdefault(self._stack[-1], {})

    @property
    def context(self) -> str:
        return self._stack[-1]

    def start(self) -> None:
        threading.settrace(self._call)
        sys.settrace(self._call)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]

    def _call(self, frame: FrameType, event: str, arg: Any):
        filename = frame.f_code.co_filename
        try:
            path = self._names[filename]
        except KeyError:
            real = os.path.realpath(filename)
            path = self._names[filename] = real if real in self.files else None
        if path is None:
            return None

        def line(frame: FrameType, event: str, arg: Any):
            if event == "line":
                sink = self._sink
                lines = sink.get(path)
                if lines is None:
                    lines = sink[path] = set()
                lines.add(frame.f_lineno)
            return line

        return line

    def as_json(self) -> dict[str, dict[str, list[int]]]:
        return {
            context: {path: sorted(lines) for path, lines in files.items() if lines}
            for context, files in self.hits.items()
        }


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
