"""The session's files in the results folder, each written whole or not at all."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from experiments.files import write_text_atomic
from experiments.mutation_testing import html, report
from experiments.mutation_testing.discovery import Job
from experiments.mutation_testing.outcome import Row

FILES = ("mutants.csv", "mutation-report.md", "mutation-report.html")


def write(
    out: Path, rows: Sequence[Row], jobs: Sequence[Job], command: str, notes: Sequence[str]
) -> list[Path]:
    texts = (
        report.csv_text(rows),
        report.markdown(rows, jobs, command, notes),
        html.page(rows, jobs, command, notes),
    )
    paths = [out / name for name in FILES]
    for path, text in zip(paths, texts):
        write_text_atomic(path, text)
    return paths


GITIGNORE = "# Made by trainwreck test: git ignores this folder (the results and their cache).\n*\n"


def ignored_by_git(out: Path) -> bool:
    """The default results folder sits in the user's tree: like pytest's cache, it holds a
    ``.gitignore`` of its own, so ``git status`` stays clean. True when it was made now
    (the session then says so, once)."""
    marker = out / ".gitignore"
    if marker.exists():
        return False
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(marker, GITIGNORE)
    return made
