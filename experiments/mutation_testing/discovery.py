"""The mutants of a session: every site of the chosen operators in each ``--mutate`` file.

A file is named by its path relative to the project folder (``tinynet/train.py``), which
is also the first part of its mutants' identities, so two files called ``train.py`` never
share a name. ``--since`` keeps the mutants with a line among those changed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.cli_support import UserError
from experiments.stillborn import declares_crash
from mutator import Mutant, MutationError, Operator, SourceFile


@dataclass(frozen=True)
class Target:
    """A file whose mutants run: its name in the project and its real path."""

    name: str
    path: str
    source: str


@dataclass(frozen=True)
class Job:
    """One mutant to test, with what the run and the report need of it."""

    target: Target
    mutant: Mutant
    operator_labels: tuple[str, ...]
    line: int  # the first changed line, numbered in the original
    declares_crash: bool
    checks: tuple[str, ...]  # each operator's ``Check:`` text: the test that would catch it

    @property
    def identity(self) -> str:
        return self.mutant.identity

    @property
    def sha256(self) -> str:
        return self.mutant.sha256


def targets(root: Path, paths: Sequence[str]) -> list[Target]:
    """The ``--mutate`` files, checked: inside ``root``, Python source that parses."""
    found: dict[str, Target] = {}
    for given in paths:
        file = (root / given).resolve()
        if not file.is_file():
            raise UserError(f"--mutate {given}: no such file in {root}")
        try:
            name = file.relative_to(root.resolve()).as_posix()
        except ValueError:
            raise UserError(
                f"--mutate {given}: outside the project folder {root}; run from the "
                "project's folder, naming files inside it"
            ) from None
        try:
            source = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UserError(f"--mutate {given}: not UTF-8 text (give a Python file)") from None
        found.setdefault(name, Target(name, os.path.realpath(file), source))
    return list(found.values())


def jobs(
    files: Sequence[Target],
    operators: Sequence[Operator],
    changed: Mapping[str, set[int] | None] | None = None,
) -> list[Job]:
    """Every mutant of every file, in file then document order. ``changed``: file name ->
    changed lines (None: the whole file); files not in it keep no mutant."""
    checks = {op.name: type(op).doc_sections().get("Check", "") for op in operators}
    found: list[Job] = []
    for target in files:
        lines = None if changed is None else changed.get(target.name, set())
        if lines is not None and not lines:
            continue
        try:
            parsed = SourceFile(target.source, target.name)
        except MutationError as error:
            raise UserError(f"--mutate {error}") from None
        for site in parsed.find_sites(operators):
            mutant = parsed.apply([site])
            if lines is not None and not lines.intersection(mutant.lines):
                continue
            found.append(
                Job(
                    target=target,
                    mutant=mutant,
                    operator_labels=(site.operator.label,),
                    line=min(mutant.lines) if mutant.lines else site.line,
                    declares_crash=declares_crash([site.operator]),
                    checks=tuple(dict.fromkeys(checks.get(n, "") for n in mutant.operators)),
                )
            )
    return found
