"""Scoring an answer against the key.

An answer is a list of lines, most harmful bug first, each optionally with a bug name.
A line finds a bug when it lies within one line of the bug's lines in ``practice.py``:
a deleted statement is marked on the line before the gap, and pointing at the line after
it (where the statement should be) is just as right. Quizzes keep bugs at least three
lines apart, so one line never matches two bugs. The first line that finds a bug counts;
another line on the same bug is a repeat (neither found nor false alarm); a line that
finds no bug is a false alarm. The ranking matches when the found bugs come in the key's
order (the key ranks by measured impact, see ``key``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.quiz.draw import QuizError

TOLERANCE = 1
_ANSWER_LINE = re.compile(
    r"^\s*([0-9]+)\s*[:,.)-]?\s*(.*?)\s*$"
)  # ASCII digits: int() of '²' fails


@dataclass(frozen=True)
class Answer:
    line: int
    name: str = ""


@dataclass
class Grade:
    found: list[dict[str, Any]] = field(default_factory=list)  # key bugs, in answer order
    missed: list[dict[str, Any]] = field(default_factory=list)
    false_alarms: list[int] = field(default_factory=list)
    repeats: list[int] = field(default_factory=list)
    names_right: int = 0
    names_given: int = 0
    ranking_matches: bool = False

    @property
    def score(self) -> str:
        return f"{len(self.found)}/{len(self.found) + len(self.missed)}"


def parse_lines(text: str) -> list[Answer]:
    """``12,31,40`` (the ``--lines`` option)."""
    answers = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        if not (item.isascii() and item.isdigit()):  # '²'.isdigit() is True
            raise QuizError(f"--lines takes line numbers like 12,31,40; got {item!r}")
        answers.append(Answer(int(item)))
    if not answers:
        raise QuizError("--lines is empty")
    return answers


def parse_answers_file(text: str) -> list[Answer]:
    """One answer per line: ``LINE [bug name]``; blank lines and ``#`` comments skipped."""
    answers = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        match = _ANSWER_LINE.match(raw)
        if match is None:
            raise QuizError(f"answers file line {number}: expected 'LINE [bug name]', got {raw!r}")
        answers.append(Answer(int(match.group(1)), match.group(2)))
    if not answers:
        raise QuizError("the answers file names no lines")
    return answers


def grade(key: Mapping[str, Any], answers: Sequence[Answer]) -> Grade:
    bugs = sorted(key["bugs"], key=lambda bug: bug["rank"])
    result = Grade()
    found_ids: set[str] = set()
    for answer in answers:
        hits = [bug for bug in bugs if _near(answer.line, bug["lines"])]
        if not hits:
            result.false_alarms.append(answer.line)
            continue
        bug = hits[0]
        if bug["identity"] in found_ids:
            result.repeats.append(answer.line)
            continue
        found_ids.add(bug["identity"])
        result.found.append(bug)
        if answer.name:
            result.names_given += 1
            result.names_right += _name_matches(answer.name, bug)
    result.missed = [bug for bug in bugs if bug["identity"] not in found_ids]
    ranks = [bug["rank"] for bug in result.found]
    result.ranking_matches = bool(ranks) and ranks == sorted(ranks)
    return result


def _near(line: int, lines: Sequence[int]) -> bool:
    return any(abs(line - target) <= TOLERANCE for target in lines)


def _name_matches(name: str, bug: Mapping[str, Any]) -> bool:
    """The operator's name, in any case, with spaces, dashes or underscores."""
    wanted = re.sub(r"[\s_-]+", "_", name.strip().lower())
    return wanted in (bug["operator"], bug.get("label", ""))


def grade_markdown(result: Grade) -> str:
    lines = [
        f"# Grade: {result.score} bugs found",
        "",
        f"- found: {_bug_list(result.found)}",
        f"- missed: {_bug_list(result.missed)}",
        f"- false alarms: {', '.join(map(str, result.false_alarms)) or 'none'}",
    ]
    if result.repeats:
        lines.append(f"- repeats (a bug already found): {', '.join(map(str, result.repeats))}")
    if result.names_given:
        lines.append(f"- bug names right: {result.names_right}/{result.names_given}")
    order = "matches" if result.ranking_matches else "does not match"
    lines.append(f"- ranking of the found bugs {order} the key's (by measured impact)")
    return "\n".join(lines) + "\n"


def _bug_list(bugs: Sequence[Mapping[str, Any]]) -> str:
    if not bugs:
        return "none"
    return ", ".join(
        f"#{bug['rank']} line {'/'.join(map(str, bug['lines']))} ({bug['operator']})"
        for bug in bugs
    )
