"""Which files of a user's project get mutants: ``loop.mutate`` (and ``auto`` discovery).

``loop.mutate=[model.py,train.py]`` names them (relative to the folder the loop runs
from, else to the script's folder); ``auto`` stands for the script and every module of the
project it imports, directly or through each other (``import model``, ``from model
import GPT``, ``from pkg import layers``), found by parsing, never by running. Modules
outside the script's folder (installed packages, the standard library) are never
included. An empty list means the script alone.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

AUTO = "auto"


def mutated_files(script: Path, folder: Path, mutate: Sequence[str]) -> list[Path]:
    """The files to mutate, in the order given, each once."""
    if not mutate:
        return [script]
    files: list[Path] = []
    for entry in mutate:
        if entry == AUTO:
            files += [script, *local_imports(script)]
            continue
        for base in (folder, script.parent):
            candidate = (base / entry).resolve()
            if candidate.is_file():
                files.append(candidate)
                break
        else:
            raise FileNotFoundError(
                f"loop.mutate: {entry!r} not found in {folder} or {script.parent} "
                f"(give paths of the project's .py files, or {AUTO})"
            )
    return list(dict.fromkeys(files))


def local_imports(script: Path) -> list[Path]:
    """Modules of the script's folder that the script imports, directly or indirectly."""
    root = script.parent.resolve()
    found: list[Path] = []
    queue = [script.resolve()]
    seen = set(queue)
    while queue:
        current = queue.pop(0)
        try:
            tree = ast.parse(current.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for name in _imported_names(tree, current, root):
            module = _module_file(root, name)
            if module is not None and module not in seen:
                seen.add(module)
                found.append(module)
                queue.append(module)
    return found


def _imported_names(tree: ast.AST, current: Path, root: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the current file's package
                package = current.parent.relative_to(root).parts
                package = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join([*package, *([base] if base else [])])
            if base:
                names.append(base)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
    return names


def _module_file(root: Path, dotted: str) -> Path | None:
    parts = dotted.split(".")
    for candidate in (
        root.joinpath(*parts).with_suffix(".py"),
        root.joinpath(*parts, "__init__.py"),
    ):
        if candidate.is_file():
            return candidate.resolve()
    return None
