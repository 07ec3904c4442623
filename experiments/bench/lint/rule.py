"""The lint rule contract: a small declared class per bug, like an Operator.

A rule names its code (``TW101``, stable: users filter on it), a category, the operators
whose bugs it targets, how sure a finding is, and ``valid``/``invalid`` examples written
as indented triple-quoted code. The test suite turns every example into a test: an
invalid example must produce the rule's code on each line marked ``# <-`` and nowhere
else; a valid example must produce nothing from the rule. The docstring says what the
rule reads and when it stays silent.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import libcst as cst

from experiments.bench.api import Finding
from mutator.operator import CATEGORIES

if TYPE_CHECKING:
    from experiments.bench.lint.script import Script

# high: the pattern is the bug; medium: a name or a habit decides (``train_loader``);
# low: a guess that needs a human look.
CONFIDENCES = ("high", "medium", "low")
MARKER = "# <-"
_CODE = re.compile(r"TW[1-9]\d\d")

Report = Iterator[tuple[cst.CSTNode, str]]


class LintRule:
    """Base class of every trainwreck-lint rule: subclasses set the attributes and ``check``."""

    code: ClassVar[str] = ""
    category: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    operators: ClassVar[tuple[str, ...]] = ()
    confidence: ClassVar[str] = "high"
    valid: ClassVar[tuple[str, ...]] = ()
    invalid: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.code:
            return  # an abstract helper base
        problems = []
        if not _CODE.fullmatch(cls.code):
            problems.append(f"code {cls.code!r} is not TW followed by three digits")
        if cls.category not in CATEGORIES:
            problems.append(f"category {cls.category!r} not in {CATEGORIES}")
        if cls.confidence not in CONFIDENCES:
            problems.append(f"confidence {cls.confidence!r} not in {CONFIDENCES}")
        if not cls.summary or not inspect.getdoc(cls) or cls.__doc__ is None:
            problems.append("summary or docstring is empty")
        if not cls.valid or not cls.invalid:
            problems.append("needs at least one valid and one invalid example")
        for example in cls.invalid:
            if not marked_lines(example):
                problems.append(f"an invalid example marks no line with {MARKER!r}")
        if problems:
            raise TypeError(f"lint rule {cls.__name__}: " + "; ".join(problems))

    def check(self, script: Script) -> Report:
        """(node, message) for every finding in ``script``; the node gives the position."""
        raise NotImplementedError

    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    def __repr__(self) -> str:
        return f"<lint rule {self.code}>"


def example_source(example: str) -> str:
    """The code of an indented triple-quoted example, as a file."""
    return textwrap.dedent(example).strip("\n") + "\n"


# The model, optimizer and loss most examples train with.
TRAINING_SETUP = """
    import torch
    from torch import nn
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
"""


def in_training_script(body: str, setup: str = TRAINING_SETUP) -> str:
    """An example: ``setup`` (by default ``TRAINING_SETUP``) followed by ``body``, both
    indented triple-quoted code."""
    return example_source(setup) + example_source(body)


# A correct training step: the valid example of many gradient rules.
CORRECT_LOOP = in_training_script(
    """
    for x, y in loader:
        opt.zero_grad()
        criterion(model(x), y).backward()
        opt.step()
    """
)


def marked_lines(example: str) -> list[int]:
    """1-based lines of an example that end with the ``# <-`` marker."""
    lines = example_source(example).splitlines()
    return [number for number, line in enumerate(lines, 1) if line.rstrip().endswith(MARKER)]


@dataclass(frozen=True)
class LintFinding:
    path: str
    line: int
    column: int
    rule: LintRule
    message: str

    def format(self) -> str:
        return f"{self.path}:{self.line}:{self.column} {self.rule.code} {self.message}"

    def to_finding(self) -> Finding:
        operator = self.rule.operators[0] if len(self.rule.operators) == 1 else None
        return Finding(self.rule.category, operator, self.line, None, self.message, self.rule.code)
