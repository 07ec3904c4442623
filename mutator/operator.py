"""The operator contract: a small declarative class per bug.

An operator declares the node types it looks at (``node_types``) and implements one
method, ``plan(node, ctx) -> Edits | NonSite | None``: the replacements of one site keyed by
original node, None where it does not apply, or ``NonSite(reason)`` where the mutant would
not be its bug (the engine lists those as rejected). The engine calls it once per candidate
node. A bug that replaces just the site node derives from ``Swap`` and implements ``swap``
instead. An operator never walks the tree, numbers sites or touches files: the engine does;
the engine's static gate (``mutator.gate``) then checks every site before it is listed.
"""

from __future__ import annotations

import inspect
import math
import re
import textwrap
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

from mutator.witness import Witness, parse

if TYPE_CHECKING:
    from mutator.context import Context

# The sections of an operator's docstring, in order: "Bug: ... Impact: ... Fix: ... Check: ...".
DOC_SECTIONS = ("Bug", "Impact", "Fix", "Check")
_SECTION = re.compile(r"\b(" + "|".join(DOC_SECTIONS) + r"):\s+")

CATEGORIES = ("gradient", "loss", "mode", "device", "data", "optim", "numerics", "checkpoint")
# The one severity vocabulary, worst first: operators declare their expected level from it
# and the catalog measures into it (experiments.symptoms re-exports it as SEVERITY_ORDER).
SEVERITIES = (
    "crash",
    "timeout",
    "breaks_training",
    "degrades",
    "misleads",
    "cost_only",
    "silent",
)

# What a rewrite may return for a node: a new node, a removal, or several statements.
Replacement = cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel
# All node replacements of one site, keyed by original node (the keys are its footprint).
Edits = dict[cst.CSTNode, Replacement]

# What an operator may claim about its edits, for the static gate (``mutator.gate``) to hold
# it to: "shrinks_slice" (every slice bound it edits makes the sliced part smaller),
# "training_loader" (the DataLoader it edits feeds the loss that is backwarded).
CLAIMS = frozenset({"shrinks_slice", "training_loader"})


@dataclass(frozen=True)
class NonSite:
    """What ``plan``/``swap`` return for a place that looks like a site but whose mutant
    would not be the bug the operator names: an equivalent mutant known statically (the
    model has no dropout, the slice keeps every parameter) or an effect other than the name.
    The engine keeps it out of the sites and lists it with ``reason`` under ``mutate
    --rejected``, so a skipped place says why instead of vanishing."""

    reason: str


def code_block(text: str) -> str:
    """Example code as written in a class body: an indented triple-quoted block starting
    on the line after the quotes becomes the code it holds (dedented, no leading newline)."""
    return textwrap.dedent(text[1:] if text.startswith("\n") else text)


@dataclass(frozen=True)
class Param:
    """A declared operator parameter with its default and, optionally, its choices or
    its valid range in interval notation: ``"(0, inf)"``, ``"[0, 1)"``, ``"[1, inf)"``
    (numbers are always finite: ``inf`` only says there is no upper bound)."""

    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None
    valid: str | None = None

    def __post_init__(self) -> None:
        if self.valid is not None:
            _interval(self.valid)  # a malformed range fails when the operator is defined

    def problem(self, value: Any) -> str | None:
        """None if ``value`` is valid for this parameter, else why not (a few words)."""
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        if not math.isfinite(value):
            return f"must be a finite number{f' in {self.valid}' if self.valid else ''}"
        if self.valid is None:
            return None
        low_open, low, high, high_open = _interval(self.valid)
        if (
            value < low
            or (low_open and value == low)
            or value > high
            or (high_open and value == high)
        ):
            return f"is outside its valid range {self.valid}"
        return None


def _interval(text: str) -> tuple[bool, float, float, bool]:
    """``"(0, 1]"`` -> (low excluded, 0.0, 1.0, high excluded)."""
    text = text.strip()
    if len(text) < 5 or text[0] not in "([" or text[-1] not in ")]" or "," not in text:
        raise ValueError(f"valid range {text!r}: expected interval notation like '(0, 1]'")
    low, high = (float(part) for part in text[1:-1].split(","))
    return text[0] == "(", low, high, text[-1] == ")"


@dataclass(frozen=True)
class Example:
    """``before`` must yield exactly one site whose mutant renders as ``after``."""

    before: str
    after: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "before", code_block(self.before))
        object.__setattr__(self, "after", code_block(self.after))


