"""Names and resolution: the script's one import table and one ``resolve``."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits
from mutator.semantics.cache import per_module, per_node
from mutator.semantics.edits import with_imported_name
from mutator.semantics.scope import enclosing_function
from mutator.semantics.syntax import callee_name, dotted_name, last_name

# -- the import table ---------------------------------------------------------------------

_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class ImportBinding:
    """One name an import statement binds."""

    local: str  # the name the import binds: ``F``, ``nn``, ``CrossEntropyLoss``
    qualified: str  # what it stands for: ``torch.nn.functional`` (``.utils.f`` when relative)
    statement: cst.Import | cst.ImportFrom
    at_module_level: bool

    @property
    def relative(self) -> bool:
        return self.qualified.startswith(".")


@dataclass(frozen=True)
class ImportTable:
    """Every import of a script (any scope), in document order, plus the names it defines."""

    all_bindings: tuple[ImportBinding, ...]  # relative imports included
    star_modules: tuple[str, ...]  # ``from torch.nn import *`` -> ``torch.nn``
    local_definitions: frozenset[str]  # functions and classes the script defines itself
    local_names: frozenset[str]  # those plus assigned names and parameters (shadow builtins)

    @functools.cached_property
    def bindings(self) -> tuple[ImportBinding, ...]:
        """The absolute imports: the ones whose module an edit can spell."""
        return tuple(binding for binding in self.all_bindings if not binding.relative)

    @functools.cached_property
    def by_local(self) -> dict[str, frozenset[str]]:
        """Local name -> every qualified name it was imported as."""
        found: dict[str, set[str]] = {}
        for binding in self.all_bindings:
            found.setdefault(binding.local, set()).add(binding.qualified)
        return {local: frozenset(names) for local, names in found.items()}


@per_module
def imports(ctx: Context) -> ImportTable:
    """The script's one import table (built once per parsed module)."""
    bindings: list[ImportBinding] = []
    stars: list[str] = []
    for statement in [*ctx.nodes(cst.Import), *ctx.nodes(cst.ImportFrom)]:
        line = ctx.parent(statement)
        at_top = line is not None and isinstance(ctx.parent(line), cst.Module)
        if isinstance(statement, cst.Import):
            for alias in statement.names:
                full = dotted_name(alias.name) or ""
                if alias.asname is not None:
                    local = dotted_name(alias.asname.name) or full  # type: ignore[arg-type]
                    bindings.append(ImportBinding(local, full, statement, at_top))
                else:  # ``import torch.nn`` binds ``torch``
                    head = full.split(".")[0]
                    bindings.append(ImportBinding(head, head, statement, at_top))
            continue
        assert isinstance(statement, cst.ImportFrom)
        named = dotted_name(statement.module) if statement.module is not None else None
        module = "." * len(statement.relative) + (named or "")
        if isinstance(statement.names, cst.ImportStar):
            if not statement.relative and named is not None:
                stars.append(module)
            continue
        for alias in statement.names:
            name = dotted_name(alias.name) or ""
            local = dotted_name(alias.asname.name) if alias.asname is not None else name  # type: ignore[arg-type]
            bindings.append(ImportBinding(local or name, f"{module}.{name}", statement, at_top))
    defined = frozenset(
        node.name.value  # type: ignore[attr-defined]
        for kind in (cst.FunctionDef, cst.ClassDef)
        for node in ctx.nodes(kind)
    )
    assigned = {
        target.target.value  # type: ignore[attr-defined]
        for target in ctx.nodes(cst.AssignTarget)
        if isinstance(target.target, cst.Name)  # type: ignore[attr-defined]
    }
    params = {param.name.value for param in ctx.nodes(cst.Param)}  # type: ignore[attr-defined]
    return ImportTable(tuple(bindings), tuple(stars), defined, defined | assigned | params)


# -- resolution -------------------------------------------------------------------------------


class Resolution(NamedTuple):
    """What an expression names: qualified ``names`` (empty when nothing explains it) and
    the ``tail`` (last name) that decides a match when nothing resolves. (A named tuple:
    the engine builds tens of thousands per sweep, and tuples are the cheapest to build.)"""

    names: frozenset[str]
    tail: str | None

    def matches(self, wanted: Iterable[str]) -> bool:
        """Is it one of ``wanted`` (qualified names)? Resolved names decide; else the tail
        is compared with the last part of each wanted name."""
        if self.names:
            return not self.names.isdisjoint(wanted)
        return bool(self.tail) and self.tail in _tails(frozenset(wanted))

    def under(self, prefix: str) -> bool:
        """Does it resolve to ``prefix`` or inside it (``torch.long`` under ``torch``)?"""
        return any(name == prefix or name.startswith(prefix + ".") for name in self.names)


@functools.lru_cache(maxsize=256)
def _tails(wanted: frozenset[str]) -> frozenset[str]:
    """Last names of qualified names (a few constant sets, so remembered)."""
    return frozenset(name.rsplit(".", 1)[-1] for name in wanted)


