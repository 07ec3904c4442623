"""Parse once, find every site of every operator in one pass, apply sites by node identity.

Identity of a mutant: ``<target>::<scope>::<operator>#<ordinal>`` where the ordinal counts
sites of that operator inside the enclosing function, so editing an unrelated function
never renumbers a mutant. Higher-order mutants join their parts with ``+``.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper

from mutator.context import Context
from mutator.cst_internals import code_at_depth, statement_offsets
from mutator.diff import unified_diff_lines
from mutator.errors import MutationError
from mutator.gate import NON_SITE, OFF_CONTEXT, Rejected, off_context, screen
from mutator.higher_order import choose_higher_order  # noqa: F401  (callers import it here)
from mutator.operator import Edits, NonSite, Operator, Replacement
from mutator.rewrite import Apply, render_module
from mutator.semantics.roles import site_context
from mutator.site import Site, Span
from mutator.splice import Lines, TextEdit

PRAGMA = re.compile(r"#\s*trainwreck:\s*skip\b")
PART_SEPARATOR = "+"


@dataclass
class Survey:
    """What ``SourceFile.survey`` found: the sites, and the places it rejected."""

    sites: list[Site]
    rejected: list[Rejected]


@dataclass(frozen=True)
class Mutant:
    identity: str
    parts: tuple[str, ...]
    operators: tuple[str, ...]
    categories: tuple[str, ...]
    source: str
    sha256: str
    diff: str
    lines: tuple[int, ...]  # lines of the original that changed (or precede an insertion)
    mutant_lines: tuple[int, ...]  # the same places, numbered in the mutated source
    params: tuple[dict[str, Any], ...] = ()
    contexts: tuple[str, ...] = ()  # each part's static context (``Site.context``)
    # ``source`` as edits to the original's text: a sweep keeps these, not the source.
    edits: tuple[TextEdit, ...] = field(default=(), compare=False, repr=False)

    def manifest_entry(self) -> dict[str, Any]:
        return {
            "identity": self.identity,
            "parts": list(self.parts),
            "operators": list(self.operators),
            "categories": list(self.categories),
            "params": [dict(p) for p in self.params],
            "contexts": list(self.contexts),
            "lines": list(self.lines),
            "mutant_lines": list(self.mutant_lines),
            "sha256": self.sha256,
        }


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Indexer(cst.CSTVisitor):
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


class SourceFile:
    """A parsed training script: find sites and build mutants without re-parsing."""

    def __init__(self, source: str, target: str = "<string>") -> None:
        self.source = source
        self.target = target
        try:
            # Python's own parser gives the clearest message and location.
            compile(source, target, "exec", dont_inherit=True)
        except SyntaxError as error:
            raise MutationError(
                f"{target}:{error.lineno}:{error.offset or 0}: syntax error: {error.msg}"
            ) from None
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError as error:
            raise MutationError(
                f"{target}:{error.raw_line}:{error.raw_column + 1}: syntax error: "
                f"{error.message.splitlines()[0] if error.message else 'invalid syntax'}"
            ) from None
        # A freshly parsed tree is ours alone: no defensive deep copy needed.
        self._wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self.module = self._wrapper.module
        indexer = _Indexer()
        self.module.visit(indexer)
        self._scope_of = indexer.scope_of
        self.context = Context(self._wrapper, indexer.by_type, indexer.parent_of)
        self._statement_offsets: dict[int, tuple[int, int]] | None = None
        self._lines: Lines | None = None
        self.pragma_lines = {
            number for number, line in enumerate(source.splitlines(), 1) if PRAGMA.search(line)
        }

    @classmethod
    def from_path(cls, path: str, target: str | None = None) -> SourceFile:
        with open(path, encoding="utf-8") as handle:
            return cls(handle.read(), target or path.replace("\\", "/").rsplit("/", 1)[-1])

    # -- sites ----------------------------------------------------------------------
    def find_sites(self, operators: Sequence[Operator]) -> list[Site]:
        """Every site of every operator, in document order, with stable identities; the
        places rejected on the way (``survey``) are left out."""
        return self.survey(operators).sites

    def survey(self, operators: Sequence[Operator]) -> Survey:
        """The sites of ``operators`` and, apart, the places rejected with their reasons:
        declared non-sites and sites the static gate (``mutator.gate``) turns down. A
        rejected place keeps its ordinal, so rejecting one never renames another mutant."""
        ctx = self.context
        survey = Survey([], [])
        counters: dict[tuple[str, str], int] = defaultdict(int)
        candidates: list[tuple[tuple[int, int], int, Operator, cst.CSTNode, Edits | NonSite]] = []
        for order, operator in enumerate(operators):
            plan = operator.plan  # looked up once: it runs for every candidate node
            for node_type in operator.node_types:
                for node in ctx.nodes(node_type):
                    # One analysis per candidate: plan decides and builds the edits at once.
                    edits = plan(node, ctx)
                    if edits:
                        where = ctx.position(node).start
                        candidates.append(
                            ((where.line, where.column), order, operator, node, edits)
                        )
        candidates.sort(key=lambda item: (item[0], item[1]))
        for (line, column), _, operator, node, edits in candidates:
            context = site_context(node, ctx)
            scope = self._scope_of.get(id(node), "<module>")
            key = (scope, operator.label)
            ordinal = counters[key]
            counters[key] += 1
            site = Site(operator, node, scope, ordinal, line, column, self.target)
            site.context = context
            if context not in operator.contexts:
                # e.g. a slice in a plotting helper is no training data
                survey.rejected.append(Rejected(site, OFF_CONTEXT, off_context(operator, context)))
                continue
            if isinstance(edits, NonSite):
                survey.rejected.append(Rejected(site, NON_SITE, edits.reason))
                continue
            self._set_edits(site, edits)
            if self._skipped(site):
                continue
            found = screen(site, ctx)
            if found is not None:
                survey.rejected.append(Rejected(site, *found))
                continue
            survey.sites.append(site)
        return survey

    def _set_edits(self, site: Site, edits: Edits) -> None:
        site.edits = {id(node): (node, replacement) for node, replacement in edits.items()}
        spans = []
        for node, _ in site.edits.values():
            where = self.context.position(node)
            spans.append(
                Span((where.start.line, where.start.column), (where.end.line, where.end.column))
            )
        site.footprint = tuple(spans)

    def _skipped(self, site: Site) -> bool:
        if not self.pragma_lines:
            return False
        lines = {site.line}
        for span in site.footprint:
            lines.add(span.start[0])
        return bool(lines & self.pragma_lines)

    # -- mutants --------------------------------------------------------------------
    def apply(self, sites: Sequence[Site]) -> Mutant:
        """One mutant from one site, or a higher-order one from non-overlapping sites."""
        if not sites:
            raise MutationError("no sites to apply")
        for index, first in enumerate(sites):
            for second in sites[index + 1 :]:
                if first.overlaps(second):
                    raise MutationError(f"sites overlap: {first.identity} and {second.identity}")
        source, changed, text_edits = self._render(*self._edits_and_path(sites))
        identity = PART_SEPARATOR.join(site.identity for site in sites)
        try:
            compile(changed, self.target, "exec")
        except SyntaxError as error:
            raise MutationError(
                f"engine bug: mutant {identity} does not compile ({error.msg}, line {error.lineno})"
            ) from None
        if source == self.source:
            raise MutationError(f"engine bug: mutant {identity} equals the original")
        new_lines, head, tail = self.lines.of_mutant(source, text_edits, keepends=True)
        diff, lines, mutant_lines = unified_diff_lines(
            self.lines.kept, new_lines, self.target, head, tail
        )
        return Mutant(
            identity=identity,
            parts=tuple(site.identity for site in sites),
            operators=tuple(site.operator.name for site in sites),
            categories=tuple(site.operator.category for site in sites),
            source=source,
            sha256=sha256(source),
            diff=diff,
            lines=lines,
            mutant_lines=mutant_lines,
            params=tuple(dict(site.operator.params) for site in sites),
            contexts=tuple(site.context for site in sites),
            edits=text_edits,
        )

    @property
    def lines(self) -> Lines:
        """The original's lines, split once for every mutant's diff."""
        if self._lines is None:
            self._lines = Lines(self.source)
        return self._lines

    def _edits_and_path(self, sites: Sequence[Site]):
        edits: dict[int, tuple[cst.CSTNode, Replacement]] = {}
        for site in sites:
            edits.update(site.edits)
        path = set()
        for node, _ in edits.values():
            path.add(id(node))
            path.update(id(ancestor) for ancestor in self.context.ancestors(node))
        return edits, path

    def render_whole_module(self, sites: Sequence[Site]) -> str:
        """The mutated source by re-rendering the whole tree: slow, the reference that the
        spliced rendering of ``apply`` must equal (the tests check it on every mutant)."""
        return render_module(self.module, *self._edits_and_path(sites))

    # -- rendering ------------------------------------------------------------------
    def _render(
        self, edits: dict[int, tuple[cst.CSTNode, Replacement]], path: set[int]
    ) -> tuple[str, str, tuple[TextEdit, ...]]:
        """The mutated source (edited statements re-rendered and spliced into the original
        text, or the whole module when an edit reaches module level), and the module-level
        statements that changed: those must compile (the whole mutant, per mutant, made
        planning quadratic), and the source as edits to the original's text."""
        units = self._splice_units(edits)
        if units is None:
            whole = render_module(self.module, edits, path)
            return whole, whole, ((0, len(self.source), whole),)
        offsets = self._offsets()
        pieces, cursor, shifts, spliced = [], 0, [], []
        for unit in sorted(units, key=lambda node: offsets[id(node)][0]):
            start, end = offsets[id(unit)]
            transformed = unit.visit(Apply(edits, path))
            if not isinstance(transformed, cst.CSTNode):
                whole = render_module(self.module, edits, path)
                return whole, whole, ((0, len(self.source), whole),)
            pieces.append(self.source[cursor:start])
            pieces.append(self._codegen_nested(unit, transformed))
            spliced.append((start, end, pieces[-1]))
            shifts.append((end, len(pieces[-1]) - (end - start)))
            cursor = end
        pieces.append(self.source[cursor:])
        source = "".join(pieces)

        def moved(offset: int) -> int:  # an original offset outside every unit, in the mutant
            return offset + sum(delta for end, delta in shifts if end <= offset)

        tops = {id(top): top for top in (self._top_statement(unit) for unit in units)}
        spans = sorted(offsets[key] for key in tops)
        changed = "\n".join(source[moved(start) : moved(end)] for start, end in spans)
        return source, changed, tuple(spliced)

    def _top_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The module-level statement that holds ``node``."""
        outer = [a for a in self.context.ancestors(node) if isinstance(a, cst.BaseStatement)]
        return outer[-1] if outer else node

    def _splice_units(self, edits: dict[int, tuple[cst.CSTNode, Replacement]]) -> list | None:
        """The outermost statements to re-render, or None for a whole-module render."""
        ctx = self.context
        units: dict[int, cst.CSTNode] = {}
        for node, replacement in edits.values():
            # A removed or multiplied node changes its container: re-render the statement above.
            start = node if isinstance(replacement, cst.CSTNode) else ctx.parent(node)
            unit = start if isinstance(start, cst.BaseStatement) else None
            if unit is None and start is not None:
                unit = ctx.enclosing(start, cst.BaseStatement)
            if unit is None:
                return None
            if not isinstance(replacement, cst.CSTNode) and unit is node:
                unit = ctx.enclosing(node, cst.BaseStatement)
            if unit is None:
                return None
            while isinstance(unit, cst.If) and isinstance(ctx.parent(unit), cst.If):
                unit = ctx.parent(unit)  # an ``elif`` rendered alone would read ``if``
            units[id(unit)] = unit
        outermost = []
        for unit in units.values():
            if not any(id(ancestor) in units for ancestor in ctx.ancestors(unit)):
                outermost.append(unit)
        return outermost

    def _offsets(self) -> dict[int, tuple[int, int]]:
        if self._statement_offsets is None:
            code, self._statement_offsets = statement_offsets(self.module)
            if code != self.source:
                raise MutationError("engine bug: libcst did not round-trip the source")
        return self._statement_offsets

    def _codegen_nested(self, original: cst.CSTNode, node: cst.CSTNode) -> str:
        """Render a statement as it appears at ``original``'s depth in the module."""
        indents = [
            block.indent if block.indent is not None else self.module.default_indent
            for block in reversed(list(self.context.ancestors(original)))
            if isinstance(block, cst.IndentedBlock)
        ]
        return code_at_depth(self.module, node, indents)
