"""Gate check ``unbound_name``: the mutant reads no name that is unbound where it reads it,
and removes no binding that a line it keeps still reads.

New code in a replacement (a pipeline copied from another function, a counterpart name)
is checked against LibCST's scope of the place it lands; nodes the rewrite kept from the
original read what they read before. A name the original itself read at that place counts
as bound: the gate rejects what the rewrite broke, not what the script already relies on.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import keyword
from collections.abc import Iterator, Sequence

import libcst as cst

from mutator.context import Context
from mutator.operator import Replacement
from mutator.semantics.cache import per_module, per_node

Edit = tuple[cst.CSTNode, Replacement]
_BUILTINS = frozenset(dir(builtins))


@functools.cache
def _child_fields(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind))


def _children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The child nodes of ``node`` from its dataclass fields: libcst's visitor protocol
    rebuilds every node it passes, which cost more than the whole check."""
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            yield from (item for item in value if isinstance(item, cst.CSTNode))


class _Reads:
    """Names a fresh subtree reads and binds, and every node in it (by id)."""

    def __init__(self) -> None:
        self.reads: list[cst.Name] = []
        self.binds: set[str] = set()
        self.seen: set[int] = set()

    def scan(self, node: cst.CSTNode, skip: tuple[cst.CSTNode | None, ...] = ()) -> None:
        self.seen.add(id(node))
        if isinstance(node, cst.Name):
            self.reads.append(node)
            return
        special = _SPECIAL.get(type(node))
        if special is not None and skip == ():
            special(self, node)
            return
        for child in _children(node):
            if not any(child is other for other in skip):
                self.scan(child)

    def bind(self, target: cst.CSTNode | None) -> None:
        if target is None:
            return
        self.seen.add(id(target))
        if isinstance(target, cst.Name):
            self.binds.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.seen.add(id(element))
                self.bind(element.value)
        elif isinstance(target, cst.StarredElement):
            self.bind(target.value)
        else:
            self.scan(target)  # ``self.x = ...`` reads ``self``

    def _attribute(self, node: cst.Attribute) -> None:
        self.seen.add(id(node.attr))  # ``.attr`` is no variable
        self.scan(node, skip=(node.attr,))

    def _arg(self, node: cst.Arg) -> None:
        self.seen.add(id(node.keyword))  # ``keyword=`` is no variable
        self.scan(node, skip=(node.keyword,))

    def _target(self, node: cst.CSTNode) -> None:  # Param, AssignTarget, For, CompFor, ...
        target = getattr(node, "target", getattr(node, "name", None))
        self.bind(target)
        self.scan(node, skip=(target,))

    def _import(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            self._import_alias(alias)

    def _import_alias(self, alias: cst.ImportAlias) -> None:
        """What an alias binds; its ``name`` is a module's attribute or path, no variable
        read (``from m import MLPX as MLP`` reads nothing here: it may fail to import)."""
        if alias.asname is not None:
            self.bind(alias.asname.name)
            return
        first = alias.name
        while isinstance(first, cst.Attribute):
            first = first.value
        self.binds.add(first.value)  # type: ignore[union-attr]


_BINDING_KINDS = (cst.Param, cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.NamedExpr)
_BINDING_KINDS += (cst.For, cst.CompFor, cst.AsName, cst.FunctionDef, cst.ClassDef)
_SPECIAL = {
    cst.Attribute: _Reads._attribute,
    cst.Arg: _Reads._arg,
    cst.Import: _Reads._import,
    cst.ImportFrom: _Reads._import,
    cst.ImportAlias: _Reads._import_alias,
    **dict.fromkeys(_BINDING_KINDS, _Reads._target),
}


def _new_trees(replacement: Replacement) -> Iterator[cst.CSTNode]:
    if isinstance(replacement, cst.FlattenSentinel):
        yield from replacement.nodes
    elif isinstance(replacement, cst.CSTNode):
        yield replacement


def _where(node: cst.CSTNode, ctx: Context) -> str:
    function = ctx.enclosing_function(node)
    return f"function {function.name.value}()" if function is not None else "the module"


def unbound_name(edits: Sequence[Edit], ctx: Context) -> str | None:
    """Why the mutant would raise ``NameError``/``UnboundLocalError``, or None."""
    if ctx.nodes(cst.ImportStar):
        return None  # a star import binds names nobody can list: no verdict
    reads = _Reads()
    landed: list[tuple[cst.Name, cst.CSTNode]] = []
    for original, replacement in edits:
        before = len(reads.reads)
        for tree in _new_trees(replacement):
            reads.scan(tree)
        landed += [(name, original) for name in reads.reads[before:]]
    everywhere = _BUILTINS | _module_names(ctx)
    for name, original in landed:
        if ctx.parent(name) is not None or name.value in reads.binds | everywhere:
            continue  # kept from the original, bound by the mutant, a builtin or a global
        if keyword.iskeyword(name.value):
            continue  # no name at all: the engine's compile check reports that rewrite
        if any(old.value == name.value for old in ctx.nodes_within(original, cst.Name)):
            continue
        if any(name.value in _local_names(f, ctx) for f in _functions_around(original, ctx)):
            continue  # bound in a function around it (a cheap look before scope analysis)
        scope = ctx.scope(original)
        if scope is None or name.value in scope or name.value in _free_names(ctx):
            continue  # bound there, or read unbound by the original too (given from outside)
        return (
            f"`{name.value}` is not bound in {_where(original, ctx)}: "
            "the mutant would raise NameError there"
        )
    return _lost_binding(edits, reads, ctx)


_MODULE_BINDERS = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Import, cst.ImportFrom)


