"""The one severity vocabulary and the one declared type of a catalog label.

Severity says what a bug does to the trained model, worst first. ``timeout`` is its own
level (a run that did not finish in time is not a crash); ``misleads`` sits between
``degrades`` and ``cost_only``: the model is as good as the reference's, but a number the
script reports about it is wrong (model selection and early stopping would be misled).

The catalog measures into one more level than operators declare: ``unjudged``, between
``degrades`` and ``misleads``. It is not a verdict but the absence of one: the run finished,
but nothing measured the model (no held-out evaluation, no reported validation number), or
its reference had too few seeds for a spread, or its only evidence also shows on the
unmutated control. Such a run may be ``silent`` or ``degrades``; the tool does not guess.
It sits below ``degrades`` so that a mutant whose seeds are half ``degrades`` and half
``unjudged`` reads ``unjudged`` (the median rule of ``seeds``), and above ``misleads`` and
``cost_only`` because those say the model is fine, which an unmeasured run cannot say.

A ``Label`` is either an *outcome* (it sets the severity: status, model quality, a lying
metric, extra cost) or a *symptom* (how someone watching would notice: curve shape,
initial loss, the telemetry mechanisms). Without a quality measure a symptom sets the
severity only when it proves the training broke (``breaks_training``: no learning,
divergence); a curve cannot tell ``silent`` from ``degrades``.

``MARKERS`` stand in a run's label list where no label is: ``silent`` (nothing fired,
measured), ``unjudged`` (nothing fired, nothing measured), ``too_few_seeds`` (nothing could
be judged against a spread), ``invalid``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mutator.operator import SEVERITIES

if TYPE_CHECKING:
    from experiments.symptoms.reference import Reference

UNJUDGED = "unjudged"
TOO_FEW_SEEDS = "too_few_seeds"
MARKERS = ("silent", UNJUDGED, TOO_FEW_SEEDS, "invalid")
# Worst first; operators declare their expected severity from ``SEVERITIES`` (every level
# but ``unjudged``, which is a measurement's, never a bug's).
SEVERITY_ORDER = (
    *SEVERITIES[: SEVERITIES.index("degrades") + 1],
    UNJUDGED,
    *SEVERITIES[SEVERITIES.index("degrades") + 1 :],
)

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
    # Judged against the reference's seed-to-seed spread (an effect size): needs at least
    # ``MIN_SPREAD_SEEDS`` reference runs. Status labels and ``nan`` do not.
    needs_spread: bool = True
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
    """The severity a label sets: outcome labels always; symptom labels only when the
    curve stands in for the outcome (``curve_is_outcome``: no quality measure at all), and
    then only a broken training (a curve proves that, not ``degrades`` against ``silent``)."""
    if label in (UNJUDGED, TOO_FEW_SEEDS):
        return UNJUDGED
    if label in ("silent", "invalid"):
        return "silent"
    declared = label_of(label)
    if declared is None:
        return "silent"
    if declared.axis == "outcome":
        return declared.severity
    if curve_is_outcome and rank(declared.severity) <= rank("breaks_training"):
        return declared.severity
    return "silent"


def worst(severities: list[str]) -> str:
    return min(severities, key=rank) if severities else "silent"


def rank(severity: str) -> int:
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else len(SEVERITY_ORDER)


def axis_of(label: str) -> Axis:
    declared = label_of(label)
    return declared.axis if declared is not None else "symptom"
