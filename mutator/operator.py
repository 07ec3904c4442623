"""The operator contract: a small declarative class per bug.

An operator says *where* it applies (``node_types`` + ``match``) and *how* it rewrites
a site (``rewrite``, or ``edits`` when a bug touches more than one node, e.g. moving a
statement). It never walks the tree, numbers sites or touches files: the engine does.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

if TYPE_CHECKING:
    from mutator.context import Context

CATEGORIES = ("gradient", "loss", "mode", "device", "data", "optim", "numerics", "checkpoint")
SEVERITIES = ("crash", "breaks_training", "degrades", "silent", "cost_only")

# What a rewrite may return for a node: a new node, a removal, or several statements.
Replacement = cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel


@dataclass(frozen=True)
class Param:
    """A declared operator parameter with its default and, optionally, catalog variants."""

    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Example:
    """``before`` must yield exactly one site whose mutant renders as ``after``."""

    before: str
    after: str
    params: Mapping[str, Any] = field(default_factory=dict)


class Operator:
    """Base class of every mutation operator.

    Subclasses set the class attributes below and implement ``match`` and ``rewrite``
    (or ``edits``). Instances carry parameter values: ``ScaleLr(factor=0.01)``.
    """

    name: ClassVar[str] = ""
    category: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    expected: ClassVar[str] = ""
    # libcst node classes the engine offers to ``match`` (one dispatch pass over the tree).
    node_types: ClassVar[tuple[type[cst.CSTNode], ...]] = ()
    parameters: ClassVar[Mapping[str, Param]] = {}
    # Parameter sets a full sweep runs besides the defaults (e.g. scale_lr factor=0.01).
    variants: ClassVar[tuple[Mapping[str, Any], ...]] = ()
    examples: ClassVar[tuple[Example, ...]] = ()
    non_examples: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **params: Any) -> None:
        unknown = set(params) - set(self.parameters)
        if unknown:
            allowed = ", ".join(sorted(self.parameters)) or "none"
            raise ValueError(
                f"operator {self.name!r} has no parameter {sorted(unknown)[0]!r} (parameters: {allowed})"
            )
        values = {key: spec.default for key, spec in self.parameters.items()}
        for key, value in params.items():
            spec = self.parameters[key]
            if spec.choices is not None and value not in spec.choices:
                raise ValueError(
                    f"operator {self.name!r}: {key}={value!r} is not one of {list(spec.choices)}"
                )
            if spec.default is not None and not isinstance(value, type(spec.default)):
                # int for a float parameter is fine; anything else is a user mistake.
                if not (isinstance(spec.default, float) and isinstance(value, int)):
                    raise ValueError(
                        f"operator {self.name!r}: {key} must be {type(spec.default).__name__}, got {value!r}"
                    )
                value = float(value)
            values[key] = value
        self.params: dict[str, Any] = values

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if inspect.isabstract(cls) or not cls.name:
            return
        problems = []
        if cls.category not in CATEGORIES:
            problems.append(f"category {cls.category!r} not in {CATEGORIES}")
        if cls.expected not in SEVERITIES:
            problems.append(f"expected {cls.expected!r} not in {SEVERITIES}")
        if not cls.node_types:
            problems.append("node_types is empty")
        if not cls.summary:
            problems.append("summary is empty")
        if problems:
            raise TypeError(f"operator {cls.__name__}: " + "; ".join(problems))

    # -- what subclasses implement -------------------------------------------------
    # Either ``match`` + ``rewrite`` (one node replaced), or ``match`` + ``edits`` (several
    # nodes), or ``plan`` alone when deciding where the bug goes already builds its edits.
    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        """Is ``node`` a site of this operator? ``node`` is one of ``node_types``."""
        if self._plans():
            return self.plan(node, ctx) is not None
        raise NotImplementedError

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> Replacement:
        """The replacement of the site node."""
        raise NotImplementedError

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        """All node replacements of one site, keyed by original node.

        Override when a bug touches several nodes (a moved statement removes one and
        extends another). The keys define the site's footprint for overlap checks.
        """
        if self._plans():
            planned = self.plan(node, ctx)
            assert planned is not None, f"{self.name}: edits() asked for a node it did not match"
            return planned
        return {node: self.rewrite(node, ctx)}

    def plan(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        """The site's edits, or None where the operator does not apply (``match`` and
        ``edits`` then follow from it)."""
        return None

    @classmethod
    def _plans(cls) -> bool:
        return cls.plan is not Operator.plan

    # -- identity ------------------------------------------------------------------
    @property
    def label(self) -> str:
        """``name`` alone with default parameters, else ``name(k=v,...)``."""
        changed = {
            key: value
            for key, value in self.params.items()
            if value != self.parameters[key].default
        }
        if not changed:
            return self.name
        inner = ",".join(f"{key}={value}" for key, value in sorted(changed.items()))
        return f"{self.name}({inner})"

    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    def __repr__(self) -> str:
        return f"<operator {self.label}>"