def _block_names(statements: Sequence[cst.CSTNode], found: set[str]) -> None:
    """Names bound at this level (module scope): what every function can read."""
    for statement in statements:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            found.add(statement.name.value)
            continue
        if isinstance(statement, cst.SimpleStatementLine):
            collector = _Reads()
            for small in statement.body:
                if isinstance(small, _MODULE_BINDERS):
                    collector.scan(small)
            found |= collector.binds
            continue
        collector = _Reads()
        for part in ("target", "items"):  # ``for x in ...:``, ``with ... as f:`` bind too
            value = getattr(statement, part, None)
            for node in value if isinstance(value, Sequence) else [value]:
                if isinstance(node, cst.CSTNode):
                    collector.scan(node)
        found |= collector.binds
        for block in _blocks(statement):
            _block_names(block, found)


def _blocks(statement: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    """The statement lists of a compound statement (if/else, try/except, loops, with)."""
    for child in statement.children:
        if isinstance(child, cst.IndentedBlock):
            yield child.body
        elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.Finally, cst.If)):
            yield from _blocks(child)
        elif isinstance(child, cst.SimpleStatementSuite):
            yield [cst.SimpleStatementLine(body=child.body)]


def _functions_around(node: cst.CSTNode, ctx: Context) -> list[cst.FunctionDef]:
    return [a for a in ctx.ancestors(node) if isinstance(a, cst.FunctionDef)]


@per_node
def _local_names(function: cst.FunctionDef, ctx: Context) -> frozenset[str]:
    """Names bound anywhere in ``function`` (a superset of its locals: nested scopes too)."""
    collector = _Reads()
    collector.scan(function.params)
    collector.scan(function.body)
    return frozenset(collector.binds)


@per_module
def _module_names(ctx: Context) -> frozenset[str]:
    found: set[str] = set()
    _block_names(ctx.module.body, found)
    return frozenset(found)


@per_module
def _free_names(ctx: Context) -> frozenset[str]:
    """Names the original reads where nothing binds them: given from outside (an ``exec``,
    a snippet's context). A rewrite adding a read of one is judged no differently."""
    return frozenset(
        access.node.value
        for scope in ctx.all_scopes()
        for access in scope.accesses
        if not access.referents and isinstance(access.node, cst.Name)
    )


