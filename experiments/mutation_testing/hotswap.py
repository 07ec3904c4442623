"""A mutant put into a process that has already imported the original file: each function
object of the file gets the mutant's code for it (``function.__code__ = ...``).

The warm project's children (``server``) are forks of a process that imported the project
and collected the tests once: the test modules hold the original functions (``from
tinynet.train import fit``), bound methods, callbacks registered at import. Replacing
each function object's code reaches all of them at once, which re-importing the file
would not. It equals importing the mutant only when nothing else differs, so a mutant
qualifies (``swappable``) when:

- everything that runs at import (the module's code and each class body: decorators,
  default values, class attributes, comprehensions run there) is the same, line numbers
  aside; only the bodies of functions and lambdas differ;
- every function of the mutant has a function at the same place in the original (by name
  and order among same-named siblings), with the same closure variables;
- (checked by the caller, from the baseline's per-test lines) no changed line ran while
  the project and its tests were imported and collected: an object built then (a model
  made at a test module's top level) was built by the original code.

Anything else runs in a child that imports and collects afresh.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator
from types import CodeType, FunctionType

Path_ = tuple[tuple[str, int], ...]  # a code object's place: (name, index among same names)
_CO_NEWLOCALS = 0x0002
_RUN_AT_DEFINITION = ("<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>")


def _children(code: CodeType) -> Iterator[tuple[tuple[str, int], CodeType]]:
    seen: dict[str, int] = {}
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            index = seen.get(constant.co_name, 0)
            seen[constant.co_name] = index + 1
            yield (constant.co_name, index), constant


def places(code: CodeType, prefix: Path_ = ()) -> Iterator[tuple[Path_, CodeType]]:
    """Every code object under ``code`` with its place."""
    for step, child in _children(code):
        place = (*prefix, step)
        yield place, child
        yield from places(child, place)


def _is_function(code: CodeType) -> bool:
    """A def or lambda (its body runs when called), not a class body or a comprehension
    (which run where they stand)."""
    return bool(code.co_flags & _CO_NEWLOCALS) and code.co_name not in _RUN_AT_DEFINITION


def _skeleton(code: CodeType) -> tuple:
    """What running ``code`` does, line numbers aside, with each function's body left out
    (its place stands for it)."""
    consts = []
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            consts.append(
                ("function", constant.co_name, constant.co_freevars)
                if _is_function(constant)
                else _skeleton(constant)
            )
        else:
            consts.append((type(constant).__name__, repr(constant)))
    return (
        code.co_code,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_flags,
        code.co_exceptiontable if hasattr(code, "co_exceptiontable") else b"",
        tuple(consts),
    )


def swappable(original: str, mutant: str, filename: str) -> str:
    """ "" when the mutant can be swapped in (see the module docstring); else why not."""
    try:
        old = compile(original, filename, "exec")
        new = compile(mutant, filename, "exec")
    except (SyntaxError, ValueError):
        return "does not compile"
    if _import_time(old) != _import_time(new):
        return "a change to what runs at import (module level, a class body, a default)"
    old_places = dict(places(old))
    for place, code in places(new):
        if not _is_function(code) or not _runs_at_import(place, new):
            continue
        before = old_places.get(place)
        if before is None or before.co_freevars != code.co_freevars:
            return "a function added, removed or given other closure variables"
    return ""


def _import_time(code: CodeType) -> tuple:
    return _skeleton(code)


def _runs_at_import(place: Path_, module: CodeType) -> bool:
    """Whether the function at ``place`` is created at import (a module-level or class
    function, or nested in those), rather than inside another function's body."""
    code = module
    for step in place[:-1]:
        code = dict(_children(code))[step]
        if _is_function(code):
            return False
    return True


def functions_of(paths: Iterable[str]) -> dict[str, list[FunctionType]]:
    """Every live function whose code comes from one of ``paths`` (by real path), in a
    process that imported them: what a swap must reach."""
    wanted = {os.path.realpath(path) for path in paths}
    names: dict[str, str | None] = {}
    found: dict[str, list[FunctionType]] = {path: [] for path in wanted}
    for obj in gc.get_objects():
        if type(obj) is not FunctionType:
            continue
        filename = obj.__code__.co_filename
        real = names.get(filename, "")
        if real == "":
            real = names[filename] = (
                os.path.realpath(filename) if os.path.realpath(filename) in wanted else None
            )
        if real is not None:
            found[real].append(obj)
    return found


def swap(functions: list[FunctionType], original: str, filename: str, mutant: CodeType) -> int:
    """Give each of ``functions`` (objects made from ``original``) the code at its place
    in ``mutant``; returns how many changed. A function whose place is ambiguous (two
    lambdas on one line) or absent is left as it is."""
    old = compile(original, filename, "exec")
    by_key: dict[tuple[str, int], Path_ | None] = {}
    for place, code in places(old):
        key = (code.co_name, code.co_firstlineno)
        by_key[key] = None if key in by_key else place
    new = dict(places(mutant))
    changed = 0
    for function in functions:
        code = function.__code__
        place = by_key.get((code.co_name, code.co_firstlineno))
        replacement = new.get(place) if place is not None else None
        if replacement is not None and replacement.co_freevars == code.co_freevars:
            function.__code__ = replacement
            changed += 1
    return changed