class Operator(ABC):
    """Base class of every mutation operator.

    Subclasses set the class attributes below and implement ``plan`` (or derive from
    ``Swap``). Instances carry parameter values: ``ScaleLr(factor=0.01)``.
    """

    name: ClassVar[str] = ""
    category: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    expected: ClassVar[str] = ""
    # libcst node classes the engine offers to ``plan`` (one dispatch pass over the tree).
    node_types: ClassVar[tuple[type[cst.CSTNode], ...]] = ()
    parameters: ClassVar[Mapping[str, Param]] = {}
    # Parameter sets a full sweep runs besides the defaults (e.g. scale_lr factor=0.01).
    variants: ClassVar[tuple[Mapping[str, Any], ...]] = ()
    examples: ClassVar[tuple[Example, ...]] = ()
    non_examples: ClassVar[tuple[str, ...]] = ()
    # Static contexts (``mutator.semantics.roles.CONTEXTS``) where this bug can be: the engine
    # drops sites elsewhere. Plotting and export code never run the training the bug names;
    # operators on the training loss or step leave out ``eval`` too.
    contexts: ClassVar[frozenset[str]] = frozenset({"train", "eval", "setup", "unknown"})
    # What the static gate checks on top of every site's names and call keywords (``CLAIMS``).
    claims: ClassVar[frozenset[str]] = frozenset()
    # The runtime fact that makes a run this bug (``mutator.witness``): declared as
    # ``("<comparison> <fact>", "what the run shows")``, read as a ``Witness``; and the
    # crashes that are the bug's own symptom (regular expressions on "Type: message").
    witness: ClassVar[Witness | tuple[str, str] | None] = None
    crashes: ClassVar[tuple[str, ...]] = ()

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
            problem = spec.problem(value)
            if problem is not None:
                example = f"; e.g. {key}={spec.default}" if spec.default is not None else ""
                raise ValueError(f"operator {self.name!r}: {key}={value!r} {problem}{example}")
            values[key] = value
        self.params: dict[str, Any] = values

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        legacy = sorted({"match", "rewrite", "edits"} & set(vars(cls)))
        if legacy:
            raise TypeError(
                f"operator {cls.__name__}: {', '.join(legacy)} is no longer called; implement "
                "plan(node, ctx) -> Edits | None (or derive from Swap and implement swap)"
            )
        cls.non_examples = tuple(code_block(text) for text in cls.non_examples)
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
        if not cls.claims <= CLAIMS:
            problems.append(f"claims {sorted(cls.claims - CLAIMS)} not in {sorted(CLAIMS)}")
        if cls.witness is not None:
            try:
                cls.witness = parse(cls.witness, cls.crashes, cls.parameters)
            except ValueError as error:
                problems.append(str(error))
        for key, spec in cls.parameters.items():
            numeric = isinstance(spec.default, (int, float)) and not isinstance(spec.default, bool)
            if numeric and spec.choices is None and spec.valid is None:
                # A strength with no stated range lets factor=0 or p=7 through to a mutant.
                problems.append(f"numeric parameter {key!r} declares no valid range")
            for value in (spec.default, *(variant.get(key) for variant in cls.variants)):
                if value is not None and spec.problem(value) is not None:
                    problems.append(f"{key}={value!r} {spec.problem(value)}")
        if problems:
            raise TypeError(f"operator {cls.__name__}: " + "; ".join(problems))

    # -- what subclasses implement -------------------------------------------------
    @abstractmethod
    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        """The edits of the site at ``node`` (one of ``node_types``), None where the
        operator does not apply, or ``NonSite(reason)`` where it seems to and does not.
        Called once per candidate: decide and build together."""

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

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        """The docstring's sections after its first line, in the order written:
        ``{"Bug": ..., "Impact": ..., "Fix": ..., "Check": ...}`` for a complete one."""
        body = " ".join(line.strip() for line in cls.doc().splitlines()[1:])
        found = list(_SECTION.finditer(body))
        ends = [match.start() for match in found[1:]] + [len(body)]
        return {match.group(1): body[match.end() : end].strip() for match, end in zip(found, ends)}

    def __repr__(self) -> str:
        return f"<operator {self.label}>"


class Swap(Operator):
    """An operator whose bug replaces the site node alone: implement ``swap``."""

    @abstractmethod
    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        """The replacement of ``node``, None where the operator does not apply, or
        ``NonSite(reason)``."""

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        replacement = self.swap(node, ctx)
        if replacement is None or isinstance(replacement, NonSite):
            return replacement
        return {node: replacement}
