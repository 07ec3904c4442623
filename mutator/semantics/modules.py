"""Definitions in the script's other files: what an imported name is, who calls a function.

Read through ``ctx.project`` (``mutator.project``): None there, or a module that is not a
file of the project (an installed package), and every answer here is None or empty, so
an analysis that asks stays as unknown as it was (issue 29: "unknown must stay unknown").

Resolution follows Python's: an absolute import starts from the script's own folder (the
first entry of ``sys.path`` when it runs), from the folder above the outermost package
that holds it, or last from the repository's root (its own packages, installed or put on
``sys.path``); a relative import from the module's package.
"""

from __future__ import annotations

import posixpath

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_module, per_node
from mutator.semantics.names import imports
from mutator.semantics.syntax import dotted_name

Definition = tuple[cst.ClassDef | cst.FunctionDef, Context]
_MAX_HOPS = 4  # re-exports followed (``__init__.py`` importing from a submodule)


def _roots(ctx: Context) -> list[str]:
    """Folders an absolute import may start from."""
    project = ctx.project
    folder = posixpath.dirname(ctx.path)
    roots, top = [folder], folder
    while top and project.exists(posixpath.join(top, "__init__.py")):
        parent = posixpath.dirname(top)
        if parent == top:
            break
        top = parent
    if top != folder:
        roots.append(top)
    # The repository's own top-level packages: a script in a subfolder (``pretrain/``)
    # reaches ``lit_llama.model`` through an editable install or ``sys.path.append(root)``;
    # a file the project holds there is the module the import reads (issue 29).
    if "" not in roots:
        roots.append("")
    return roots


def module_path(ctx: Context, parts: tuple[str, ...], level: int = 0) -> str | None:
    """The file of module ``parts`` imported from ``ctx`` (``level`` dots: relative)."""
    if ctx.project is None or not parts:
        return None
    if level:
        base = posixpath.dirname(ctx.path)
        for _ in range(level - 1):
            base = posixpath.dirname(base)
        roots = [base]
    else:
        roots = _roots(ctx)
    for root in roots:
        stem = posixpath.join(root, *parts)
        for candidate in (stem + ".py", posixpath.join(stem, "__init__.py")):
            if ctx.project.exists(candidate):
                return candidate
    return None


@per_module
def _top_definitions(ctx: Context) -> dict[str, cst.ClassDef | cst.FunctionDef]:
    """The module's own top-level classes and functions by name (the last one wins)."""
    found: dict[str, cst.ClassDef | cst.FunctionDef] = {}
    for statement in ctx.module.body:
        if isinstance(statement, (cst.ClassDef, cst.FunctionDef)):
            found[statement.name.value] = statement
    return found


def top_definition(ctx: Context, name: str) -> cst.ClassDef | cst.FunctionDef | None:
    return _top_definitions(ctx).get(name)


def _splits(ctx: Context, dotted: str) -> list[tuple[int, tuple[str, ...], tuple[str, ...]]]:
    """(level, module, attributes) readings of a dotted name through the module's imports,
    the longest module first: ``engine.train`` after ``import engine`` is (0, (engine,),
    (train,)); ``UNet`` after ``from modules import UNet`` is (0, (modules,), (UNet,))."""
    head, *rest = dotted.split(".")
    readings: list[tuple[int, tuple[str, ...], tuple[str, ...]]] = []
    for binding in imports(ctx).all_bindings:
        if binding.local != head:
            continue
        statement = binding.statement
        if isinstance(statement, cst.Import):
            level, full = 0, tuple(binding.qualified.split(".")) + tuple(rest)
            shortest = 1
        else:
            level = len(statement.relative)
            base = (
                tuple((dotted_name(statement.module) or "").split(".")) if statement.module else ()
            )
            name = binding.qualified.rsplit(".", 1)[-1]
            full, shortest = (*base, name, *rest), max(len(base), 1)
        for cut in range(len(full), shortest - 1, -1):
            readings.append((level, full[:cut], full[cut:]))
    if not readings and head not in imports(ctx).local_definitions:
        for statement in ctx.nodes(cst.ImportFrom):
            if isinstance(statement.names, cst.ImportStar) and statement.module is not None:  # type: ignore[attr-defined]
                parts = tuple((dotted_name(statement.module) or "").split("."))  # type: ignore[attr-defined]
                readings.append((len(statement.relative), parts, (head, *rest)))  # type: ignore[attr-defined]
    return readings


def definition_of(dotted: str, ctx: Context, hops: int = 0) -> Definition | None:
    """The class or function that ``dotted`` (a name as ``ctx`` spells it) names in another
    file of the project, or None when it is not one the project holds."""
    if ctx.project is None or hops > _MAX_HOPS:
        return None
    for level, parts, attributes in _splits(ctx, dotted):
        path = module_path(ctx, parts, level)
        if path is None:
            continue
        other = ctx.project.context(path)
        if other is None or not attributes:
            return None
        found = top_definition(other, attributes[0])
        if found is not None:
            return (found, other) if len(attributes) == 1 else None
        # re-exported: ``from .x_transformers import XTransformer`` in ``__init__.py``
        again = definition_of(".".join(attributes), other, hops + 1)
        if again is not None:
            return again
        # not there: another reading may hold it (a second ``from m import *``)
    return None


def imported_definition(expr: cst.BaseExpression, ctx: Context) -> Definition | None:
    """``definition_of`` for a callee expression (``UNet``, ``model_builder.TinyVGG``)."""
    dotted = dotted_name(expr)
    return definition_of(dotted, ctx) if dotted is not None else None


@per_node
def callers_elsewhere(function: cst.FunctionDef, ctx: Context) -> list[tuple[cst.Call, Context]]:
    """Calls of ``function`` (a module-level function of ``ctx``) from the other files of
    its folder that import it: ``engine.train(model=model, ...)`` in a sibling ``train.py``
    calls ``train`` of ``engine.py``. Empty when the project does not say."""
    if ctx.project is None or not isinstance(ctx.parent(function), cst.Module):
        return []
    stem = posixpath.basename(ctx.path).removesuffix(".py")
    found = []
    for path in ctx.project.files_in(posixpath.dirname(ctx.path)):
        if not path.endswith(".py") or path == ctx.path:
            continue
        other = ctx.project.context(path)
        if other is None or not any(
            stem in binding.qualified.split(".") for binding in imports(other).all_bindings
        ):
            continue
        for call in other.nodes(cst.Call):
            dotted = dotted_name(call.func)  # type: ignore[attr-defined]
            if dotted is None or not dotted.endswith(function.name.value):
                continue
            target = definition_of(dotted, other)
            if target is not None and target[0] is function:
                found.append((call, other))
    return found
