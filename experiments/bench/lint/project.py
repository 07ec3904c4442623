"""The other files of a user's project that a linted script imports (``from model import
Net`` next to ``train.py``): read and parsed on demand, so rules can look at a model's
``forward`` in ``model.py``. A module that is not a file beside the script (torch, an
installed package) is simply not there: rules then stay silent."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import libcst as cst

from mutator.context import Context
from mutator.engine import MutationError, SourceFile
from mutator.semantics import dotted_name


class Project:
    """The script's local imports, resolved against the folder the script lives in."""

    def __init__(self, ctx: Context, path: str) -> None:
        self._ctx = ctx
        self._folder = Path(path).parent

    @cached_property
    def imported_names(self) -> dict[str, str]:
        """Local name -> module it was imported from (``Net`` -> ``model``)."""
        names: dict[str, str] = {}
        for statement in self._ctx.nodes(cst.ImportFrom):
            module = dotted_name(statement.module) if statement.module is not None else None  # type: ignore[attr-defined]
            if module is None or isinstance(statement.names, cst.ImportStar):  # type: ignore[attr-defined]
                continue
            for alias in statement.names:  # type: ignore[attr-defined]
                local = alias.asname.name.value if alias.asname is not None else alias.name.value
                names[local] = module
        return names

    def module(self, name: str) -> Context | None:
        """The parsed local module ``name`` (``model`` -> ``model.py`` or ``model/__init__.py``
        beside the script), or None when it is no readable Python file there."""
        return self._modules.setdefault(name, self._load(name))

    @cached_property
    def _modules(self) -> dict[str, Context | None]:
        return {}

    def _load(self, name: str) -> Context | None:
        base = self._folder.joinpath(*name.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            try:
                return SourceFile(
                    candidate.read_text(encoding="utf-8"), target=str(candidate)
                ).context
            except (OSError, UnicodeDecodeError, MutationError):
                continue
        return None
