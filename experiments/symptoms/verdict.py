"""One mutant run (one seed) judged against its reference: its status labels, then every
declared label whose check fires (outcomes, costs, curve symptoms, lies), the labels a
stronger one suppresses dropped, and labels read from a run cut short marked partial.

No verdict without a measure (docs/truth.md): a run's severity counts only what was
measured. With fewer than ``MIN_SPREAD_SEEDS`` finished reference runs no label that needs
a spread is judged (the run's labels say ``too_few_seeds``, its severity is what its status
proves, else ``unjudged``). A finished run with no quality measure is at least
``unjudged`` (only a broken training or a status rises above it); so is one whose reported
number is better than the reference can reach (``too_good``) where no held-out evaluation
checks it. A label the loop's noop control also shows (``control``) sets no severity; where
it alone would have set one, the run is ``unjudged``.

A reported number that went through the mutated code cannot vouch for the mutant: where the
run's quality is a number the script reports (no held-out evaluation) and its changed lines
ran while the script evaluated (``reach_eval_hits``, harness/reach.py), the run is at least
``unjudged`` (``through_mutant``); a worse number, a broken curve or a status still stand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from experiments.symptoms.curve import SYMPTOMS
from experiments.symptoms.outcome import COSTS, LIES, OUTCOMES, quality_source
from experiments.symptoms.reference import Reference, is_number
from experiments.symptoms.vocabulary import (
    PARTIAL,
    TOO_FEW_SEEDS,
    UNJUDGED,
    axis_of,
    base_name,
    label_of,
    rank,
    severity_of,
    worst,
)

# Exceptions that make a run invalid rather than a crash of the mutant.
NOT_CRASHES = ("SyntaxError", "IndentationError", "TabError", "SystemExit", "ModuleNotFoundError")
EARLY_STOP_STATUSES = ("crash", "timeout", "oom", "killed", "nan")
# Quality measures the script itself computes (the mutant may have changed them).
REPORTED = ("val_metric", "val_loss")


def scale_changes(category: str | None) -> bool:
    """A mutant of the loss function or its reduction: its loss is on another scale."""
    return "loss" in str(category or "").split("+")


@dataclass(frozen=True)
class RunVerdict:
    labels: list[str]
    quality: str | None  # which number measured the model (None: none did)
    finished: bool
    # Base names of the labels the loop's noop control also shows: not evidence here.
    control: frozenset[str] = frozenset()
    # The quality is a reported number computed while the changed lines ran (evaluating).
    through_mutant: bool = False

    @property
    def severity(self) -> str:
        """The worst level this run's evidence sets (see the module docstring)."""
        # A number computed through the mutated code can show an effect, never its absence:
        # as without a measure, the curve may prove a broken training, and nothing less.
        measured = self.quality is not None and not self.through_mutant
        curve_is_outcome = self.finished and not measured

        def level(label: str) -> str:
            return severity_of(label, curve_is_outcome=curve_is_outcome)

        counted = [label for label in self.labels if base_name(label) not in self.control]
        levels = [level(label) for label in counted]
        if curve_is_outcome:
            levels.append(UNJUDGED)
        if self.quality in REPORTED and "too_good" in counted:
            levels.append(UNJUDGED)  # a reported number nothing checks, too good to trust
        shown = [level(label) for label in self.labels if base_name(label) in self.control]
        if rank(worst(shown)) < rank(worst(levels)):
            levels.append(UNJUDGED)  # only the control's own labels speak here
        return worst(levels)


def judge_run(run: Mapping[str, Any], ref: Reference, *, scale_free: bool = False) -> list[str]:
    """The labels of one mutant run (one seed) against the reference distribution."""
    return verdict(run, ref, scale_free=scale_free).labels


def verdict(
    run: Mapping[str, Any],
    ref: Reference,
    *,
    scale_free: bool = False,
    control: frozenset[str] = frozenset(),
) -> RunVerdict:
    status = run.get("status")
    if status == "invalid":
        return RunVerdict([crash_before_training(run, ref) or "invalid"], None, False)
    labels = status_labels(run)
    # A curve cut short covers a different stretch of training than the reference's, so
    # "final", "last half" and validation features of it are not comparable: only labels
    # that do not need a finished run are judged, and they are marked as partial.
    stopped = status in EARLY_STOP_STATUSES or is_number(run.get("first_nan_step"))
    quality = None if stopped else quality_source(run, ref, scale_free=scale_free)
    context: dict[str, Any] = {
        "scale_free": scale_free,
        "quality": quality,
        "outcome": labels,
        "symptoms": [],
    }
    for group in (OUTCOMES, COSTS, SYMPTOMS, LIES):
        for label in group:
            if stopped and label.needs_finished_run:
                continue
            if label.needs_spread and not ref.has_spread:
                continue
            if label.check is not None and label.check(run, ref, context):
                labels.append(label.name)
        labels = _unsuppressed(labels)
        context["outcome"] = [label for label in labels if axis_of(label) == "outcome"]
        context["symptoms"] = [label for label in labels if axis_of(label) == "symptom"]
    if stopped:
        labels = [_mark_partial(label) for label in labels]
    through = quality in REPORTED and ran_while_evaluating(run)
    if not labels:
        measured = quality and not through
        labels = [TOO_FEW_SEEDS if not ref.has_spread else "silent" if measured else UNJUDGED]
    return RunVerdict(labels, quality, not stopped, control, through)


def ran_while_evaluating(run: Mapping[str, Any]) -> bool:
    """The mutant's changed lines ran with autograd off outside any module forward (the
    harness's ``reach_eval_hits``): what the script computed then went through them."""
    hits = run.get("reach_eval_hits")
    return is_number(hits) and hits > 0


def _unsuppressed(labels: list[str]) -> list[str]:
    present = {base_name(label) for label in labels}
    kept = []
    for label in labels:
        declared = label_of(label)
        if declared is None or not present & set(declared.suppressed_by):
            kept.append(label)
    return kept


def _mark_partial(label: str) -> str:
    """Status labels are the run's end; everything else was read from a partial trace."""
    if base_name(label) in ("crash", "oom", "timeout", "nan") or label == "invalid":
        return label
    return label + PARTIAL


def crash_before_training(run: Mapping[str, Any], ref: Reference) -> str | None:
    """``crash:<Type>`` for an ``invalid`` run that is really the mutant crashing.

    The harness calls a run ``invalid`` when it raised before any training step. When
    the unmutated loop trains fine on the same arguments (the reference has ok runs),
    an ordinary exception there (a shape or dtype error at the first forward or loss) is
    the mutant's crash; a syntax error or an argument-parsing exit is not.
    """
    exc_type = run.get("exc_type")
    if not isinstance(exc_type, str) or not exc_type or exc_type in NOT_CRASHES:
        return None
    return f"crash:{exc_type}" if ref.n_runs > 0 else None


def status_labels(run: Mapping[str, Any]) -> list[str]:
    status, exc_type = run.get("status"), run.get("exc_type")
    if status == "crash":
        return [f"crash:{exc_type or 'Unknown'}"]
    if status == "oom":
        return ["oom"]
    if status == "killed":
        return ["crash:Killed"]
    if status == "timeout":
        return ["timeout"]
    return []
