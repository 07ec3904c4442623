"""The files around a script: the project its imports and its callers live in (issue 29).

A model the script imports (``from modules import UNet``) or receives from a sibling script
(``engine.train(model=model)`` in ``train.py``) is built by code in another file. The engine
reads such a file only when an analysis asks (``mutator.semantics.modules``), parses it once
and indexes it like the script. Paths are ``/``-separated and relative to the project's root
(for files on disk: absolute), so the same resolution serves a folder and a git commit.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from mutator.context import Context, Indexer

# Files larger than this are not read for an analysis: a generated or vendored module says
# nothing about a model, and parsing it would cost more than the whole survey.
MAX_BYTES = 400_000


class Project:
    """Reads and parses a project's files on demand; one parse per file.

    ``read(path)`` returns a file's text or None when there is none; ``listdir(folder)`` the
    names of the files in a folder (empty when unknown)."""

    def __init__(
        self,
        read: Callable[[str], str | None],
        listdir: Callable[[str], list[str]] | None = None,
    ) -> None:
        self._read = read
        self._listdir = listdir or (lambda folder: [])
        self._texts: dict[str, str | None] = {}
        self._contexts: dict[str, Context | None] = {}
        self._listings: dict[str, list[str]] = {}

    @classmethod
    def on_disk(cls) -> Project:
        """The file system: absolute paths."""

        def read(path: str) -> str | None:
            try:
                if os.path.getsize(path) > MAX_BYTES:
                    return None
                return Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return None

        def listdir(folder: str) -> list[str]:
            try:
                return sorted(entry.name for entry in os.scandir(folder or "/") if entry.is_file())
            except OSError:
                return []

        return cls(read, listdir)

    def text(self, path: str) -> str | None:
        if path not in self._texts:
            text = self._read(path)
            self._texts[path] = text if text is None or len(text) <= MAX_BYTES else None
        return self._texts[path]

    def exists(self, path: str) -> bool:
        return self.text(path) is not None

    def files_in(self, folder: str) -> list[str]:
        """Paths of the files directly in ``folder``."""
        if folder not in self._listings:
            self._listings[folder] = [
                posixpath.join(folder, name) for name in self._listdir(folder)
            ]
        return self._listings[folder]

    def context(self, path: str) -> Context | None:
        """The parsed, indexed module at ``path``; None when absent or not valid Python."""
        if path not in self._contexts:
            self._contexts[path] = self._parse(path)
        return self._contexts[path]

    def adopt(self, path: str, ctx: Context) -> None:
        """Use the script's own parse for its path (a sibling that imports it back)."""
        self._contexts[path] = ctx

    def _parse(self, path: str) -> Context | None:
        text = self.text(path)
        if text is None:
            return None
        try:
            module = cst.parse_module(text)
        except (cst.ParserSyntaxError, RecursionError):
            return None
        return index(module, self, path)


def index(module: cst.Module, project: Project | None, path: str) -> Context:
    """A Context for a freshly parsed module (the engine's one indexing pass)."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    indexer = Indexer()
    wrapper.module.visit(indexer)
    return Context(wrapper, indexer.by_type, indexer.parent_of, project, path)
