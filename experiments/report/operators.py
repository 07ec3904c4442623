"""What the catalog says about an operator: its registry metadata and docstring sections.

Operator names that are not registered (the ``noop`` control, operators of a package that
is no longer installed) still get an entry, built from what the runs recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from experiments import interrupt

SECTION_NAMES = ("Bug", "Impact", "Fix", "Check")
_SECTION = re.compile(r"\b(" + "|".join(SECTION_NAMES) + r"):\s*")

NOOP_INFO = {
    "summary": "Control: the unmutated script on seeds no mutant used, judged like a mutant.",
    "Bug": "None. The script is the reference loop itself.",
    "Impact": "Must be silent; any label it gets is a false positive of the symptom judge.",
    "Fix": "Nothing to fix.",
    "Check": "The catalog's false-positive rate (goal <= 5%).",
}


@dataclass(frozen=True)
class OperatorInfo:
    name: str
    category: str
    summary: str
    expected: str | None
    title: str  # the docstring's first line
    sections: dict[str, str]  # Bug / Impact / Fix / Check, where the docstring has them
    registered: bool


def operator_info(names: Iterable[str]) -> dict[str, OperatorInfo]:
    """Metadata for each name; the registry is imported once, lazily, and may fail."""
    try:
        from mutations.registry import operator_classes

        classes = operator_classes()
    except Exception:  # a broken third-party operator must not take the report down
        interrupt.check()
        classes = {}
    info = {}
    for name in dict.fromkeys(names):
        cls = classes.get(name)
        if cls is not None:
            title, sections = parse_doc(cls.doc())
            info[name] = OperatorInfo(
                name, cls.category, cls.summary, cls.expected, title, sections, True
            )
        elif name == "noop":
            sections = {key: NOOP_INFO[key] for key in SECTION_NAMES}
            info[name] = OperatorInfo(
                name, "control", NOOP_INFO["summary"], "silent", "", sections, False
            )
        else:
            info[name] = OperatorInfo(name, "", "", None, "", {}, False)
    return info


def parse_doc(doc: str) -> tuple[str, dict[str, str]]:
    """(first line, {section: text}) of a docstring written as 'Bug: ... Fix: ... Check: ...'."""
    lines = doc.strip().splitlines()
    title = lines[0].strip() if lines else ""
    body = " ".join(line.strip() for line in lines[1:])
    matches = list(_SECTION.finditer(body))
    sections = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(body)
        sections[match.group(1)] = body[match.end() : end].strip()
    return title, sections
