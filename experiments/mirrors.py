"""Where the fetch tool's git mirrors lie: ``DIR/<owner>+<name>/repo``, a bare repository or
a work tree whose ``.git`` holds it (the corpus, the real-fault set and the public suites
read them the same way)."""

from __future__ import annotations

from pathlib import Path


def git_dir(root: Path, repository: str) -> Path:
    """The git directory of ``repository`` ("owner/name") under the mirror folder ``root``."""
    folder = root / repository.replace("/", "+", 1) / "repo"
    return folder / ".git" if (folder / ".git").is_dir() else folder
