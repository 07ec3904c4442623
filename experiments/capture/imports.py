"""Patch a library when the script imports it, never before.

``import torch.utils.tensorboard`` costs ~0.3 s, ``wandb`` ~0.5 s, ``lightning`` ~3 s
(docs/benchmarks.md): importing them up front would charge every run for libraries few
scripts use. A finder at the head of ``sys.meta_path`` waits for the modules in
``PATCHES``; when one is found by the usual finders, its loader's ``exec_module`` is
wrapped on that one loader instance (so the module keeps its real loader), and the patch
runs right after the module's code. A module already imported (the warm parent, a
process that serves several runs) is patched at once. Every patch is idempotent.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

Patch = Callable[[ModuleType], None]


class PatchOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, patches: dict[str, Patch], on_error: Callable[[str, BaseException], None]):
        self.patches = patches
        self.on_error = on_error

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = self.patches.get(fullname)
        if patch is None:
            return None
        spec = _find_elsewhere(self, fullname, path, target)
        loader = getattr(spec, "loader", None)
        execute = getattr(loader, "exec_module", None)
        if spec is None or execute is None:
            return spec

        def exec_then_patch(module: ModuleType) -> None:
            execute(module)
            self.apply(fullname, module)

        try:
            loader.exec_module = exec_then_patch  # type: ignore[union-attr]
        except (AttributeError, TypeError) as error:  # a loader with __slots__
            self.on_error(fullname, error)
        return spec

    def apply(self, name: str, module: ModuleType) -> None:
        try:
            self.patches[name](module)
        except Exception as error:  # a library version we do not know: no capture, no harm
            self.on_error(name, error)

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)
        for name in self.patches:
            module = sys.modules.get(name)
            if module is not None:
                self.apply(name, module)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def _find_elsewhere(
    finder: Any, fullname: str, path: Sequence[str] | None, target: ModuleType | None
) -> importlib.machinery.ModuleSpec | None:
    for other in list(sys.meta_path):
        find = getattr(other, "find_spec", None)
        if other is finder or find is None:
            continue
        spec = find(fullname, path, target)
        if spec is not None:
            return spec
    return None
