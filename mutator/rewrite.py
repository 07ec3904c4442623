"""A mutant's edits applied to a libcst tree: the transformer the engine's spliced rendering
runs on each edited statement, and the whole-module render the tests compare it with."""

from __future__ import annotations

from typing import Any

import libcst as cst

from mutator.operator import Replacement


def render_module(
    module: cst.Module, edits: dict[int, tuple[cst.CSTNode, Replacement]], path: set[int]
) -> str:
    """The mutated source by re-rendering the whole module (the reference implementation)."""
    return module.visit(Apply(edits, path)).code


class Apply(cst.CSTTransformer):
    """Replaces the edited nodes; descends only along paths that lead to an edit.

    A removed statement leaves its leading blank and comment lines where they were: they
    go to the next statement of its block (or the block's footer). Removing them too made
    the mutant's first changed line the blank one above the statement (issue 30), so a
    runner choosing tests by changed line picked those of the wrong line.
    """

    def __init__(self, edits: dict[int, tuple[cst.CSTNode, Replacement]], path: set[int]):
        super().__init__()
        self._edits = edits
        self._path = path
        self._stack: list[cst.CSTNode] = []
        # id(original block) -> lines of removed statements waiting for the next one.
        self._carried: dict[int, list[cst.EmptyLine]] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        self._stack.append(node)
        return id(node) in self._path and id(node) not in self._edits

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        self._stack.pop()
        result = self._replaced(original_node, updated_node)
        if not isinstance(original_node, cst.BaseStatement) or not self._stack:
            return self._closed(original_node, result)
        block = id(self._stack[-1])
        if isinstance(result, cst.RemovalSentinel):
            lines = list(getattr(original_node, "leading_lines", ()))
            if lines:
                self._carried.setdefault(block, []).extend(lines)
            return result
        carried = self._carried.pop(block, None)
        return _with_leading(result, carried) if carried else result

    def _replaced(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        edit = self._edits.get(id(original_node))
        if edit is not None:
            return edit[1]
        if id(original_node) not in self._path:
            return updated_node
        # A removal may empty a statement line: keep the code valid.
        if isinstance(updated_node, cst.SimpleStatementLine) and not updated_node.body:
            return cst.RemoveFromParent()
        return updated_node

    def _closed(self, original_node: cst.CSTNode, result: Any) -> Any:
        """A block gets a ``pass`` when a removal emptied it, and the lines its removed last
        statements left behind."""
        if not isinstance(result, (cst.IndentedBlock, cst.Module)):
            return result
        carried = self._carried.pop(id(original_node), [])
        if isinstance(result, cst.IndentedBlock) and not result.body:
            return result.with_changes(
                body=[cst.SimpleStatementLine([cst.Pass()], leading_lines=carried)]
            )
        return result.with_changes(footer=[*carried, *result.footer]) if carried else result


def _with_leading(result: Any, lines: list[cst.EmptyLine]) -> Any:
    """``result`` (a statement, or several) with ``lines`` above its first statement."""
    if isinstance(result, cst.FlattenSentinel) and result.nodes:
        first, *rest = result.nodes
        return cst.FlattenSentinel([_with_leading(first, lines), *rest])
    if isinstance(result, cst.BaseStatement) and hasattr(result, "leading_lines"):
        return result.with_changes(leading_lines=[*lines, *result.leading_lines])
    return result