def resolve(expr: cst.BaseExpression, ctx: Context, strict: bool = True) -> Resolution:
    """What a Name/Attribute chain (or a call's callee) stands for in this script.

    ``strict=True``: imports, then the script's own functions and classes
    (``<local>.Net``), then what a ``from m import *`` may have brought in; the tail
    decides only for plain dotted names nothing explains, never ``self.<attr>``.
    ``strict=False``: imports and builtins only, and the tail always decides when they do
    not (``nn`` or ``F`` handed in from elsewhere).
    """
    return _strict(expr, ctx) if strict else _loose(expr, ctx)


def _imported(expr: cst.BaseExpression, ctx: Context) -> frozenset[str]:
    """Qualified names through the import table (``builtins.<name>`` for an unshadowed
    builtin). The script's imports decide instead of libcst's scope analysis, which costs
    more than everything else the engine does; training scripts do not shadow torch aliases."""
    dotted = dotted_name(expr)
    if dotted is None:
        return frozenset()
    head, _, rest = dotted.partition(".")
    table = imports(ctx)
    bound = table.by_local.get(head)
    if bound:
        return frozenset(f"{target}.{rest}" if rest else target for target in bound)
    if head in _BUILTINS and head not in table.local_names:
        return frozenset({f"builtins.{dotted}"})
    return frozenset()


def _loose(node: cst.BaseExpression, ctx: Context) -> Resolution:
    if isinstance(node, cst.Call):
        return Resolution(_imported(node.func, ctx), callee_name(node))
    return Resolution(_imported(node, ctx), last_name(node))


@per_node
def _strict(node: cst.BaseExpression, ctx: Context) -> Resolution:
    expr = node.func if isinstance(node, cst.Call) else node
    names = _imported(expr, ctx)
    dotted = dotted_name(expr)
    if names or dotted is None:
        return Resolution(names, None)
    table = imports(ctx)
    if dotted.partition(".")[0] in table.local_definitions:
        names = frozenset({f"<local>.{dotted}"})
    else:
        names = frozenset(f"{module}.{dotted}" for module in table.star_modules)
    tail = None if dotted.startswith("self.") else dotted.rsplit(".", 1)[-1]
    return Resolution(names, tail)


def module_alias(ctx: Context, module: str, at: cst.CSTNode | None = None) -> str | None:
    """How this script spells ``module`` at top level (or, given ``at``, also through the
    imports of the function holding ``at``): ``F``, ``nn.functional``, ``torch``."""
    scope = enclosing_function(at, ctx) if at is not None else None
    best: tuple[int, int, str] | None = None
    for binding in imports(ctx).bindings:
        visible = binding.at_module_level or (
            scope is not None and enclosing_function(binding.statement, ctx) is scope
        )
        if not visible:
            continue
        if binding.qualified == module:
            spelling = binding.local
        elif module.startswith(binding.qualified + "."):
            spelling = binding.local + module[len(binding.qualified) :]
        else:
            continue
        # The most specific import wins (``F`` over ``torch.nn.functional``), then the shortest.
        rank = (-len(binding.qualified), len(spelling), spelling)
        if best is None or rank < best:
            best = rank
    return best[2] if best is not None else None


def _import_from_binding(name: cst.Name, ctx: Context) -> ImportBinding | None:
    for binding in imports(ctx).bindings:
        if binding.local == name.value and isinstance(binding.statement, cst.ImportFrom):
            return binding
    return None


def renamed_callee(
    func: cst.BaseExpression, ctx: Context, new_name: str, new_first: bool = False
) -> tuple[cst.BaseExpression, Edits] | None:
    """The callee spelled for ``new_name`` from the same module (``nn.MSELoss`` for
    ``nn.CrossEntropyLoss``, ``MSELoss`` for an imported ``CrossEntropyLoss``), plus the
    import edit a bare name needs (the new name after the old one, or ``new_first``);
    None when the spelling cannot be told."""
    if isinstance(func, cst.Attribute):
        return func.with_changes(attr=cst.Name(new_name)), {}
    if not isinstance(func, cst.Name):
        return None
    table = imports(ctx)
    binding = _import_from_binding(func, ctx)
    if binding is None:
        names = resolve(func, ctx).names
        star = any(f"{module}.{func.value}" in names for module in table.star_modules)
        return (cst.Name(new_name), {}) if star else None
    module = binding.qualified.rsplit(".", 1)[0]
    for other in table.bindings:
        if other.qualified == f"{module}.{new_name}" and other.at_module_level:
            return cst.Name(other.local), {}
    statement = binding.statement
    assert isinstance(statement, cst.ImportFrom)
    before = func.value if new_first else None
    return cst.Name(new_name), {statement: with_imported_name(statement, new_name, before)}
