"""Where an ``eval()`` can run: inside a loop, directly or through the script's own
functions (private to the mode package)."""

from __future__ import annotations

import libcst as cst

from mutations.mode._shared import model_mode_statement
from mutator.context import Context
from mutator.semantics import callee_name, code_of, drives_training, receiver


def _functions_called(root: cst.CSTNode, ctx: Context) -> list[cst.FunctionDef]:
    """The script's own functions/methods called inside ``root`` (by their last name)."""
    names = {callee_name(call) for call in ctx.nodes_within(root, cst.Call)}  # type: ignore[arg-type]
    return [f for f in ctx.nodes(cst.FunctionDef) if f.name.value in names]  # type: ignore[attr-defined]


def evals_run_in(root: cst.CSTNode, model: str, ctx: Context) -> list[cst.CSTNode]:
    """The ``<model>.eval()`` statements that running ``root`` can execute: written inside it,
    or inside a function it calls (two calls deep). ``model`` is the receiver's code."""
    seen: list[cst.CSTNode] = [root]
    found: list[cst.CSTNode] = []
    frontier = [root]
    for _depth in range(3):
        following: list[cst.CSTNode] = []
        for block in frontier:
            for line in ctx.nodes_within(block, cst.SimpleStatementLine):
                call = model_mode_statement(line, ctx, "eval")
                if call is not None and code_of(receiver(call)) == model and line not in found:
                    found.append(line)
            for function in _functions_called(block, ctx):
                if not any(function is other for other in seen):
                    seen.append(function)
                    following.append(function)
        frontier = following
    return found


def restored_after(evaluation: cst.CSTNode, model: str, ctx: Context) -> bool:
    """Does a later line of the block holding ``evaluation`` switch ``model`` back with
    ``train()``, with no training step or ``return`` between (a helper that cleans up)?"""
    for statement in ctx.following_statements(evaluation):
        switch = model_mode_statement(statement, ctx, "train")
        if switch is not None and code_of(receiver(switch)) == model:
            return True
        if drives_training(statement, ctx) or ctx.nodes_within(statement, cst.Return):
            return False
    return False