@per_module
def _assignments_by_node(ctx: Context) -> dict[int, list]:
    found: dict[int, list] = {}
    for scope in ctx.all_scopes():
        for assignment in scope.assignments:
            node = getattr(assignment, "node", None)
            if node is not None:
                found.setdefault(id(node), []).append(assignment)
    return found


_BINDERS = (cst.FunctionDef, cst.ClassDef, cst.Import, cst.ImportFrom, cst.Param)
# ``x += 1`` is no lone binding: it needs one before it to run at all.
_TARGETS = (cst.AssignTarget, cst.AnnAssign, cst.For, cst.CompFor, cst.AsName)
_TARGETS += (cst.NamedExpr,)


def _binding_nodes(original: cst.CSTNode, ctx: Context) -> list[cst.CSTNode]:
    """Nodes in ``original`` that LibCST records as bindings (targets, imports, defs)."""
    found = [original] if isinstance(original, _BINDERS) else []
    for kind in _BINDERS:
        found += ctx.nodes_within(original, kind)
    for name in ctx.nodes_within(original, cst.Name):
        node, parent = name, ctx.parent(name)
        while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            node, parent = parent, ctx.parent(parent)
        if (
            isinstance(parent, _TARGETS)
            and getattr(parent, "target", getattr(parent, "name", None)) is node
        ):
            found.append(name)
    return found


@per_node
def _binding_counts(root: cst.CSTNode, ctx: Context) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in _binding_nodes(root, ctx):
        name = node.name if isinstance(node, cst.Param) else node
        if isinstance(name, cst.Name):
            counts[name.value] = counts.get(name.value, 0) + 1
    return counts


def _bound_elsewhere(node: cst.CSTNode, dropped: list[cst.CSTNode], ctx: Context) -> bool:
    """A dropped ``x = x.to(device)`` where ``x`` is also a parameter or bound by another
    line of the function: still bound (a cheap look before scope analysis)."""
    if not isinstance(node, cst.Name):
        return False
    root = ctx.enclosing_function(node) or ctx.module
    same = sum(1 for other in dropped if isinstance(other, cst.Name) and other.value == node.value)
    return _binding_counts(root, ctx).get(node.value, 0) > same


def _rebinds(name: str, originals: list[cst.CSTNode], ctx: Context) -> bool:
    """``X = (X - mean) / std`` reads the name it binds: a binding came before it, so
    deleting this one leaves that one."""
    for original in originals:
        for node in ctx.nodes_within(original, cst.Name):
            parent = ctx.parent(node)
            if isinstance(parent, cst.AssignTarget) or (
                isinstance(parent, cst.Attribute) and parent.attr is node
            ):
                continue
            if node.value == name:
                return True
    return False


def _lost_binding(edits: Sequence[Edit], mutant: _Reads, ctx: Context) -> str | None:
    """A name whose only binding the mutant deletes (and does not bind anew) while a line
    it keeps reads it."""
    originals = [original for original, _ in edits]
    dropped = [
        node
        for original in originals
        for node in _binding_nodes(original, ctx)
        if id(node) not in mutant.seen
        and not (isinstance(node, cst.Name) and node.value in mutant.binds)
    ]
    dropped = [node for node in dropped if not _bound_elsewhere(node, dropped, ctx)]
    if not dropped:
        return None  # nothing bound was dropped: no scope analysis needed
    by_node = _assignments_by_node(ctx)
    lost = [
        a
        for node in dropped
        for a in by_node.get(id(node), [])
        if a.name not in mutant.binds and not _rebinds(a.name, originals, ctx)
    ]
    lost_ids = {id(a) for a in lost}
    for assignment in lost:
        others = [a for a in assignment.scope.assignments[assignment.name] if id(a) not in lost_ids]
        if others:
            continue
        for access in assignment.references:
            if not any(ctx.within(original, access.node) for original in originals):
                line = ctx.position(access.node).start.line
                return (
                    f"removes the only binding of `{assignment.name}`, still read at line "
                    f"{line}: the mutant would raise NameError there"
                )
    return None
