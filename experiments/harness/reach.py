"""Did the mutated lines run? A counter per changed region, compiled into the mutant.

``regions(original, mutated)`` (parent side) lists where a mutant differs from its file:
``{"start": a, "end": b}`` for lines of the mutant that replace or add lines, and
``{"after": j, "col": c}`` for lines deleted after line ``j`` of the mutant (their
indentation ``c`` says in which block they were). ``compile_probed`` (run side) parses
the mutant, inserts ``__trainwreck_reach__[k] += 1`` before each statement of region
``k`` (or where the deleted statements were), keeping every line number, and compiles
it: tracebacks and telemetry read the same lines as without probes. A probe costs one
subscript increment per execution of that statement (~40 ns), nothing elsewhere, unlike
a trace function. ``__trainwreck_reach__`` lives in ``builtins``, so it resolves in any
module or ``exec`` namespace the mutated code ends up in.
"""

from __future__ import annotations

import ast
import builtins
import difflib
from collections.abc import Iterator, Sequence
from types import CodeType
from typing import Any

PROBE_NAME = "__trainwreck_reach__"
Region = dict[str, int]


def regions(original: str, mutated: str) -> list[Region]:
    """The places where ``mutated`` differs from ``original`` (see the module docstring)."""
    return regions_of_lines(original.splitlines(), mutated.splitlines())


def regions_of_lines(
    old: list[str], new: list[str], known_head: int = 0, known_tail: int = 0
) -> list[Region]:
    """``regions`` on lines split without their ends; ``known_head``/``known_tail``: lines
    known to be shared at each end (``mutator.splice``), which are not compared again."""
    # Imported here: this module also runs in the child, which should not load the engine.
    from mutator.diff import common_ends

    head, tail = common_ends(old, new, known_head, known_tail)  # difflib sees the rest only
    found: list[Region] = []
    matcher = difflib.SequenceMatcher(
        a=old[head : len(old) - tail], b=new[head : len(new) - tail], autojunk=False
    )
    for tag, i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        i1, j1, j2 = i1 + head, j1 + head, j2 + head
        if j2 > j1:
            found.append({"start": j1 + 1, "end": j2})
        else:
            deleted = old[i1]
            found.append({"after": j1, "col": len(deleted) - len(deleted.lstrip())})
    return found


def install_counters(count: int) -> list[int]:
    """The counters the probes increment (one per region), reachable from any module."""
    counters = [0] * count
    setattr(builtins, PROBE_NAME, counters)
    return counters


def compile_probed(
    source: str, filename: str, where: Sequence[Region]
) -> tuple[CodeType, set[int]]:
    """``compile(source, filename, "exec")`` with a probe per region (none when empty),
    and the regions that got a probe (a change to a comment has no statement to probe)."""
    if not where:
        return compile(source, filename, "exec"), set()
    tree = ast.parse(source, filename)
    placements: dict[tuple[int, int], tuple[list[ast.stmt], int, int]] = {}
    blocks = list(_blocks(tree))
    for number, region in enumerate(where):
        if "after" in region:
            spot = _deletion_spot(blocks, region["after"], region["col"])
            spots = [spot] if spot else []
        else:
            spots = [
                spot
                for line in range(region["start"], region["end"] + 1)
                if (spot := _statement_at(blocks, line)) is not None
            ]
        for block, index in spots:
            index = max(index, _first_free(block))
            placements.setdefault((id(block), index), (block, index, number))
    # Insert from the back of each block so earlier indices stay valid.
    for block, index, number in sorted(placements.values(), key=lambda p: -p[1]):
        anchor = block[index] if index < len(block) else block[-1]
        block.insert(index, _probe(number, anchor))
    probed = {number for _block, _index, number in placements.values()}
    return compile(tree, filename, "exec"), probed


def _first_free(block: list[ast.stmt]) -> int:
    """The first place a probe may go: after a docstring (it must stay the docstring:
    ``argparse`` descriptions read ``__doc__``) and ``from __future__`` imports (which
    must come first)."""
    index = 0
    for statement in block:
        docstring = (
            index == 0
            and isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str)
        )
        future = isinstance(statement, ast.ImportFrom) and statement.module == "__future__"
        if not (docstring or future):
            break
        index += 1
    return index


def _probe(number: int, anchor: ast.stmt) -> ast.stmt:
    target = ast.Subscript(
        value=ast.Name(id=PROBE_NAME, ctx=ast.Load()),
        slice=ast.Constant(value=number),
        ctx=ast.Store(),
    )
    node = ast.AugAssign(target=target, op=ast.Add(), value=ast.Constant(value=1))
    for child in ast.walk(node):  # one line: the anchor's first line
        child.lineno = child.end_lineno = anchor.lineno
        child.col_offset = child.end_col_offset = anchor.col_offset
    return node


def _blocks(tree: ast.AST) -> Iterator[tuple[ast.AST, list[ast.stmt]]]:
    """Every statement list with the node that owns it."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield node, block
        for handler in getattr(node, "handlers", ()):
            yield handler, handler.body
        for case in getattr(node, "cases", ()):
            yield case, case.body


def _statement_at(
    blocks: list[tuple[ast.AST, list[ast.stmt]]], line: int
) -> tuple[list[ast.stmt], int] | None:
    """The innermost statement spanning ``line`` (a compound statement's header lines
    belong to it): its block and index."""
    best: tuple[int, list[ast.stmt], int] | None = None
    for _owner, block in blocks:
        for index, statement in enumerate(block):
            end = statement.end_lineno or statement.lineno
            if statement.lineno <= line <= end:
                span = end - statement.lineno
                if best is None or span < best[0]:
                    best = (span, block, index)
    return (best[1], best[2]) if best else None


def _deletion_spot(
    blocks: list[tuple[ast.AST, list[ast.stmt]]], after: int, col: int
) -> tuple[list[ast.stmt], int] | None:
    """Where statements deleted after line ``after`` at indentation ``col`` used to be:
    a block at that indentation with a statement ending on ``after`` or starting right
    after it; the deepest such block."""
    best: tuple[int, list[ast.stmt], int] | None = None
    for owner, block in blocks:
        if block[0].col_offset != col:
            continue
        index = sum(1 for statement in block if (statement.end_lineno or 0) <= after)
        adjacent = (index < len(block) and block[index].lineno == after + 1) or (
            index > 0 and block[index - 1].end_lineno == after
        )
        if not adjacent:
            continue
        depth = getattr(owner, "lineno", 0)
        if best is None or depth > best[0]:
            best = (depth, block, index)
    return (best[1], best[2]) if best else None


def summary(counts: Sequence[int | None] | None) -> dict[str, Any]:
    """The result row's view: ``reached`` (True when a probe ran; False when every region
    had a probe and none ran; None when nothing was probed or no count came back) and
    ``reach_hits`` (executions of the mutated statements). ``None`` marks an unprobed
    region."""
    known = [int(count) for count in counts or () if count is not None]
    if not known:
        return {"reached": None, "reach_hits": None}
    hits = sum(known)
    if hits == 0 and len(known) < len(counts or ()):
        return {"reached": None, "reach_hits": 0}
    return {"reached": hits > 0, "reach_hits": hits}
