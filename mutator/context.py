"""What an operator may ask about a node: metadata, parents, neighbours. Read-only.

What names mean (imports, resolution) is ``mutator.semantics.names``."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider, ScopeProvider
from libcst.metadata.scope_provider import Scope

if TYPE_CHECKING:
    from mutator.project import Project

PROVIDERS = (PositionProvider,)


class Context:
    """Metadata for one parsed module, plus a by-type index built in the engine's one pass."""

    def __init__(
        self,
        wrapper: MetadataWrapper,
        nodes_by_type: dict[type, list[cst.CSTNode]],
        parents: dict[cst.CSTNode, cst.CSTNode],
        project: Project | None = None,
        path: str = "",
    ):
        self.module: cst.Module = wrapper.module
        # The files around this module (its imports, its callers) and its path among them:
        # ``mutator.semantics.modules`` reads them on demand; None: this file alone.
        self.project = project
        self.path = path
        self._wrapper = wrapper
        self._metadata = wrapper.resolve_many(PROVIDERS)
        self._scopes: dict[cst.CSTNode, Scope | None] | None = None
        self._nodes_by_type = nodes_by_type
        self._parents = parents
        self._span_cache: dict[type, tuple[list, list, list]] = {}
        # Analyses of this module, memoised by mutator.semantics.cache (key -> result/table).
        self.memo: dict[object, Any] = {}

    # -- metadata -------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def position(self, node: cst.CSTNode) -> CodeRange:
        return self._metadata[PositionProvider][node]

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def scope(self, node: cst.CSTNode) -> Scope | None:
        """LibCST's scope of ``node`` (names, assignments, accesses). Resolved on first use
        only: most questions about a script never need it, and it costs a pass."""
        scopes = self._scope_table()
        for current in (node, *self.ancestors(node)):
            found = scopes.get(current)
            if found is not None:
                return found
        return None

    def all_scopes(self) -> list[Scope]:
        """Every scope of the module (global, functions, classes, comprehensions)."""
        return list({id(s): s for s in self._scope_table().values() if s is not None}.values())

    def _scope_table(self) -> dict[cst.CSTNode, Scope | None]:
        if self._scopes is None:
            self._scopes = dict(self._wrapper.resolve(ScopeProvider))
        return self._scopes

    # -- structure ------------------------------------------------------------------
    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def enclosing(self, node: cst.CSTNode, kind: type | tuple[type, ...]) -> cst.CSTNode | None:
        return next((a for a in self.ancestors(node) if isinstance(a, kind)), None)

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        return self.enclosing(node, cst.FunctionDef)  # type: ignore[return-value]

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The statement (simple line or compound) that contains ``node``."""
        if isinstance(node, cst.BaseStatement):
            return node
        return self.enclosing(node, cst.BaseStatement)  # type: ignore[return-value]

    def block_of(self, statement: cst.CSTNode) -> Sequence[cst.BaseStatement]:
        """The statements of the block (function, loop, module...) holding ``statement``."""
        parent = self.parent(statement)
        if isinstance(parent, (cst.IndentedBlock, cst.Module)):
            return parent.body
        return ()

    def following_statements(self, statement: cst.CSTNode) -> Sequence[cst.BaseStatement]:
        block = list(self.block_of(statement))
        for index, candidate in enumerate(block):
            if candidate is statement:
                return block[index + 1 :]
        return ()

    def preceding_statements(self, statement: cst.CSTNode) -> Sequence[cst.BaseStatement]:
        block = list(self.block_of(statement))
        for index, candidate in enumerate(block):
            if candidate is statement:
                return block[:index]
        return ()

    def nodes(self, kind: type[cst.CSTNode]) -> list[cst.CSTNode]:
        """Every node of exactly this type in the module, in document order."""
        return self._nodes_by_type.get(kind, [])

    def within(self, node: cst.CSTNode, inner: cst.CSTNode) -> bool:
        return node is inner or any(a is node for a in self.ancestors(inner))

    def nodes_within(self, root: cst.CSTNode, kind: type[cst.CSTNode]) -> list[cst.CSTNode]:
        """Nodes of ``kind`` inside ``root``, in document order (no extra tree walk)."""
        starts, ends, nodes = self._spans(kind)
        span = self.position(root)
        low = bisect_left(starts, (span.start.line, span.start.column))
        high = bisect_right(starts, (span.end.line, span.end.column))
        limit = (span.end.line, span.end.column)
        return [nodes[i] for i in range(low, high) if ends[i] <= limit]

    def _spans(self, kind: type[cst.CSTNode]):
        cached = self._span_cache.get(kind)
        if cached is None:
            nodes = sorted(
                self.nodes(kind),
                key=lambda n: (self.position(n).start.line, self.position(n).start.column),
            )
            starts = [(self.position(n).start.line, self.position(n).start.column) for n in nodes]
            ends = [(self.position(n).end.line, self.position(n).end.column) for n in nodes]
            cached = self._span_cache[kind] = (starts, ends, nodes)
        return cached


class Indexer(cst.CSTVisitor):
    """The one pass: index every node by type and record enclosing function/class names."""

    def __init__(self) -> None:
        self.by_type: dict[type, list[cst.CSTNode]] = defaultdict(list)
        self.scope_of: dict[int, str] = {}
        self.parent_of: dict[cst.CSTNode, cst.CSTNode] = {}
        self._scopes: list[str] = []
        self._stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.by_type[type(node)].append(node)
        self.scope_of[id(node)] = ".".join(self._scopes) or "<module>"
        if self._stack:
            self.parent_of[node] = self._stack[-1]
        self._stack.append(node)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._scopes.append(node.name.value)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()
        if isinstance(original_node, (cst.FunctionDef, cst.ClassDef)):
            self._scopes.pop()
