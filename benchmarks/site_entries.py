"""What an expected site is and where a found one lands: shared by bench_sites.py (the
tests/styles scripts) and corpus_sites.py (the public corpus), so that neither imports the
other (bench_sites.py runs the corpus report, which reads these definitions).

An expected entry is ``N``, ``{any = [N, M]}`` or ``{line = N, after = M}`` (a moved
statement must land right after original line M); a found site is its anchor line and, for
a moved statement, the code line it lands after.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst


@dataclass(frozen=True)
class Entry:
    """One expected site: any of ``lines``; a moved statement must land after one of ``after``."""

    lines: frozenset[int]
    after: frozenset[int] | None = None

    def accepts(self, found: Found) -> bool:
        if found.line not in self.lines:
            return False
        return self.after is None or found.landing in self.after

    def describe(self) -> str:
        lines = "/".join(map(str, sorted(self.lines)))
        if self.after is None:
            return lines
        return f"{lines} (landing after {'/'.join(map(str, sorted(self.after)))})"


@dataclass(frozen=True)
class Found:
    """One site the engine found: its anchor line, and where a moved statement lands."""

    line: int
    landing: int | None = None

    def describe(self) -> str:
        return (
            str(self.line) if self.landing is None else f"{self.line} (lands after {self.landing})"
        )


def _as_set(value: int | list[int]) -> frozenset[int]:
    return frozenset(value if isinstance(value, list) else [value])


def entry_of(raw: int | dict, where: str) -> Entry:
    if isinstance(raw, int):
        return Entry(frozenset([raw]))
    if isinstance(raw, dict) and set(raw) == {"any"}:
        return Entry(_as_set(raw["any"]))
    if isinstance(raw, dict) and set(raw) == {"line", "after"}:
        return Entry(_as_set(raw["line"]), _as_set(raw["after"]))
    raise ValueError(
        f"{where}: an entry is N, {{any = [..]}} or {{line = N, after = M}}, not {raw!r}"
    )


def own_lines(site, text_lines: list[str]) -> set[int]:
    """The anchor statement's lines plus the comments and blank lines right above it."""
    node = site.node
    if "leading_lines" in getattr(node, "__dataclass_fields__", {}):
        node = node.with_changes(leading_lines=())
    height = len(cst.Module(body=[]).code_for_node(node).rstrip("\n").splitlines()) or 1
    own = set(range(site.line, site.line + height))
    above = site.line - 1
    while above >= 1 and (
        not text_lines[above - 1].strip() or text_lines[above - 1].lstrip().startswith("#")
    ):
        own.add(above)
        above -= 1
    return own


def code_line_at_or_above(number: int, text_lines: list[str]) -> int:
    """An insertion after a blank or comment line lands after the code line above it."""
    while number > 1 and (
        not text_lines[number - 1].strip() or text_lines[number - 1].lstrip().startswith("#")
    ):
        number -= 1
    return number
