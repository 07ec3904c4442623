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
    """Replaces the edited nodes; descends only along paths that lead to an edit."""

    def __init__(self, edits: dict[int, tuple[cst.CSTNode, Replacement]], path: set[int]):
        super().__init__()
        self._edits = edits
        self._path = path

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) in self._path and id(node) not in self._edits

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        edit = self._edits.get(id(original_node))
        if edit is not None:
            return edit[1]
        if id(original_node) not in self._path:
            return updated_node
        # A removal may empty a statement line or a block: keep the code valid.
        if isinstance(updated_node, cst.SimpleStatementLine) and not updated_node.body:
            return cst.RemoveFromParent()
        if isinstance(updated_node, cst.IndentedBlock) and not updated_node.body:
            return updated_node.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return updated_node
