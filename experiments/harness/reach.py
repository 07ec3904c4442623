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

Each probe also asks whether autograd is off (``torch.is_grad_enabled``, one C call);
only then ``EvalHits`` counts the hit as one *during evaluation* when no module forward
and no backward is running (``Forwards`` tracks both). A number the script reports that
was computed while its changed lines ran that way went through the mutated code: it
cannot vouch for the mutant (docs/truth.md). A changed line inside a forward is not
counted: an honest evaluation of a mutated model still measures that model.
"""

from __future__ import annotations

import ast
import builtins
import difflib
from collections.abc import Iterator, Sequence
from types import CodeType
from typing import Any

PROBE_NAME = "__trainwreck_reach__"
EVAL_NAME = "__trainwreck_reach_eval__"
GRAD_NAME = "__trainwreck_grad_on__"
Region = dict[str, int]


class EvalHits:
    """Per region, the hits with autograd off outside any module forward or backward; the
    probes call it only when autograd is off. ``forwards`` (the telemetry's ``Forwards``:
    ``_depth`` and ``in_backward``) is None until the telemetry is watched: without it a
    forward cannot be told apart, so nothing is counted and the count is unknown."""

    __slots__ = ("counts", "forwards")

    def __init__(self, count: int) -> None:
        self.counts = [0] * count
        self.forwards: Any = None

    def __call__(self, number: int) -> None:
        forwards = self.forwards
        if forwards is not None and not forwards._depth and not forwards.in_backward:
            self.counts[number] += 1


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
    """The counters the probes increment (one per region), reachable from any module;
    hits during evaluation are not asked for (``install`` counts them), so a process that
    only needs to know whether the lines ran (``trainwreck test``) imports no torch."""
    counters = [0] * count
    setattr(builtins, PROBE_NAME, counters)
    setattr(builtins, GRAD_NAME, _not_asked)
    return counters


def install(count: int) -> tuple[list[int], EvalHits]:
    """``install_counters`` and the evaluation counters (``EvalHits``) of the same probes."""
    import torch  # the run's process has it already; the parent's planning needs none

    counters = install_counters(count)
    evaluating = EvalHits(count)
    setattr(builtins, EVAL_NAME, evaluating)
    setattr(builtins, GRAD_NAME, torch.is_grad_enabled)
    return counters, evaluating


def _not_asked() -> bool:
    """The probes' autograd check where evaluation hits are not counted: never off."""
    return True


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
        block[index:index] = _probe(number, anchor)
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


def _probe(number: int, anchor: ast.stmt) -> list[ast.stmt]:
    """``__trainwreck_reach__[k] += 1`` and ``__trainwreck_grad_on__() or
    __trainwreck_reach_eval__(k)`` (the second call only with autograd off)."""
    target = ast.Subscript(
        value=ast.Name(id=PROBE_NAME, ctx=ast.Load()),
        slice=ast.Constant(value=number),
        ctx=ast.Store(),
    )
    count = ast.AugAssign(target=target, op=ast.Add(), value=ast.Constant(value=1))
    grad_on = ast.Call(func=ast.Name(id=GRAD_NAME, ctx=ast.Load()), args=[], keywords=[])
    evaluating = ast.Call(
        func=ast.Name(id=EVAL_NAME, ctx=ast.Load()), args=[ast.Constant(value=number)], keywords=[]
    )
    check = ast.Expr(value=ast.BoolOp(op=ast.Or(), values=[grad_on, evaluating]))
    for node in (count, check):
        for child in ast.walk(node):  # one line: the anchor's first line
            child.lineno = child.end_lineno = anchor.lineno
            child.col_offset = child.end_col_offset = anchor.col_offset
    return [count, check]


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


def eval_summary(
    counts: Sequence[int | None] | None, eval_counts: Sequence[int] | None
) -> dict[str, int | None]:
    """``reach_eval_hits``: executions of the probed mutated statements during evaluation
    (``EvalHits``); None when nothing was probed or the evaluation was not watched."""
    if not counts or eval_counts is None or len(eval_counts) != len(counts):
        return {"reach_eval_hits": None}
    probed = [int(hits) for count, hits in zip(counts, eval_counts) if count is not None]
    return {"reach_eval_hits": sum(probed) if probed else None}
