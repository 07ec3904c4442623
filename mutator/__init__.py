"""The mutation engine: parse once, find sites, apply by node identity, name, diff.

Imports libcst only. Operators live in the ``mutations`` package; the engine takes
operator instances, so it never depends on which operators exist.
"""

from mutator.engine import (
    Mutant,
    MutationError,
    Site,
    SourceFile,
    choose_higher_order,
)
from mutator.operator import CATEGORIES, SEVERITIES, Edits, Example, Operator, Param, Swap

__all__ = [
    "CATEGORIES",
    "SEVERITIES",
    "Edits",
    "Example",
    "Mutant",
    "MutationError",
    "Operator",
    "Param",
    "Site",
    "SourceFile",
    "Swap",
    "choose_higher_order",
]
