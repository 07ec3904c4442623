"""Drawing a practice loop: K bugs of distinct operators, far enough apart to grade.

Levels (severity is the catalog's measured one for that exact site when a catalog
exists, else the operator's declared ``expected``):

- ``easy``: every bug is ``crash`` or ``breaks_training``, each in a different category;
- ``medium``: at least one ``crash``/``breaks_training`` bug and at least one milder one;
- ``hard``: at least one ``silent``/``cost_only`` bug and at most one loud one
  (``crash``/``breaks_training``).

A crash stops the script, hiding every bug that would have shown after it, so no level
holds more than one crash; the answer key then says which bugs the crash hid.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst

from experiments.cli_support import UserError
from mutator import MutationError, SourceFile
from mutator.engine import Mutant, Site

LEVELS = ("easy", "medium", "hard")
MIN_BUGS, MAX_BUGS = 2, 5
LOUD = ("crash", "breaks_training")
QUIET = ("silent", "cost_only")
# Bugs at least this many lines apart: with the grader's +-1 line tolerance one answered
# line can then never match two bugs.
MIN_LINE_GAP = 3
DRAW_ATTEMPTS = 400

Severity = Callable[[Site], str]


class QuizError(UserError, ValueError):
    """A request that cannot be met (bad level, bug count, no fitting draw): one line."""


@dataclass(frozen=True)
class DrawnBug:
    site: Site
    severity: str  # the one the draw used (catalog or expected)
    mutant_lines: tuple[int, ...]  # in the practice script
    original_lines: tuple[int, ...]  # in the comment-free correct script


@dataclass(frozen=True)
class Draw:
    clean_source: str  # the correct loop without comments: what the bugs are injected into
    mutant: Mutant
    bugs: tuple[DrawnBug, ...]


def strip_comments(source: str) -> str:
    """The script without comments (they may name what a line is for, and so the bug);
    docstrings stay because scripts read them (``__doc__`` in argparse)."""
    return cst.parse_module(source).visit(_CommentRemover()).code


class _CommentRemover(cst.CSTTransformer):
    def leave_EmptyLine(self, original_node: cst.EmptyLine, updated_node: cst.EmptyLine):
        if updated_node.comment is not None:
            return cst.RemoveFromParent()
        return updated_node

    def leave_TrailingWhitespace(
        self, original_node: cst.TrailingWhitespace, updated_node: cst.TrailingWhitespace
    ) -> cst.TrailingWhitespace:
        return updated_node.with_changes(comment=None, whitespace=cst.SimpleWhitespace(""))


def check_request(bugs: int, level: str) -> None:
    if not MIN_BUGS <= bugs <= MAX_BUGS:
        raise QuizError(f"--bugs must be between {MIN_BUGS} and {MAX_BUGS}, got {bugs}")
    if level not in LEVELS:
        raise QuizError(f"--level must be one of {', '.join(LEVELS)}, got {level!r}")


def draw(
    parsed: SourceFile,
    sites: Sequence[Site],
    bugs: int,
    level: str,
    seed: int,
    severity: Severity,
) -> Draw:
    """A reproducible draw: the same script, sites, request and seed give the same quiz."""
    check_request(bugs, level)
    severities = {id(site): severity(site) for site in sites}
    pool = [s for s in sites if level != "easy" or severities[id(s)] in LOUD]
    rng = random.Random(f"{level}:{bugs}:{seed}")
    for _ in range(DRAW_ATTEMPTS):
        rng.shuffle(pool)
        picked = _greedy(pool, bugs, level, severities)
        if picked is None or not _fits(level, [severities[id(s)] for s in picked]):
            continue
        picked.sort(key=lambda site: (site.line, site.column))
        result = _build(parsed, picked, severities)
        if result is not None:
            return result
    raise QuizError(
        f"no {bugs}-bug {level} quiz fits this loop (too few compatible sites); "
        "try fewer bugs or another level"
    )


def _greedy(
    pool: Sequence[Site], bugs: int, level: str, severities: dict[int, str]
) -> list[Site] | None:
    picked: list[Site] = []
    for site in pool:
        if any(site.operator.name == other.operator.name for other in picked):
            continue
        if any(site.overlaps(other) or _too_close(site, other) for other in picked):
            continue
        if level == "easy" and any(site.operator.category == o.operator.category for o in picked):
            continue
        loud = [severities[id(s)] for s in [*picked, site]]
        if loud.count("crash") > 1:
            continue
        if level == "hard" and sum(s in LOUD for s in loud) > 1:
            continue
        picked.append(site)
        if len(picked) == bugs:
            return picked
    return None


def _fits(level: str, severities: list[str]) -> bool:
    if severities.count("crash") > 1:
        return False
    loud = sum(s in LOUD for s in severities)
    if level == "easy":
        return loud == len(severities)
    if level == "medium":
        return 0 < loud < len(severities)
    return loud <= 1 and any(s in QUIET for s in severities)


def _site_lines(site: Site) -> set[int]:
    lines = {site.line}
    for span in site.footprint:
        lines.update(range(span.start[0], span.end[0] + 1))
    return lines


def _too_close(first: Site, second: Site) -> bool:
    return any(abs(a - b) < MIN_LINE_GAP for a in _site_lines(first) for b in _site_lines(second))


def _build(parsed: SourceFile, picked: list[Site], severities: dict[int, str]) -> Draw | None:
    """The combined mutant with each bug's lines in it, or None when the lines cannot be
    told apart (the combined diff must be exactly the union of the bugs' own changes)."""
    try:
        combined = parsed.apply(picked)
        singles = [parsed.apply([site]) for site in picked]
    except MutationError:
        return None
    original_length = len(parsed.source.splitlines())
    bugs, shift = [], 0
    for site, single in zip(picked, singles):
        lines = tuple(line + shift for line in single.mutant_lines)
        bugs.append(DrawnBug(site, severities[id(site)], lines, single.lines))
        shift += len(single.source.splitlines()) - original_length
    attributed = sorted(line for bug in bugs for line in bug.mutant_lines)
    if attributed != sorted(combined.mutant_lines):
        return None
    all_lines = [(line, index) for index, bug in enumerate(bugs) for line in bug.mutant_lines]
    for line, index in all_lines:
        if any(i != index and abs(line - other) < MIN_LINE_GAP for other, i in all_lines):
            return None
    return Draw(parsed.source, combined, tuple(bugs))
