"""Pins the libcst behaviour the engine's spliced rendering relies on (mutator/cst_internals.py).

A libcst upgrade that changes CodegenState, its hooks or ``_codegen`` fails here, with a
message naming the version, before it can corrupt a mutant.
"""

from __future__ import annotations

from importlib.metadata import version

import libcst as cst
from libcst._nodes.internal import CodegenState

from mutator.cst_internals import code_at_depth, statement_offsets

LIBCST = version("libcst")

SOURCE = """\
import torch  # a comment


def train(model, loader):
    for x, y in loader:
        if x is not None:
            loss = model(x)  # trailing
            loss.backward()

        # a comment line
        step()
    return model
"""


def _statements(module: cst.Module) -> list[tuple[cst.CSTNode, list[str]]]:
    """Every statement with the indents of the blocks around it (outermost first)."""
    found: list[tuple[cst.CSTNode, list[str]]] = []

    class Walk(cst.CSTVisitor):
        def __init__(self) -> None:
            self.indents: list[str] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.BaseStatement):
                found.append((node, list(self.indents)))
            if isinstance(node, cst.IndentedBlock):
                self.indents.append(node.indent or module.default_indent)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            if isinstance(original_node, cst.IndentedBlock):
                self.indents.pop()

    module.visit(Walk())
    return found


def test_the_private_api_still_has_the_shape_the_adapter_uses():
    assert LIBCST.split(".")[0] == "1", f"adapter written for libcst 1.x, found {LIBCST}"
    fields = CodegenState.__dataclass_fields__
    assert {"default_indent", "default_newline", "indent_tokens", "tokens"} <= set(fields), LIBCST
    assert callable(CodegenState.before_codegen) and callable(CodegenState.after_codegen)
    assert callable(cst.Module._codegen)


def test_offsets_cover_each_statement_exactly_and_the_code_round_trips():
    module = cst.parse_module(SOURCE)
    code, offsets = statement_offsets(module)
    assert code == SOURCE
    statements = _statements(module)
    assert len(statements) == 8 and set(offsets) == {id(node) for node, _ in statements}
    for node, indents in statements:
        start, end = offsets[id(node)]
        # The recorded span is exactly the statement's code at its depth.
        assert code[start:end] == code_at_depth(module, node, indents), LIBCST


def test_code_at_depth_indents_a_changed_statement_like_its_neighbours():
    module = cst.parse_module(SOURCE)
    (line, indents) = next(
        (node, indents)
        for node, indents in _statements(module)
        if isinstance(node, cst.SimpleStatementLine) and "backward" in module.code_for_node(node)
    )
    changed = line.with_changes(body=[cst.Expr(cst.parse_expression("loss.sum().backward()"))])
    assert code_at_depth(module, changed, indents) == "            loss.sum().backward()\n"
