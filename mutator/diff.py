"""A mutant's unified diff and the lines it changed, on both sides."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")
_CONTEXT = 3


def common_ends(
    old: Sequence[str], new: Sequence[str], known_head: int = 0, known_tail: int = 0
) -> tuple[int, int]:
    """How many lines ``old`` and ``new`` share at the head and, after that, at the tail.

    A mutant changes a few lines of a long file: difflib (quadratic at worst) then runs on
    the part between the two only. ``known_head``/``known_tail``: lines the caller knows
    are shared at each end (``mutator.splice``), so only the lines between are compared;
    the answer is the same as without them.
    """
    shortest = min(len(old), len(new))
    head = min(known_head, shortest)
    while head < shortest and old[head] == new[head]:
        head += 1
    tail = min(known_tail, shortest - head)
    while tail < shortest - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, tail


def unified_diff(
    before: str, after: str, target: str
) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """Unified diff plus the changed line numbers on both sides.

    A mutant changes a few lines of a long file, so the common head and tail are cut
    before difflib runs (it is quadratic in the worst case) and hunk numbers shifted back.
    """
    return unified_diff_lines(
        before.splitlines(keepends=True), after.splitlines(keepends=True), target
    )


def unified_diff_lines(
    old: list[str], new: list[str], target: str, known_head: int = 0, known_tail: int = 0
) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """``unified_diff`` on lines split with their ends; ``known_*`` as in ``common_ends``."""
    head, tail = common_ends(old, new, known_head, known_tail)
    start = max(0, head - _CONTEXT)
    old_window = old[start : len(old) - max(0, tail - _CONTEXT)]
    new_window = new[start : len(new) - max(0, tail - _CONTEXT)]
    diff_lines = []
    for line in difflib.unified_diff(old_window, new_window, f"a/{target}", f"b/{target}"):
        match = _HUNK.match(line)
        if match:
            old_at, old_len, new_at, new_len = match.groups()
            line = (
                f"@@ -{int(old_at) + start}{old_len or ''} "
                f"+{int(new_at) + start}{new_len or ''} @@\n"
            )
        elif not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        diff_lines.append(line)
    lines: set[int] = set()
    mutant_lines: set[int] = set()
    matcher = difflib.SequenceMatcher(
        a=old[head : len(old) - tail], b=new[head : len(new) - tail], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        i1, i2, j1, j2 = i1 + head, i2 + head, j1 + head, j2 + head
        lines.update(range(i1 + 1, i2 + 1) if i2 > i1 else [max(i1, 1)])
        mutant_lines.update(range(j1 + 1, j2 + 1) if j2 > j1 else [max(j1, 1)])
    return "".join(diff_lines), tuple(sorted(lines)), tuple(sorted(mutant_lines))
