"""The libcst internals the engine's spliced rendering needs, behind two functions.

libcst has no public way to render one statement as it appears at its depth in a module,
or to learn where each statement's text lies in the module's code; both need
``libcst._nodes.internal.CodegenState`` (its ``indent_tokens`` and its
``before_codegen``/``after_codegen`` hooks) and ``CSTNode._codegen``. Nothing else in the
tree touches libcst's private names; tests/test_cst_internals.py pins the behaviour relied
on, so a libcst upgrade that changes it fails there first.
"""

from __future__ import annotations

from typing import Any

import libcst as cst
from libcst._nodes.internal import CodegenState


class _OffsetState(CodegenState):
    """A codegen pass that records where each statement's text starts and ends."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.offsets: dict[int, tuple[int, int]] = {}
        self._starts: dict[int, int] = {}
        self._counted = 0  # tokens whose length is in _length
        self._length = 0

    # Tokens also arrive through add_indent_tokens and leave through pop_trailing_newline,
    # so the position is the length of the tokens so far, not a counter kept in add_token.
    # It is summed incrementally (the list only grows until the module's final pop):
    # summing every token per statement made this quadratic in the file's size.
    def _position(self) -> int:
        tokens = self.tokens
        if len(tokens) < self._counted:  # a token was popped: count again
            self._counted, self._length = 0, 0
        self._length += sum(map(len, tokens[self._counted :]))
        self._counted = len(tokens)
        return self._length

    def before_codegen(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseStatement):
            self._starts[id(node)] = self._position()

    def after_codegen(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.BaseStatement):
            self.offsets[id(node)] = (self._starts.pop(id(node)), self._position())


def statement_offsets(module: cst.Module) -> tuple[str, dict[int, tuple[int, int]]]:
    """The module's code and, by ``id`` of each statement node, its ``(start, end)`` in it."""
    state = _OffsetState(
        default_indent=module.default_indent, default_newline=module.default_newline
    )
    module._codegen(state)
    return "".join(state.tokens), state.offsets


def code_at_depth(module: cst.Module, node: cst.CSTNode, indents: list[str]) -> str:
    """``node``'s code as it reads inside blocks indented by ``indents`` (outermost first)."""
    state = CodegenState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        indent_tokens=indents,
    )
    node._codegen(state)
    return "".join(state.tokens)
