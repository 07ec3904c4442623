"""The detector API: findings, the four kinds of detector, and the registry.

A detector looks at a mutant (or an unmutated script) and says what it found. Kinds:

- ``static``: source text -> findings (``check_source``).
- ``dynamic``: a finished run's trace records and result row -> findings, offline
  (``check_run``).
- ``online``: hooks inside the run, findings carry the step at which they fired. Our own
  online detectors replay a stored trace record by record and decide from the prefix
  only, so the step they report is the step at which they would have fired live.
- ``external``: a third-party command run on a mutant file, its output parsed.

Detectors are registered by name with ``@register``; other packages add theirs through
the ``trainwreck.detectors`` entry-point group (an entry point names a Detector class).
"""

from __future__ import annotations

import difflib
import importlib
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

from mutator.operator import CATEGORIES

KINDS = ("static", "dynamic", "online", "external")
INPUTS = ("source", "run")
# External tools report things outside our categories (deprecations, security).
UNKNOWN_CATEGORY = "unknown"
FINDING_CATEGORIES = (*CATEGORIES, UNKNOWN_CATEGORY)
ENTRY_POINT_GROUP = "trainwreck.detectors"
_BUILTIN_MODULES = (
    "experiments.bench.lint",
    "experiments.bench.rules",
    "experiments.bench.diagnoser",
    "experiments.bench.external",
)


@dataclass(frozen=True)
class Finding:
    """One thing a detector reports: a bug category and, where it can, more detail."""

    category: str
    operator: str | None = None
    line: int | None = None
    step: int | None = None
    message: str = ""
    rule: str = ""  # the detector's own code for it (TW101, TOR102, no_update...)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ScriptInput:
    """What a source-level detector sees: the code, a display path, how to run it."""

    source: str
    path: str
    loop: str = ""
    argv: tuple[str, ...] = ()
    seed: int = 0


@dataclass(frozen=True)
class RunInput:
    """What a run-level detector sees: the trace records and the result row of one run."""

    records: list[dict[str, Any]] = field(hash=False)
    result: dict[str, Any] = field(hash=False)
    folder: Path | None = None


class DetectorError(Exception):
    """The detector failed on one input (crash, timeout, unreadable output)."""


class GarbageOutput(DetectorError):
    """A tool answered with output that does not parse as its report format."""


class Detector(ABC):
    """Base of every detector. Subclasses set the class attributes and implement ``detect``."""

    name: ClassVar[str] = ""
    kind: ClassVar[str] = ""
    inputs: ClassVar[str] = "source"  # "source": ScriptInput, "run": RunInput
    summary: ClassVar[str] = ""
    learned: ClassVar[bool] = False  # needs ``fit`` on other loops' runs before ``detect``
    # ``suspicion`` gives a score per input (higher: more likely buggy), so the scorer can
    # draw detection against false-positive rate over every threshold, not one point.
    scored: ClassVar[bool] = False
    timeout_s: ClassVar[float] = 60.0

    def unavailable(self) -> str | None:
        """Why this detector cannot run here (a missing tool), or None when it can."""
        return None

    def fit(self, runs: list[RunInput]) -> None:
        """Train on labelled runs (learned detectors only)."""
        raise NotImplementedError(f"detector {self.name!r} is not learned")

    def fit_summary(self) -> str:
        """One line on what the last ``fit`` chose (a calibrated threshold...), or ""."""
        return ""

    def suspicion(self, item: ScriptInput | RunInput) -> float | None:
        """A score for one input, higher when more likely buggy (``scored`` detectors)."""
        return None

    @abstractmethod
    def detect(self, item: ScriptInput | RunInput) -> list[Finding]:
        """Findings for one input (the scorer enforces timeouts and validates output)."""


class StaticDetector(Detector):
    kind = "static"
    inputs = "source"

    def detect(self, item: ScriptInput | RunInput) -> list[Finding]:
        assert isinstance(item, ScriptInput)
        return self.check_source(item)

    @abstractmethod
    def check_source(self, script: ScriptInput) -> list[Finding]: ...


class DynamicDetector(Detector):
    kind = "dynamic"
    inputs = "run"

    def detect(self, item: ScriptInput | RunInput) -> list[Finding]:
        assert isinstance(item, RunInput)
        return self.check_run(item)

    @abstractmethod
    def check_run(self, run: RunInput) -> list[Finding]: ...


# -- registry ------------------------------------------------------------------------------

_registered: dict[str, type[Detector]] = {}


def register(cls: type[Detector]) -> type[Detector]:
    """Class decorator: make a detector known by its ``name``."""
    if not cls.name or cls.kind not in KINDS or cls.inputs not in INPUTS:
        raise TypeError(
            f"detector {cls.__name__}: needs a name, a kind in {KINDS}, inputs in {INPUTS}"
        )
    existing = _registered.get(cls.name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise TypeError(f"detector name {cls.name!r} is registered twice")
    _registered[cls.name] = cls
    return cls


@cache
def detector_classes() -> dict[str, type[Detector]]:
    """name -> class for the built-in detectors and those of installed packages."""
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)
    found = dict(_registered)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        loaded = entry.load()
        if not (isinstance(loaded, type) and issubclass(loaded, Detector)):
            raise TypeError(f"entry point {entry.name!r} ({entry.value}) is not a Detector class")
        found.setdefault(loaded.name or entry.name, loaded)
    return dict(sorted(found.items()))


def get_detector(name: str, **options: Any) -> Detector:
    """A detector instance by name; unknown names suggest close matches."""
    classes = detector_classes()
    if name not in classes:
        close = difflib.get_close_matches(name, list(classes), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown detector {name!r}{hint} (known: {', '.join(classes)})")
    return classes[name](**options)


def validate_findings(value: Any) -> list[Finding]:
    """The detector's answer as a list of findings, or GarbageOutput if it is not one."""
    if not isinstance(value, list):
        raise GarbageOutput(f"expected a list of findings, got {type(value).__name__}")
    for item in value:
        if not isinstance(item, Finding):
            raise GarbageOutput(f"expected Finding, got {type(item).__name__}: {item!r:.80}")
        if item.category not in FINDING_CATEGORIES:
            raise GarbageOutput(f"finding with unknown category {item.category!r}")
        if item.line is not None and (not isinstance(item.line, int) or item.line < 1):
            raise GarbageOutput(f"finding with bad line {item.line!r}")
        if item.step is not None and (not isinstance(item.step, int) or item.step < 0):
            raise GarbageOutput(f"finding with bad step {item.step!r}")
    return value
