"""The saved-mode restore idiom of an evaluation helper (private to the mode package):
``training = model.training`` ... ``if training: model.train()``."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits
from mutator.semantics import code_of, single_assignment


def saved_mode_restore(line: cst.CSTNode, model: str, ctx: Context) -> Edits | None:
    """For ``line`` (``<model>.train()``) that is the whole body of ``if <flag>:``, where
    ``<flag> = <model>.training`` was saved earlier in the function and is read nowhere
    else: the edits that delete both, the restore and the saved flag (a helper that never
    restores the mode it found). None for any other ``train()``."""
    block = ctx.parent(line)
    guard = ctx.parent(block) if isinstance(block, cst.IndentedBlock) else None
    if not isinstance(guard, cst.If) or guard.orelse is not None or len(block.body) != 1:  # type: ignore[union-attr]
        return None
    if not isinstance(guard.test, cst.Name):
        return None
    flag = guard.test.value
    function = ctx.enclosing_function(guard)
    if function is None:
        return None
    saved = [
        statement
        for statement in ctx.nodes_within(function, cst.SimpleStatementLine)
        if _saves_mode(statement, flag, model)
    ]
    if len(saved) != 1:
        return None
    readers = [
        name
        for name in ctx.nodes_within(function, cst.Name)
        if name.value == flag  # type: ignore[attr-defined]
        and not ctx.within(saved[0], name)
        and name is not guard.test
    ]
    if readers:
        return None
    return {guard: cst.RemoveFromParent(), saved[0]: cst.RemoveFromParent()}


def _saves_mode(statement: cst.CSTNode, flag: str, model: str) -> bool:
    assign = single_assignment(statement)
    if assign is None or len(assign.targets) != 1:
        return False
    target, value = assign.targets[0].target, assign.value
    return (
        isinstance(target, cst.Name)
        and target.value == flag
        and isinstance(value, cst.Attribute)
        and value.attr.value == "training"
        and code_of(value.value) == model
    )
