"""``--since GIT_REF``: the lines of each file that changed since a commit.

A mutant is kept when one of its lines (numbered in the current file) is among them. A
file git does not know at that commit (new, untracked) counts as changed throughout.
Deleted lines leave no line to mutate; the lines on either side of a deletion count as
changed, since the code around it is what the deletion changed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from experiments.cli_support import UserError

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.MULTILINE)
EVERY_LINE = None  # the whole file changed


def changed_lines(root: Path, ref: str, files: list[Path]) -> dict[Path, set[int] | None]:
    """file -> its changed lines (``EVERY_LINE`` for a file new since ``ref``)."""
    _git(root, "rev-parse", "--is-inside-work-tree", what="is not inside a git repository")
    _git(
        root,
        "rev-parse",
        "--verify",
        "--quiet",
        f"{ref}^{{commit}}",
        what=f"--since {ref}: no such commit (give a branch, tag or commit: --since HEAD~1)",
    )
    found: dict[Path, set[int] | None] = {}
    for file in files:
        known = subprocess.run(
            ["git", "cat-file", "-e", f"{ref}:./{file.relative_to(root).as_posix()}"],
            cwd=root,
            capture_output=True,
            check=False,
        )
        if known.returncode != 0:
            found[file] = EVERY_LINE
            continue
        diff = _git(
            root,
            "diff",
            "--unified=0",
            "--no-color",
            "--no-ext-diff",
            ref,
            "--",
            str(file),
            what=f"cannot diff {file} against {ref}",
        )
        found[file] = _lines_of(diff)
    return found


def _lines_of(diff: str) -> set[int]:
    lines: set[int] = set()
    for match in _HUNK.finditer(diff):
        start, count = int(match.group(1)), int(match.group(2) or 1)
        if count == 0:  # a deletion after line ``start``
            lines.update((start, start + 1))
        else:
            lines.update(range(start, start + count))
    return lines


def _git(root: Path, *args: str, what: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise UserError("--since needs git, which is not on PATH") from None
    if done.returncode != 0:
        raise UserError(f"{root} {what}" if what.startswith("is ") else what)
    return done.stdout
