"""One place where one operator applies: its identity, where it is, and what it edits.

Its own module so that the engine, the static gate (``mutator.gate``) and the higher-order
draw (``mutator.higher_order``) all read the type without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from mutator.operator import Operator, Replacement


@dataclass(frozen=True)
class Span:
    start: tuple[int, int]
    end: tuple[int, int]

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end


@dataclass
class Site:
    """One place where one operator applies."""

    operator: Operator
    node: cst.CSTNode
    scope: str
    ordinal: int
    line: int
    column: int
    target: str
    edits: dict[int, tuple[cst.CSTNode, Replacement]] = field(repr=False, default_factory=dict)
    footprint: tuple[Span, ...] = ()
    # Where the site is: train | eval | setup | export | plot | unknown (semantics.roles).
    context: str = "unknown"

    @property
    def identity(self) -> str:
        return f"{self.target}::{self.scope}::{self.operator.label}#{self.ordinal}"

    def overlaps(self, other: Site) -> bool:
        return any(a.overlaps(b) for a in self.footprint for b in other.footprint)
