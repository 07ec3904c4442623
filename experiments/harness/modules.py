"""In the run's process: a mutant of a module the script imports (``model.py``) replaces it.

The script runs unchanged as ``__main__``; when it (or anything) imports the module whose
file is the mutant's target, this finder answers with the mutant's code instead of the
file's. The file is matched by its real path, so ``import model``, ``from . import model``
and a path through the run's mirrored working directory all find it. No bytecode is
written or read for it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import linecache
import os
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType


class _MutantLoader(importlib.abc.Loader):
    def __init__(self, code: CodeType) -> None:
        self.code = code

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        exec(self.code, module.__dict__)


class MutantFinder(importlib.abc.MetaPathFinder):
    """Serves ``code`` for the module whose file's real path is ``target``."""

    def __init__(self, target: str, code: CodeType) -> None:
        self.target = os.path.realpath(target)
        self.code = code
        self.loads = 0  # how many times the mutant was imported (tests, diagnostics)

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not spec.origin or os.path.realpath(spec.origin) != self.target:
            return None
        spec.loader = _MutantLoader(self.code)
        spec.cached = None
        self.loads += 1
        return spec


def install(target: str, source: str, code: CodeType) -> MutantFinder:
    """Put the finder first, and show the mutant's lines in tracebacks of that file."""
    finder = MutantFinder(target, code)
    sys.meta_path.insert(0, finder)
    lines = source.splitlines(keepends=True)
    for name in {target, os.path.realpath(target)}:
        linecache.cache[name] = (len(source), None, lines, name)
    return finder
