"""The one severity vocabulary and the one declared type of a catalog label.

Severity says what a bug does to the trained model, worst first. ``timeout`` is its own
level (a run that did not finish in time is not a crash); ``misleads`` sits between
``degrades`` and ``cost_only``: the model is as good as the reference's, but a number the
script reports about it is wrong (model selection and early stopping would be misled).

A ``Label`` is either an *outcome* (it sets the severity: status, model quality, a lying
metric, extra cost) or a *symptom* (how someone watching would notice: curve shape,
initial loss, the telemetry mechanisms). A symptom's ``severity`` is only used when the run
has no quality measure at all (no held-out evaluation and no reported val metric): then the
curve is the best evidence of the outcome there is, and the catalog says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mutator.operator import SEVERITIES

if TYPE_CHECKING:
    from experiments.symptoms.reference import Reference

# Worst first; operators declare their expected severity from the same tuple.
SEVERITY_ORDER = SEVERITIES

Axis = Literal["outcome", "symptom"]
# check(run, reference, context) -> fired; context carries what the judge knows about the
# mutant (``scale_free``: its loss function or reduction differs from the reference's;
# ``outcome``: the outcome labels already given to this run).
Check = Callable[[Mapping[str, Any], "Reference", Mapping[str, Any]], bool]

PARTIAL = "@partial"  # suffix of a label read from the trace of a run that did not finish
CRASH_PREFIX = "crash:"


@dataclass(frozen=True)
class Label:
    name: str
    axis: Axis
    severity: str
    description: str  # plain words, shown in the docs and the report
    check: Check | None = None  # None: given by the judge itself (status labels)
    needs_finished_run: bool = True
    suppressed_by: tuple[str, ...] = ()
    hint: str = ""  # what a learner sees, never naming the code (the quiz's wording)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_ORDER:
            raise ValueError(f"label {self.name}: unknown severity {self.severity!r}")


LABELS: dict[str, Label] = {}


def declare(label: Label) -> Label:
    if label.name in LABELS:
        raise ValueError(f"label {label.name} declared twice")
    LABELS[label.name] = label
    return label


def base_name(label: str) -> str:
    """``grad_in_eval`` for ``grad_in_eval@partial``; ``crash`` for ``crash:ValueError``."""
    label = label.removesuffix(PARTIAL)
    return "crash" if label.startswith(CRASH_PREFIX) else label


def label_of(name: str) -> Label | None:
    return LABELS.get(base_name(name))


def severity_of(label: str, *, curve_is_outcome: bool = False) -> str:
    """The severity a label sets: outcome labels always, symptom labels only when the
    curve stands in for the outcome (``curve_is_outcome``: no quality measure at all)."""
    if label in ("silent", "invalid"):
        return "silent"
    declared = label_of(label)
    if declared is None:
        return "silent"
    if declared.axis == "outcome" or curve_is_outcome:
        return declared.severity
    return "silent"


def rank(severity: str) -> int:
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else len(SEVERITY_ORDER)


def axis_of(label: str) -> Axis:
    declared = label_of(label)
    return declared.axis if declared is not None else "symptom"
